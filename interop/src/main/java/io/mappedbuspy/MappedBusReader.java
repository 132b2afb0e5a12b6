package io.mappedbuspy;

import java.io.EOFException;
import java.io.IOException;
import java.util.Objects;

/**
 * Reads the records of a bus file in allocation order, from the first record on.
 *
 * <p>{@link #next()} moves to the next committed record; {@link #readType()}, {@link #readMessage} and
 * {@link #readBuffer} then read that record, in any order and as often as wanted, until the next call to
 * {@code next()}. A record left uncommitted (status 0) for longer than the timeout is rolled back (status
 * CAS 0 -> 2) and skipped, so a crashed writer costs one timeout, never the records after it. A read-only
 * reader never writes to the file: it skips such a record locally instead.
 *
 * <p>Not thread-safe: use one reader per thread.
 */
public final class MappedBusReader implements AutoCloseable {
    private static final long NO_RECORD = -1;

    private final String path;
    private final long fileSize;
    private final int recordSize;
    private final long slot;
    private final boolean readOnly;
    private MemoryMappedFile mem;
    // Accept a file of another owner, or writable by group/others (see setAllowForeign).
    private boolean allowForeign;
    // A rolling bus's segment: exists already, no sidecar metadata, may be unlinked by retention while mapped.
    boolean segment;
    private boolean closed;
    private long timeoutNanos = Layout.DEFAULT_TIMEOUT_MS * 1_000_000L;
    private long position = Layout.FIRST_RECORD_OFFSET;
    private long current = NO_RECORD;
    private long initialLimit;
    // Position whose status-0 timer is running (NO_RECORD when none) and when it started (System.nanoTime).
    private long timerPosition = NO_RECORD;
    private long timerStart;
    private long rolledBackSkipped;
    private long rollbacks;

    /**
     * Creates a reader that may roll back uncommitted records (opens the file read-write).
     *
     * @param path       bus file path (created by {@link #open()} if absent)
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
        this.slot = Layout.slotSize(recordSize);
        this.readOnly = readOnly;
    }

    /**
     * Maps the file and records the limit seen now (for {@link #hasRecovered()}).
     *
     * @return this reader
     * @throws IOException         if the file cannot be opened or mapped (or, read-only, does not exist)
     * @throws CorruptBusException if the limit is not on a record boundary for this record size
     */
    public MappedBusReader open() throws IOException {
        if (closed || mem != null) {
            throw new IllegalStateException("reader for " + path + " is " + (closed ? "closed" : "already open"));
        }
        MemoryMappedFile m = new MemoryMappedFile(path, fileSize, readOnly);
        try {
            if (m.size() < Layout.mappedSize(fileSize)) {
                // Only a read-only mapping can be short (it never grows the file); records past its end
                // cannot be read, so refuse here, as the Python reader does, not with an out-of-bounds later.
                throw new IOException(path + " is " + m.size() + " bytes, shorter than the "
                        + Layout.mappedSize(fileSize) + " bytes fileSize=" + fileSize + " maps; a read-only "
                        + "reader cannot grow it (wrong fileSize, or no writer has opened the bus yet)");
            }
            initialLimit = m.getLongAcquire(Layout.LIMIT_OFFSET);
            MappedBusWriter.checkLimit(initialLimit, recordSize, path);
        } catch (IOException | RuntimeException e) {
            m.close();
            throw e;
        }
        mem = m;
        return this;
    }

    /**
     * Sets how long a record may stay uncommitted before this reader rolls it back (or, read-only, skips
     * it). Measured on the monotonic clock from when this reader first saw the record uncommitted.
     *
     * @param timeoutMs timeout in milliseconds, at least 0 (default {@link Layout#DEFAULT_TIMEOUT_MS})
     */
    public void setTimeout(int timeoutMs) {
        if (timeoutMs < 0) {
            throw new IllegalArgumentException("timeout must be >= 0 ms, got " + timeoutMs);
        }
        timeoutNanos = timeoutMs * 1_000_000L;
    }

    /**
     * Moves to the next committed record, if there is one yet.
     *
     * @return true if a record is now current; false if nothing new has been committed (yet)
     * @throws EOFException        if the next record would not fit in the file (the end of the bus)
     * @throws CorruptBusException if a status other than 0, 1 or 2 is found
     */
    public boolean next() throws EOFException, CorruptBusException {
        MemoryMappedFile m = mem();
        current = NO_RECORD;
        for (;;) {
            long pos = position;
            if (pos + slot > fileSize) {
                throw new EOFException("end of bus " + path + ": no record fits at position " + pos
                        + " in fileSize " + fileSize);
            }
            if (m.getLongAcquire(Layout.LIMIT_OFFSET) <= pos) {
                return false;
            }
            int status = m.getStatus(pos);
            if (status == Layout.STATUS_COMMITTED) {
                current = pos;
                position = pos + slot;
                timerPosition = NO_RECORD;
                return true;
            } else if (status == Layout.STATUS_ROLLED_BACK) {
                position = pos + slot;
                rolledBackSkipped++;
                timerPosition = NO_RECORD;
            } else if (status == Layout.STATUS_NOT_SET) {
                long now = System.nanoTime();
                if (timerPosition != pos) {
                    timerPosition = pos;
                    timerStart = now;
                }
                if (now - timerStart < timeoutNanos) {
                    return false;
                }
                if (readOnly) {
                    // Cannot write the rollback: skip locally. Nothing was written, so it is a lost record
                    // (rolledBackSkipped) but not a rollback, as in the Python reader.
                    position = pos + slot;
                    rolledBackSkipped++;
                    timerPosition = NO_RECORD;
                } else if (m.casStatus(pos, Layout.STATUS_NOT_SET, Layout.STATUS_ROLLED_BACK)) {
                    rollbacks++;
                }
                // Otherwise loop: the status is now 1 or 2 (the writer committed, or another reader won).
            } else {
                throw new CorruptBusException("record at position " + pos + " in " + path
                        + " has invalid status " + status);
            }
        }
    }

    /**
     * The type (object message) or byte length (byte array) of the current record.
     *
     * @return the record's metadata
     */
    public int readType() {
        return mem().getInt(current() + Layout.METADATA_OFFSET);
    }

    /**
     * Reads the current record into a message.
     *
     * @param message the message to fill
     * @param <T>     the message class
     * @return {@code message}
     */
    public <T extends MappedBusMessage> T readMessage(T message) {
        message.read(mem(), current() + Layout.PAYLOAD_OFFSET);
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
     */
    public int readBuffer(byte[] dst, int offset) throws CorruptBusException {
        MemoryMappedFile m = mem();
        long pos = current();
        int length = m.getInt(pos + Layout.METADATA_OFFSET);
        if (length < 0 || length > recordSize) {
            throw new CorruptBusException("record at position " + pos + " in " + path + " has length " + length
                    + " outside 0.." + recordSize);
        }
        if (offset < 0 || offset > dst.length - length) {
            throw new IllegalArgumentException("no room for " + length + " bytes at offset " + offset
                    + " in an array of length " + dst.length);
        }
        m.getBytes(pos + Layout.PAYLOAD_OFFSET, dst, offset, length);
        return length;
    }

    /**
     * Whether this reader has reached the limit the file had when it was opened.
     *
     * @return {@code position() >= } the initial limit
     */
    public boolean hasRecovered() {
        return position >= initialLimit;
    }

    /**
     * Position of the next record to look at.
     *
     * @return a file offset
     */
    public long position() {
        return position;
    }

    /**
     * Position of the current record.
     *
     * @return the offset of the record the last successful {@link #next()} moved to, or -1 if none
     */
    public long recordPosition() {
        return current;
    }

    /**
     * Moves to a record boundary; there is no current record afterwards.
     *
     * @param pos offset of a record slot, or the end of the file
     */
    public void seek(long pos) {
        mem();
        if (!Layout.isRecordBoundary(pos, recordSize) || pos > fileSize) {
            throw new IllegalArgumentException("position " + pos + " is not a record boundary within fileSize "
                    + fileSize + " for recordSize " + recordSize);
        }
        position = pos;
        current = NO_RECORD;
        timerPosition = NO_RECORD;
    }

    /**
     * Moves to the current limit, skipping every record allocated so far.
     *
     * @throws CorruptBusException if the limit is not on a record boundary
     */
    public void seekToEnd() throws CorruptBusException {
        long limit = mem().getLongAcquire(Layout.LIMIT_OFFSET);
        MappedBusWriter.checkLimit(limit, recordSize, path);
        position = Math.max(limit, Layout.FIRST_RECORD_OFFSET);
        current = NO_RECORD;
        timerPosition = NO_RECORD;
    }

    /**
     * The number of records skipped: rolled back (status 2, by anyone, this reader included) or, for a
     * read-only reader, left uncommitted past the timeout and skipped locally.
     *
     * @return a count
     */
    public long rolledBackSkipped() {
        return rolledBackSkipped;
    }

    /**
     * The number of records this reader rolled back (status CAS 0 -> 2) after its timeout; always 0 for a
     * read-only reader, which never writes.
     *
     * @return a count
     */
    public long rollbacks() {
        return rollbacks;
    }

    /**
     * Whether the reader was opened read-only.
     *
     * @return true if read-only
     */
    public boolean isReadOnly() {
        return readOnly;
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

    /** Releases the mapping; later calls throw {@link IllegalStateException}. Idempotent. */
    @Override
    public void close() {
        closed = true;
        current = NO_RECORD;
        if (mem != null) {
            mem.close();
            mem = null;
        }
    }

    private MemoryMappedFile mem() {
        MemoryMappedFile m = mem;
        if (m == null) {
            throw new IllegalStateException("reader for " + path + " is " + (closed ? "closed" : "not open"));
        }
        return m;
    }

    private long current() {
        if (current == NO_RECORD) {
            throw new IllegalStateException("no current record: call next() and check that it returned true");
        }
        return current;
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
        return this;
    }

    /** @return whether a foreign or shared-writable file is accepted */
    public boolean allowForeign() {
        return allowForeign;
    }

    // A segment of a rolling bus (RollingBus*): opened only once complete, never created here.
    static MappedBusReader forSegment(String path, long segmentSize, int recordSize, boolean readOnly) {
        MappedBusReader x = new MappedBusReader(path, segmentSize, recordSize, readOnly);
        x.segment = true;
        return x;
    }
}
