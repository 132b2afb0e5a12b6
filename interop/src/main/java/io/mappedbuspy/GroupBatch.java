package io.mappedbuspy;

import io.mappedbuspy.internal.*;

/**
 * Records a group member took at once ({@link GroupReader#readBatch}; Python's {@code read_batch}): up to
 * {@link #capacity()} deliveries with a copy of each record's payload and metadata, made once and reused for every
 * batch. Settle them with {@link GroupReader#ackBatch} (or one by one: {@link #record} gives each delivery).
 * On a framed bus each is a whole message, of any size: {@link #message}, {@link #readBuffer}, {@link #payload} and
 * {@link #topic} read it.
 *
 * <pre>
 * GroupBatch batch = new GroupBatch(256, member.recordSize());
 * byte[] buf = new byte[member.recordSize()];
 * while (member.readBatch(batch, 1, TimeUnit.SECONDS) &gt; 0) {
 *     for (int i = 0; i &lt; batch.size(); i++) {
 *         handle(buf, batch.readBuffer(i, buf, 0));
 *     }
 *     member.ackBatch(batch);
 * }
 * </pre>
 */
public final class GroupBatch {
    private final int recordSize;
    private final byte[] payloads;
    private final int[] metas;
    private final GroupRecord[] records;
    private int size;
    // a framed bus's: each message's payload and flags (made at the first framed message)
    private byte[][] frames;
    private int[] flags;

    /**
     * An empty batch.
     *
     * @param capacity   the most records a batch takes (at least 1)
     * @param recordSize the bus's record size ({@link GroupReader#recordSize()})
     */
    public GroupBatch(int capacity, int recordSize) {
        if (capacity < 1 || recordSize < 1 || (long) capacity * recordSize > Integer.MAX_VALUE - 8) {
            throw new IllegalArgumentException("a batch takes 1 or more records of 1 or more bytes, at most 2 GiB in "
                    + "all; got capacity " + capacity + ", recordSize " + recordSize);
        }
        this.recordSize = recordSize;
        payloads = new byte[capacity * recordSize];
        metas = new int[capacity];
        records = new GroupRecord[capacity];
    }

    /** @return the most records a batch takes */
    public int capacity() {
        return records.length;
    }

    /** @return the record size this batch was made for */
    public int recordSize() {
        return recordSize;
    }

    /** @return records in the batch now */
    public int size() {
        return size;
    }

    /**
     * @param i an index below {@link #size()}
     * @return the delivery of record {@code i}, to settle
     */
    public GroupRecord record(int i) {
        return records[checked(i)];
    }

    /**
     * @param i an index below {@link #size()}
     * @return record {@code i}'s metadata: its type (an object message) or byte length (a byte array)
     */
    public int meta(int i) {
        return metas[checked(i)];
    }

    /**
     * @param i an index below {@link #size()}
     * @return record {@code i}'s topic (a framed bus), or null: none
     */
    public String topic(int i) {
        return records[checked(i)].topic();
    }

    /**
     * Message {@code i} of a framed bus, whole.
     *
     * @param i an index below {@link #size()}
     * @return its position, topic, flags and payload (the batch's array, not a copy)
     * @throws IllegalStateException if the batch holds records of a bus without frames
     */
    public FrameMessage message(int i) {
        byte[] b = frame(i);
        return new FrameMessage(records[i].position(), records[i].topic(), flags[i], b);
    }

    // Message i's payload (a framed batch).
    private byte[] frame(int i) {
        checked(i);
        if (frames == null || frames[i] == null) {
            throw new IllegalStateException("record " + i + " is of a bus without frames: read it with readBuffer or"
                    + " payload");
        }
        return frames[i];
    }

    /**
     * Copies record {@code i}'s bytes (its metadata holds their number), as {@link GroupReader#readBuffer}.
     *
     * @param i      an index below {@link #size()}
     * @param dst    destination array
     * @param offset index of the first destination byte
     * @return the number of bytes copied
     * @throws CorruptBusException if the stored length is negative or larger than the record size
     */
    public int readBuffer(int i, byte[] dst, int offset) throws CorruptBusException {
        checked(i);
        if (frames != null && frames[i] != null) { // a framed bus: the whole message
            byte[] b = frames[i];
            if (offset < 0 || offset > dst.length - b.length) {
                throw new IllegalArgumentException("no room for " + b.length + " bytes at offset " + offset
                        + " in an array of length " + dst.length);
            }
            System.arraycopy(b, 0, dst, offset, b.length);
            return b.length;
        }
        int length = metas[i];
        if (length < 0 || length > recordSize) {
            throw new CorruptBusException("record at position " + records[i].position() + " has length " + length
                    + " outside 0.." + recordSize + " (not a byte-array record)");
        }
        if (offset < 0 || offset > dst.length - length) {
            throw new IllegalArgumentException("no room for " + length + " bytes at offset " + offset
                    + " in an array of length " + dst.length);
        }
        System.arraycopy(payloads, i * recordSize, dst, offset, length);
        return length;
    }

    /**
     * The whole payload area of record {@code i} (the record size's bytes, whatever its metadata), as a read-only
     * view of the batch's buffer: valid until the next batch is read into it. On a framed bus: the whole message's
     * payload.
     *
     * @param i an index below {@link #size()}
     * @return the view
     */
    public java.nio.ByteBuffer payload(int i) {
        checked(i);
        if (frames != null && frames[i] != null) {
            return java.nio.ByteBuffer.wrap(frames[i]).asReadOnlyBuffer().order(java.nio.ByteOrder.LITTLE_ENDIAN);
        }
        return java.nio.ByteBuffer.wrap(payloads, checked(i) * recordSize, recordSize).slice().asReadOnlyBuffer()
                .order(java.nio.ByteOrder.LITTLE_ENDIAN); // little-endian, as the bus
    }

    private int checked(int i) {
        if (i < 0 || i >= size) {
            throw new IndexOutOfBoundsException("record " + i + " of a batch of " + size);
        }
        return i;
    }

    void clear() {
        size = 0;
        java.util.Arrays.fill(records, null);
        if (frames != null) {
            java.util.Arrays.fill(frames, null);
        }
    }

    boolean full() {
        return size == records.length;
    }

    // Adds the delivery rec, its payload copied from m at payloadAt and its metadata.
    void add(GroupRecord rec, MemoryMappedFile m, long payloadAt, int meta) {
        m.getBytes(payloadAt, payloads, size * recordSize, recordSize);
        metas[size] = meta;
        records[size++] = rec;
    }

    // Adds the delivery rec of a framed message: its payload (taken, not copied), metadata and flags.
    void addFramed(GroupRecord rec, byte[] payload, int meta, int messageFlags) {
        if (frames == null) {
            frames = new byte[records.length][];
            flags = new int[records.length];
        }
        frames[size] = payload;
        flags[size] = messageFlags;
        metas[size] = meta;
        records[size++] = rec;
    }
}
