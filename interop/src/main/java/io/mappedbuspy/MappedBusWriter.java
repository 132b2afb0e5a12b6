package io.mappedbuspy;

import java.io.EOFException;
import java.io.IOException;
import java.util.Objects;

/**
 * Appends records to a bus file. Any number of writers (in any processes) may share a file; each record
 * is allocated with a fetch-and-add on the limit, filled, then committed with a CAS of its status 0 -> 1.
 *
 * <p>Not thread-safe: use one writer per thread.
 */
public final class MappedBusWriter implements AutoCloseable {
    private final String path;
    private final long fileSize;
    private final int recordSize;
    private final long slot;
    private MemoryMappedFile mem;
    // Accept a file of another owner, or writable by group/others (see setAllowForeign).
    private boolean allowForeign;
    // A rolling bus's segment: exists already, no sidecar metadata, may be unlinked by retention while mapped.
    boolean segment;
    private boolean closed;

    /**
     * Creates a writer; call {@link #open()} before writing.
     *
     * @param path       bus file path (created by {@link #open()} if absent)
     * @param fileSize   logical file size in bytes, at least {@code 16 + recordSize}
     * @param recordSize payload size of every record, in bytes
     * @throws IllegalArgumentException if a size is out of range
     */
    public MappedBusWriter(String path, long fileSize, int recordSize) {
        this.path = Objects.requireNonNull(path, "path");
        checkSizes(fileSize, recordSize);
        this.fileSize = fileSize;
        this.recordSize = recordSize;
        this.slot = Layout.slotSize(recordSize);
    }

    static void checkSizes(long fileSize, int recordSize) {
        if (recordSize <= 0 || recordSize > Integer.MAX_VALUE - Layout.HEADER_SIZE) {
            throw new IllegalArgumentException("recordSize must be in 1.."
                    + (Integer.MAX_VALUE - Layout.HEADER_SIZE) + ", got " + recordSize);
        }
        long min = Layout.FIRST_RECORD_OFFSET + Layout.slotSize(recordSize);
        if (fileSize < min) {
            throw new IllegalArgumentException("fileSize " + fileSize + " cannot hold one record of size "
                    + recordSize + " (needs at least " + min + ")");
        }
    }

    static void checkLimit(long limit, int recordSize, String path) throws CorruptBusException {
        if (limit != 0 && !Layout.isRecordBoundary(limit, recordSize)) {
            throw new CorruptBusException("limit " + limit + " in " + path
                    + " is not on a record boundary for recordSize " + recordSize
                    + " (wrong recordSize, or a corrupt file)");
        }
    }

    /**
     * Maps the file (creating it if absent) and initialises its limit to the first record if it is new.
     *
     * @return this writer
     * @throws IOException          if the file cannot be opened or mapped
     * @throws CorruptBusException  if the limit is not on a record boundary for this record size
     * @throws IllegalStateException if already open or closed
     */
    public MappedBusWriter open() throws IOException {
        if (closed || mem != null) {
            throw new IllegalStateException("writer for " + path + " is " + (closed ? "closed" : "already open"));
        }
        MemoryMappedFile m = new MemoryMappedFile(path, fileSize);
        try {
            m.compareAndSetLong(Layout.LIMIT_OFFSET, 0, Layout.FIRST_RECORD_OFFSET);
            checkLimit(m.getLongAcquire(Layout.LIMIT_OFFSET), recordSize, path);
        } catch (IOException | RuntimeException e) {
            m.close();
            throw e;
        }
        mem = m;
        return this;
    }

    /**
     * Writes an object message as one record.
     *
     * @param message the message; its fields go to the payload, its type to the metadata
     * @return true if committed; false if a reader had already rolled the record back (too slow)
     * @throws EOFException if the bus is full
     */
    public boolean write(MappedBusMessage message) throws EOFException {
        MemoryMappedFile m = mem();
        long offset = allocate(m);
        m.putInt(offset + Layout.METADATA_OFFSET, message.type());
        message.write(m, offset + Layout.PAYLOAD_OFFSET);
        return m.casStatus(offset, Layout.STATUS_NOT_SET, Layout.STATUS_COMMITTED);
    }

    /**
     * Writes bytes as one record; the metadata holds {@code length}.
     *
     * @param src    source array
     * @param offset index of the first byte
     * @param length number of bytes, at most the record size
     * @return true if committed; false if a reader had already rolled the record back (too slow)
     * @throws EOFException             if the bus is full
     * @throws IllegalArgumentException if {@code length} exceeds the record size or the range is outside
     *                                  {@code src} (checked before anything is allocated)
     */
    public boolean write(byte[] src, int offset, int length) throws EOFException {
        if (length < 0 || length > recordSize) {
            throw new IllegalArgumentException("length " + length + " must be in 0.." + recordSize);
        }
        if (offset < 0 || offset > src.length - length) {
            throw new IllegalArgumentException("range offset=" + offset + " length=" + length
                    + " is outside the source array of length " + src.length);
        }
        MemoryMappedFile m = mem();
        long pos = allocate(m);
        m.putInt(pos + Layout.METADATA_OFFSET, length);
        m.putBytes(pos + Layout.PAYLOAD_OFFSET, src, offset, length);
        return m.casStatus(pos, Layout.STATUS_NOT_SET, Layout.STATUS_COMMITTED);
    }

    private long allocate(MemoryMappedFile m) throws EOFException {
        long offset = m.getAndAddLong(Layout.LIMIT_OFFSET, slot);
        if (offset < Layout.FIRST_RECORD_OFFSET || offset + slot > fileSize) {
            throw new EOFException("bus full: record at offset " + offset + " of " + slot
                    + " bytes does not fit in fileSize " + fileSize + " (" + path + ")");
        }
        return offset;
    }

    private MemoryMappedFile mem() {
        MemoryMappedFile m = mem;
        if (m == null) {
            throw new IllegalStateException("writer for " + path + " is " + (closed ? "closed" : "not open"));
        }
        return m;
    }

    /**
     * The record payload size.
     *
     * @return record size in bytes
     */
    public int recordSize() {
        return recordSize;
    }

    /**
     * The logical file size.
     *
     * @return file size in bytes
     */
    public long fileSize() {
        return fileSize;
    }

    /** Releases the mapping; later writes throw {@link IllegalStateException}. Idempotent. */
    @Override
    public void close() {
        closed = true;
        if (mem != null) {
            mem.close();
            mem = null;
        }
    }

    /**
     * Accepts a bus file owned by another user or writable by group or others, which {@link #open()} refuses
     * by default (another user could read and forge its records). Call before {@code open()}.
     *
     * @param allow true to accept such a file
     * @return this
     */
    public MappedBusWriter setAllowForeign(boolean allow) {
        this.allowForeign = allow;
        return this;
    }

    /** @return whether a foreign or shared-writable file is accepted */
    public boolean allowForeign() {
        return allowForeign;
    }

    // A segment of a rolling bus (RollingBus*): opened only once complete, never created here.
    static MappedBusWriter forSegment(String path, long segmentSize, int recordSize) {
        MappedBusWriter x = new MappedBusWriter(path, segmentSize, recordSize);
        x.segment = true;
        return x;
    }
}
