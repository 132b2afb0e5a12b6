package io.mappedbuspy;

import io.mappedbuspy.internal.*;

import java.io.EOFException;
import java.io.IOException;
import java.nio.file.NoSuchFileException;
import java.util.Objects;
import io.mappedbuspy.internal.BusMeta;
import io.mappedbuspy.internal.BusOpen;
import io.mappedbuspy.internal.MemoryMappedFile;
import io.mappedbuspy.internal.WakeFile;

/**
 * Reads the records of a bus file in allocation order, from the first record on.
 *
 * <p>{@link #next()} moves to the next committed record; {@link #readType()}, {@link #readMessage} and
 * {@link #readBuffer} then read that record, in any order and as often as wanted, until the next call to
 * {@code next()}. A record left uncommitted (status 0) for longer than the timeout is rolled back (status
 * CAS 0 -> 2) and skipped, so a crashed writer costs one timeout, never the records after it. A read-only
 * reader never writes to the file: it skips such a record locally instead.
 *
 * <p>{@link #waitNext} waits for the next record: it polls for a while, then parks on the bus's wake file
 * ({@code PATH.wake}, see {@link WakeFile}) until a writer of this project wakes it after its commit, or the park
 * bound passes (a record from a writer that wakes nobody, such as the Java original, waits at most that long);
 * {@link #setIdleStrategy} chooses how much of each.
 *
 * <p>A reader given a consumer name ({@link #setConsumer}, before {@link #open()}) is a <em>named consumer</em>: it
 * opens where that name last committed ({@link #commit()}), so a process that restarts goes on there; its position is
 * kept in the registry {@code PATH.consumers} ({@link Consumers}).
 *
 * <p>Not thread-safe: use one reader per thread.
 */
public final class MappedBusReader extends ConsumingReader<MappedBusReader> implements AutoCloseable {
    private final String path;
    private final long fileSize;
    private final int recordSize;
    private final boolean readOnly;
    private MemoryMappedFile mem;
    // Accept a file of another owner, or writable by group/others (see setAllowForeign).
    private boolean allowForeign;
    // A rolling bus's segment: exists already, no sidecar metadata, may be unlinked by retention while mapped.
    boolean segment;
    private boolean closed;
    private long initialLimit;
    // The walk over the slots: position, current record, limit seen, rollback clock, counts.
    private final SlotScan scan;
    private long lockTimeoutMs = MemoryMappedFile.DEFAULT_LOCK_TIMEOUT_MS;
    private String busId;
    // Set once a fault showed the file truncated: every later call throws.
    private BusTruncatedException dead;
    // A framed bus (setFrames): whole messages of any size, with topics.
    private boolean frames;
    private java.util.Set<String> topicFilter;

    /**
     * Creates a reader of an existing bus that may roll back uncommitted records, with the sizes its metadata
     * file {@code PATH.meta} records (read now; {@link #open()} checks them again, and the files' owner and
     * mode).
     *
     * @param path bus file path: a bus of this project, whose {@code PATH.meta} describes this file
     * @throws IllegalArgumentException if the file or {@code PATH.meta} is missing, or it describes another file
     *                                  or a rolling bus: a file of the Java original, or a bus not made yet,
     *                                  needs both sizes ({@link #MappedBusReader(String, long, int)})
     * @throws UnsafeBusFileException   if the path is a link or not a regular file
     * @throws IOException              if {@code PATH.meta} cannot be read or is not a metadata file
     */
    public MappedBusReader(String path) throws IOException {
        this(path, false);
    }

    /**
     * Creates a reader of an existing bus with the sizes its metadata file {@code PATH.meta} records, as
     * {@link #MappedBusReader(String)}.
     *
     * @param path     bus file path: a bus of this project, whose {@code PATH.meta} describes this file
     * @param readOnly open the file read-only, as {@link #MappedBusReader(String, long, int, boolean)}
     * @throws IllegalArgumentException if there is no metadata describing this file: give both sizes
     * @throws UnsafeBusFileException   if the path is a link or not a regular file
     * @throws IOException              if {@code PATH.meta} cannot be read or is not a metadata file
     */
    public MappedBusReader(String path, boolean readOnly) throws IOException {
        this(path, BusMeta.ofFile(path, "MappedBusReader"), readOnly);
    }

    private MappedBusReader(String path, BusMeta meta, boolean readOnly) {
        this(path, meta.fileSize(), meta.recordSize(), readOnly);
    }

    /**
     * Creates a reader that may roll back uncommitted records (opens the file read-write).
     *
     * @param path       bus file path (a writer creates it; a reader never does)
     * @param fileSize   logical file size in bytes, at least {@code 16 + recordSize}
     * @param recordSize payload size of every record, in bytes
     */
    public MappedBusReader(String path, long fileSize, int recordSize) {
        this(path, fileSize, recordSize, false);
    }

    /**
     * Creates a reader.
     *
     * @param path       bus file path
     * @param fileSize   logical file size in bytes, at least {@code 16 + recordSize}
     * @param recordSize payload size of every record, in bytes
     * @param readOnly   open the file read-only (it must exist); the reader then never writes, and skips
     *                   an uncommitted record locally after the timeout instead of rolling it back
     */
    public MappedBusReader(String path, long fileSize, int recordSize, boolean readOnly) {
        this.path = Objects.requireNonNull(path, "path");
        MappedBusWriter.checkSizes(fileSize, recordSize);
        this.fileSize = fileSize;
        this.recordSize = recordSize;
        this.readOnly = readOnly;
        this.scan = new SlotScan(path, fileSize, recordSize, readOnly);
        this.scan.writersPath = path + Layout.WRITERS_SUFFIX;
    }

    /**
     * Waits up to {@code waitMs} for a writer to create the bus, then {@link #open()}s it.
     *
     * <p>Opens the file as {@code docs/files-and-rolling.md} says (it must exist and be a complete bus: a reader
     * never creates, grows or writes a file that is not one; never through a link; owner and mode
     * checked), checks the sizes its metadata records, and records the limit seen now (for
     * {@link #hasRecovered()}).
     *
     * @param waitMs how long to wait for a writer to create the bus, in milliseconds (0: not at all)
     * @return this reader
     * @throws NoSuchFileException     if there is no such file (after {@code waitMs})
     * @throws InterruptedException    if interrupted while waiting
     * @throws IOException             if the file cannot be opened or mapped, or is shorter than the mapping
     * @throws UnsafeBusFileException  if the path is a link, not a regular file, or foreign (see
     *                                 {@link #setAllowForeign})
     * @throws BusMismatchException    if the bus was created with other sizes
     * @throws BusLockTimeoutException if another process holds the open lock longer than the lock timeout
     * @throws CorruptBusException     if the limit is not on a record boundary for this record size
     */
    public MappedBusReader open(long waitMs) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + waitMs * 1_000_000L;
        for (;;) {
            try {
                return open();
            } catch (NoSuchFileException e) {
                if (System.nanoTime() - deadline >= 0) {
                    throw e;
                }
                Thread.sleep(5);
            }
        }
    }

    /**
     * Maps the file (which must exist: a reader never creates a bus; see {@link #open(long)} to wait for a writer
     * to create it) and places the reader; see the other exceptions of {@link #open(long)}.
     *
     * @return this reader
     * @throws IOException as {@link #open(long)}
     */
    public MappedBusReader open() throws IOException {
        if (closed || mem != null) {
            throw new IllegalStateException("reader for " + path + " is " + (closed ? "closed" : "already open"));
        }
        BusOpen b = BusOpen.forReader(path, fileSize, recordSize, readOnly, allowForeign, lockTimeoutMs, segment,
                frames);
        if (frames && !segment) {
            topicsAt(java.nio.file.Paths.get(path + Layout.TOPICS_SUFFIX));
        }
        mem = b.mem;
        busId = b.busId;
        initialLimit = b.limit;
        scan.opened(initialLimit);
        if (consumerName != null && !segment) {
            try {
                consumer = scan.attach(mem, consumerName, consumerStart, allowForeign, busId);
            } catch (IOException | RuntimeException e) {
                close();
                throw e;
            }
        }
        return this;
    }

    @Override
    String describe() {
        return "reader for " + path;
    }

    // Where this reader's scan stands (SlotScan.state), for a message about a wait that found nothing.
    String scanState() {
        return mem == null ? "not open" : scan.state(mem);
    }

    @Override
    boolean openedOrClosed() {
        return closed || mem != null;
    }

    @Override
    boolean isClosed() {
        return closed;
    }

    @Override
    long consumerPosition(long p, String what) {
        return scan.checkedPosition(p, what);
    }


    /**
     * The bus's id from its metadata file: new for every bus created.
     *
     * @return 32 hex digits, or null for a file without metadata (made by the Java original) or a segment
     */
    public String busId() {
        return busId;
    }

    /**
     * Bounds how long {@link #open()} waits for another process's open lock. Call before {@code open()}.
     *
     * @param timeoutMs milliseconds, at least 0 (default 10 000)
     * @return this
     */
    public MappedBusReader setLockTimeout(long timeoutMs) {
        if (timeoutMs < 0) {
            throw new IllegalArgumentException("lock timeout must be >= 0 ms, got " + timeoutMs);
        }
        this.lockTimeoutMs = timeoutMs;
        return this;
    }

    /**
     * Sets the rollback timeout: how long a record may stay uncommitted before this reader rolls it back
     * (or, read-only, skips it). Measured on the monotonic clock from when this reader first saw the record
     * uncommitted. It is not a bound on {@link #next()}, which never blocks.
     *
     * @param timeoutMs timeout in milliseconds, at least {@link Layout#MIN_ROLLBACK_TIMEOUT_MS} (default
     *                  {@link Layout#DEFAULT_TIMEOUT_MS})
     * @throws IllegalArgumentException if below {@link Layout#MIN_ROLLBACK_TIMEOUT_MS}
     */
    public void setTimeout(int timeoutMs) {
        SlotScan.checkRollbackTimeout(timeoutMs);
        scan.timeoutNanos = timeoutMs * 1_000_000L;
    }

    /**
     * Moves to the next committed record, if there is one yet.
     *
     * <p>A run of uncommitted slots is timed with one clock: once a slot is rolled back (or, read-only,
     * skipped) after the timeout, the following uncommitted slots that were already allocated when that
     * clock started are timed out at once, so a crashed batch costs one timeout. When a slot this reader
     * waits on gets committed, the clock stops.
     *
     * @return true if a record is now current; false if nothing new has been committed (yet)
     * @throws EOFException          if the next record would not fit in the file (the end of the bus)
     * @throws CorruptBusException   if a status other than 0, 1 or 2, or a limit off the record grid, is found
     * @throws BusReplacedException  if, caught up, the reader finds its path names another file or none
     * @throws BusTruncatedException if the file was truncated under the mapping
     */
    public boolean next() throws EOFException, CorruptBusException, BusReplacedException {
        MemoryMappedFile m = mem();
        try {
            try {
                return scan.next(m);
            } catch (EOFException | CorruptBusException e) {
                MemoryMappedFile.raiseFaultReports(); // what a truncated file's pages read as? A fault report says
                throw e;
            }
        } catch (InternalError e) {
            throw fault(m, e);
        } catch (BusTruncatedException e) {
            throw fault(m, e);
        }
    }

    @Override
    boolean waitPoll(boolean thorough) throws IOException {
        return next();
    }

    @Override
    WakeFile openWakeFile() {
        mem();
        return segment ? WakeFile.NONE : WakeFile.forBus(path, allowForeign, wakeNative);
    }

    // A waiting reader's look at its files, as a writer's next access would find them (also a rolling bus's, at
    // its segment).
    @Override
    void waitCheck() throws BusReplacedException {
        MemoryMappedFile m = mem();
        try {
            m.checkLength();
        } catch (BusTruncatedException e) {
            throw fault(m, e);
        }
        m.checkPath(segment); // a segment: replaced raises, removed is retention's
        if (wake != null) {
            wake.check();
        }
    }

    // A fault in the mapping: the file was truncated under it. The reader is dead from then on.
    private BusTruncatedException fault(MemoryMappedFile m, InternalError e) {
        if (!MemoryMappedFile.isMappingFault(e)) {
            throw e;
        }
        return fault(m, m.truncated(e));
    }

    private BusTruncatedException fault(MemoryMappedFile m, BusTruncatedException e) {
        dead = e;
        scan.current = SlotScan.NO_RECORD;
        return e;
    }

    /**
     * The type (object message) or byte length (byte array) of the current record.
     *
     * @return the record's metadata
     * @throws BusTruncatedException if the file was truncated under the mapping
     */
    public int readType() {
        MemoryMappedFile m = mem();
        try {
            return m.getInt(scan.current() + Layout.METADATA_OFFSET);
        } catch (InternalError e) {
            throw fault(m, e);
        }
    }

    /**
     * Reads the current record into a message.
     *
     * @param message the message to fill
     * @param <T>     the message class
     * @return {@code message}
     * @throws BusTruncatedException if the file was truncated under the mapping
     */
    public <T extends MappedBusMessage> T readMessage(T message) {
        MemoryMappedFile m = mem();
        try {
            message.read(m, scan.current() + Layout.PAYLOAD_OFFSET);
        } catch (InternalError e) {
            throw fault(m, e);
        }
        return message;
    }

    /**
     * Copies the current record's bytes (its metadata holds their number).
     *
     * @param dst    destination array
     * @param offset index of the first destination byte
     * @return the number of bytes copied
     * @throws CorruptBusException      if the stored length is negative or larger than the record size
     * @throws IllegalArgumentException if {@code dst} has no room (the record stays current)
     * @throws BusTruncatedException    if the file was truncated under the mapping
     */
    public int readBuffer(byte[] dst, int offset) throws CorruptBusException {
        if (frames) {
            throw new IllegalStateException("a framed bus's messages are read with readPayload or message() (" + path
                    + ")");
        }
        MemoryMappedFile m = mem();
        long pos = scan.current();
        try {
            int length = m.getInt(pos + Layout.METADATA_OFFSET);
            if (length < 0 || length > recordSize) {
                MemoryMappedFile.raiseFaultReports(); // a truncated file's page, if a fault report is pending
                throw new CorruptBusException("record at position " + pos + " in " + path + " has length " + length
                        + " outside 0.." + recordSize + " (not a byte-array record, wrong recordSize, or a corrupt file)");
            }
            if (offset < 0 || offset > dst.length - length) {
                throw new IllegalArgumentException("no room for " + length + " bytes at offset " + offset
                        + " in an array of length " + dst.length);
            }
            m.getBytes(pos + Layout.PAYLOAD_OFFSET, dst, offset, length);
            return length;
        } catch (InternalError e) {
            throw fault(m, e);
        }
    }

    /**
     * Reads the bus as a framed bus (docs/design/frames.md): {@link #next()} moves to the next whole message, of any
     * size, which {@link #message()}, {@link #readPayload} and {@link #topic()} read. A bus made with frames must be
     * opened so, one made without must not ({@link BusMismatchException}); a file without metadata (a copy, the
     * shared vectors) is read as the caller says. Call before {@link #open()}.
     *
     * @param frames true for a framed bus
     * @return this
     * @throws IllegalArgumentException if the record size cannot be a framed bus's (a multiple of 8, at least 16)
     */
    public MappedBusReader setFrames(boolean frames) {
        if (closed || mem != null) {
            throw new IllegalStateException("setFrames before open(): reader for " + path + " is "
                    + (closed ? "closed" : "open"));
        }
        if (frames) {
            Frames.checkRecordSize(recordSize);
        }
        this.frames = frames;
        scan.frames = frames;
        return this;
    }

    /** @return whether this reader reads a framed bus */
    public boolean frames() {
        return frames;
    }

    /**
     * Delivers only the messages of these topics (a framed bus): the others, and those without a topic, are passed
     * over in {@link #next()} (each topic id decided once). Callable at any time; no names: every message again.
     *
     * @param topics topic names
     * @return this
     * @throws IllegalStateException    if the reader is not framed
     * @throws IllegalArgumentException if a name is not a topic name
     */
    public MappedBusReader setTopics(String... topics) {
        if (!frames) {
            throw new IllegalStateException("topics are a framed bus's: setFrames(true) first (" + path + ")");
        }
        java.util.Set<String> set = null;
        if (topics != null && topics.length > 0) {
            set = new java.util.HashSet<>();
            for (String t : topics) {
                TopicsFile.checkName(t);
                set.add(t);
            }
        }
        topicFilter = set;
        if (scan.topics != null) {
            scan.topics.filter(set);
        }
        return this;
    }

    // A topic filter already checked (GroupReader's: null in it asks for messages without a topic too); null: none.
    MappedBusReader filterTopics(java.util.Set<String> set) {
        topicFilter = set;
        if (scan.topics != null) {
            scan.topics.filter(set);
        }
        return this;
    }

    // The name of topic id `id` of the committed framed message at (global) position `pos`: null for none.
    String topicName(int id, long pos) throws CorruptBusException {
        return scan.topics.name(id, pos);
    }

    // The topics file of this bus (a rolling bus's segment: its bus's).
    void topicsAt(java.nio.file.Path file) {
        if (scan.topics != null) {
            scan.topics.close();
        }
        scan.topics = new TopicNames(file, allowForeign);
        scan.topics.filter(topicFilter);
    }

    // The current message's first slot, checking this is a framed reader.
    private long currentFrame() {
        if (!frames) {
            throw new IllegalStateException("not a framed reader: setFrames(true) before open() (" + path + ")");
        }
        return scan.current();
    }

    /**
     * The payload length of the current message (a framed bus).
     *
     * @return bytes
     */
    public int payloadLength() {
        MemoryMappedFile m = mem();
        long pos = currentFrame();
        try {
            return (int) m.getLong(pos + Layout.PAYLOAD_OFFSET + Layout.FRAME_LENGTH_OFFSET);
        } catch (InternalError e) {
            throw fault(m, e);
        }
    }

    /**
     * The flags of the current message (bits 0..7: its encoding, {@link Layout#FRAME_ENCODING_BYTES}, ...).
     *
     * @return the flags
     */
    public int flags() {
        MemoryMappedFile m = mem();
        long pos = currentFrame();
        try {
            return m.getInt(pos + Layout.PAYLOAD_OFFSET + Layout.FRAME_FLAGS_OFFSET);
        } catch (InternalError e) {
            throw fault(m, e);
        }
    }

    /**
     * The topic id of the current message ({@link Layout#FRAME_TOPIC_NONE}: none).
     *
     * @return the id
     */
    public int topicId() {
        MemoryMappedFile m = mem();
        long pos = currentFrame();
        try {
            return m.getInt(pos + Layout.PAYLOAD_OFFSET + Layout.FRAME_TOPIC_OFFSET);
        } catch (InternalError e) {
            throw fault(m, e);
        }
    }

    /**
     * The topic of the current message.
     *
     * @return its name, or null for a message without one
     * @throws CorruptBusException if its id is not published in the topics file
     */
    public String topic() throws CorruptBusException {
        return scan.topics.name(topicId(), scan.current());
    }

    /**
     * Copies the current message's payload into {@code dst} at its position (which moves past it), with no copy
     * between: one memory copy into a direct buffer.
     *
     * @param dst the destination
     * @return the number of bytes copied
     * @throws IllegalArgumentException if {@code dst} has less room than the payload (nothing is copied)
     */
    public int readPayload(java.nio.ByteBuffer dst) {
        int length = payloadLength();
        MemoryMappedFile m = mem();
        try {
            m.getBytes(scan.current() + Layout.FRAME_PAYLOAD_OFFSET, dst, length);
        } catch (InternalError e) {
            throw fault(m, e);
        }
        return length;
    }

    /**
     * The current message's payload, copied into a new array.
     *
     * @return its bytes
     */
    public byte[] readPayload() {
        byte[] b = new byte[payloadLength()];
        MemoryMappedFile m = mem();
        try {
            m.getBytes(scan.current() + Layout.FRAME_PAYLOAD_OFFSET, b, 0, b.length);
        } catch (InternalError e) {
            throw fault(m, e);
        }
        return b;
    }

    /**
     * The current message, copied out whole: position, topic, flags and payload.
     *
     * @return the message
     * @throws CorruptBusException if its topic id is not published
     */
    public FrameMessage message() throws CorruptBusException {
        long pos = currentFrame();
        return new FrameMessage(scan.positionBase + pos, topic(), flags(), readPayload());
    }

    /** @return committed messages the topic filter passed over */
    public long filtered() {
        return scan.filtered;
    }

    /** @return whether this reader has reached the limit the file had when it was opened */
    public boolean hasRecovered() {
        return scan.position >= initialLimit;
    }

    /** @return the position (file offset) of the next record to look at */
    public long position() {
        return scan.position;
    }

    /**
     * Position of the current record.
     *
     * @return the offset of the record the last successful {@link #next()} moved to, or -1 if none
     */
    public long recordPosition() {
        return scan.current;
    }

    /**
     * Moves to a record boundary; there is no current record afterwards.
     *
     * @param pos offset of a record slot, or the end of the file
     */
    public void seek(long pos) {
        mem();
        scan.seek(pos);
    }

    /**
     * Moves to the current limit, skipping every record allocated so far.
     *
     * @throws CorruptBusException if the limit is not on a record boundary
     */
    public void seekToEnd() throws CorruptBusException {
        MemoryMappedFile m = mem();
        long limit;
        try {
            limit = scan.loadLimit(m);
        } catch (InternalError e) {
            throw fault(m, e);
        }
        scan.moveTo(Math.max(limit, Layout.FIRST_RECORD_OFFSET));
    }

    /**
     * The number of records skipped: rolled back (status 2, by anyone, this reader included) or, for a
     * read-only reader, left uncommitted past the timeout and skipped locally.
     *
     * @return a count
     */
    public long rolledBackSkipped() {
        return scan.rolledBackSkipped;
    }

    /**
     * The number of records this reader rolled back (status CAS 0 -> 2) after its timeout; always 0 for a
     * read-only reader, which never writes.
     *
     * @return a count
     */
    public long rollbacks() {
        return scan.rollbacks;
    }

    /** @return whether the reader was opened read-only */
    public boolean isReadOnly() {
        return readOnly;
    }

    /** @return the record payload size in bytes */
    public int recordSize() {
        return recordSize;
    }

    /** @return the logical file size in bytes */
    public long fileSize() {
        return fileSize;
    }

    /** Releases the mapping; later calls throw {@link IllegalStateException}. Idempotent. */
    @Override
    public void close() {
        closed = true;
        scan.current = SlotScan.NO_RECORD;
        scan.close();
        releaseConsumer();
        closeWake();
        if (mem != null) {
            if (segment) {
                mem.closeAndUnmap(); // a rolling bus's segment: the next one follows, so free this one now
            } else {
                mem.close();
            }
            mem = null;
        }
    }

    // The mapping, for a group member (GroupReader) that reads a slot it acquired without moving the scan.
    MemoryMappedFile mapped() {
        return mem();
    }

    private MemoryMappedFile mem() {
        MemoryMappedFile m = mem;
        if (dead != null) {
            throw new BusTruncatedException(path + " was truncated under this reader's mapping; open the bus again",
                    dead);
        }
        if (m == null) {
            throw new IllegalStateException("reader for " + path + " is " + (closed ? "closed" : "not open"));
        }
        return m;
    }

    /**
     * Accepts a bus file owned by another user or writable by group or others, which {@link #open()} refuses
     * by default (another user could read and forge its records). Call before {@code open()}.
     *
     * @param allow true to accept such a file
     * @return this
     */
    public MappedBusReader setAllowForeign(boolean allow) {
        this.allowForeign = allow;
        scan.allowForeign = allow;
        return this;
    }

    /**
     * Bounds how long this reader waits for a record whose writer is alive: such a record (its writer holds its slot
     * in the bus's writers file, {@code PATH.writers}) is never rolled back, however long it takes, and after this
     * long a read raises {@link WriterStalledException} naming the writer's pid instead of waiting on. A record whose
     * writer is dead is rolled back at once; one whose writer is unknown (the Java original's) after the timeout.
     *
     * @param ms milliseconds, at least 1; 0: no bound (the default)
     * @return this
     */
    public MappedBusReader setStallLimit(long ms) {
        if (ms < 0 || ms > Long.MAX_VALUE / 1_000_000L) {
            throw new IllegalArgumentException("stall limit must be >= 0 ms (0: none), got " + ms);
        }
        scan.stallLimitNanos = ms * 1_000_000L;
        return this;
    }

    /** @return whether a foreign or shared-writable file is accepted */
    public boolean allowForeign() {
        return allowForeign;
    }

    // A segment of a rolling bus (RollingBus*): opened only once complete, never created here.
    // A rolling bus's segment reader asks its bus's writers file, the segment's offset 0 being at positionBase.
    MappedBusReader askingWriters(String writersPath, long positionBase) {
        scan.writersPath = writersPath;
        scan.positionBase = positionBase;
        return this;
    }

    /**
     * Opens this reader ({@link #forSegment}'s, read-only, configured as a segment reader is before {@code open()}:
     * frames, topics, timeout) on an archived segment's bytes ({@link ArchiveFiles#open}), at its first record: settled,
     * nothing to roll back, no writers to ask. It closes {@code m}.
     */
    MappedBusReader openArchived(MemoryMappedFile m) {
        if (closed || mem != null) {
            m.closeAndUnmap();
            throw new IllegalStateException("reader for " + path + " is " + (closed ? "closed" : "already open"));
        }
        long limit = m.getLongAcquire(Layout.LIMIT_OFFSET);
        mem = m;
        initialLimit = limit;
        scan.opened(limit);
        return this;
    }

    static MappedBusReader forSegment(String path, long segmentSize, int recordSize, boolean readOnly) {
        MappedBusReader x = new MappedBusReader(path, segmentSize, recordSize, readOnly);
        x.segment = true;
        x.scan.segment = true;
        x.scan.writersPath = null; // the rolling reader names its bus's, with the segment's position
        return x;
    }
}
