package io.mappedbuspy;

import java.io.EOFException;
import java.io.IOException;
import java.nio.file.NoSuchFileException;
import java.util.Objects;
import io.mappedbuspy.internal.BusMeta;
import io.mappedbuspy.internal.Frames;
import io.mappedbuspy.internal.RollingDir;
import io.mappedbuspy.internal.TopicsFile;
import io.mappedbuspy.internal.WakeFile;

/**
 * Reads a rolling bus (docs/files-and-rolling.md, "Rolling bus") in its one total order: every record of
 * segment k, then those of k+1, and so on. Positions are global: {@code segmentIndex * segmentSize + offset}.
 *
 * <p>At the end of a segment the reader moves to the next one once it exists ({@link #next()} returns false
 * until then). If retention removed segments it needs, it throws {@link BusGapException} naming the lost range,
 * or with {@code setFailOnGap(false)} continues at the oldest retained record and counts the slots in
 * {@link #lost()}. A waiting reader checks now and then that bus.meta still holds its bus's id
 * ({@link BusReplacedException} when the bus was deleted and recreated).
 *
 * <p>{@link #waitNext} waits for the next record, across segments: it polls, then parks on the bus's wake file
 * ({@code DIR/bus.wake}, see {@link WakeFile}), which writers wake after each commit and after moving to a new
 * segment.
 *
 * <p>A reader given a consumer name ({@link #setConsumer}, before {@link #open()}) opens where that name last
 * committed ({@link #commit()}); its position is kept in {@code DIR/bus.consumers} ({@link Consumers}), and a bus
 * created with {@code max_consumer_lag} keeps the segments it still needs from retention, within that bound.
 *
 * <p>Not thread-safe: one reader per thread.
 */
public final class RollingBusReader extends ConsumingReader<RollingBusReader> implements AutoCloseable {
    private final String dir;
    private final long segmentSize;
    private final int recordSize;
    private final boolean readOnly;
    private boolean frames;
    private String[] topics = new String[0];
    private boolean failOnGap = true;
    private int timeoutMs = Layout.DEFAULT_TIMEOUT_MS;
    private long stallLimitMs;
    private boolean allowForeign;
    private boolean closed;
    // Where it is in the bus, once open (kept after close() for the counts).
    private RollingCursor c;
    // The cursor's segment reader (null while waiting for a segment, and once closed), kept here: a load less in
    // every record's chain of dependent loads (next() + readMessage() of a segment read alone: 9.5-10.0 -> 8.7-8.8
    // ns a record, a single file 7.5-7.8).
    private MappedBusReader current;
    private long initialEnd;

    /**
     * Creates a reader of an existing rolling bus that may roll back uncommitted records, with the sizes its
     * {@code DIR/bus.meta} records (read now; {@link #open()} checks them again, and the files' owner and mode).
     *
     * @param dir the bus directory
     * @throws IllegalArgumentException if there is no {@code DIR/bus.meta}, or it describes a single-file bus: a
     *                                  bus not made yet needs both sizes
     *                                  ({@link #RollingBusReader(String, long, int)})
     * @throws UnsafeBusFileException   if {@code dir} is a link or not a directory
     * @throws IOException              if bus.meta cannot be read or is not a metadata file
     */
    public RollingBusReader(String dir) throws IOException {
        this(dir, false);
    }

    /**
     * Creates a reader of an existing rolling bus with the sizes its {@code DIR/bus.meta} records, as
     * {@link #RollingBusReader(String)}.
     *
     * @param dir      the bus directory
     * @param readOnly never write to a segment, as {@link #RollingBusReader(String, long, int, boolean)}
     * @throws IllegalArgumentException if there is no rolling bus's bus.meta in {@code dir}: give both sizes
     * @throws UnsafeBusFileException   if {@code dir} is a link or not a directory
     * @throws IOException              if bus.meta cannot be read or is not a metadata file
     */
    public RollingBusReader(String dir, boolean readOnly) throws IOException {
        this(dir, BusMeta.ofRollingDir(dir, "RollingBusReader"), readOnly);
    }

    private RollingBusReader(String dir, BusMeta meta, boolean readOnly) {
        this(dir, meta.segmentSize(), meta.recordSize(), readOnly);
    }

    /**
     * Creates a reader that may roll back uncommitted records.
     *
     * @param dir         the bus directory
     * @param segmentSize logical size of every segment
     * @param recordSize  payload size of every record
     */
    public RollingBusReader(String dir, long segmentSize, int recordSize) {
        this(dir, segmentSize, recordSize, false);
    }

    /**
     * Creates a reader.
     *
     * @param dir         the bus directory
     * @param segmentSize logical size of every segment
     * @param recordSize  payload size of every record
     * @param readOnly    never write to a segment: skip timed-out records locally instead of rolling them back
     */
    public RollingBusReader(String dir, long segmentSize, int recordSize, boolean readOnly) {
        this.dir = Objects.requireNonNull(dir, "dir");
        MappedBusWriter.checkSizes(segmentSize, recordSize);
        this.segmentSize = segmentSize;
        this.recordSize = recordSize;
        this.readOnly = readOnly;
    }

    /**
     * What to do when records this reader needs were removed by retention.
     *
     * @param fail true (the default): throw {@link BusGapException}; false: continue at the oldest retained
     *             record, adding the lost slots to {@link #lost()}
     * @return this
     */
    public RollingBusReader setFailOnGap(boolean fail) {
        this.failOnGap = fail;
        if (c != null) {
            c.failOnGap = fail;
        }
        return this;
    }

    /**
     * Sets the rollback timeout: how long a record may stay uncommitted before it is rolled back (or,
     * read-only, skipped). It is not a bound on {@link #next()}, which never blocks.
     *
     * @param ms milliseconds, at least {@link Layout#MIN_ROLLBACK_TIMEOUT_MS} (default
     *           {@link Layout#DEFAULT_TIMEOUT_MS})
     * @return this
     * @throws IllegalArgumentException if below {@link Layout#MIN_ROLLBACK_TIMEOUT_MS}
     */
    public RollingBusReader setTimeout(int ms) {
        SlotScan.checkRollbackTimeout(ms);
        timeoutMs = ms;
        if (c != null) {
            c.setTimeout(ms);
        }
        return this;
    }

    /**
     * Bounds how long this reader waits for a record whose writer is alive (see
     * {@link MappedBusReader#setStallLimit}); 0 (the default): no bound.
     *
     * @param ms milliseconds, 0 or more
     * @return this
     */
    public RollingBusReader setStallLimit(long ms) {
        if (ms < 0 || ms > Long.MAX_VALUE / 1_000_000L) {
            throw new IllegalArgumentException("stall limit must be >= 0 ms (0: none), got " + ms);
        }
        stallLimitMs = ms;
        if (c != null) {
            c.setStallLimit(ms);
        }
        return this;
    }

    /**
     * Accepts a directory, bus.meta or segments owned by another user or writable by group or others. Call
     * before {@link #open()}.
     *
     * @param allow true to accept them
     * @return this
     */
    public RollingBusReader setAllowForeign(boolean allow) {
        if (c != null || closed) {
            throw new IllegalStateException("set allowForeign before open()");
        }
        this.allowForeign = allow;
        return this;
    }

    /**
     * Opens the bus at its oldest retained record. The bus must exist: a reader never creates anything.
     *
     * @return this
     * @throws NoSuchFileException  if there is no such bus (or its bus.meta is not written yet)
     * @throws BusMismatchException if it was created with other sizes
     * @throws IOException          if it cannot be opened or is not to be trusted
     */
    public RollingBusReader open() throws IOException {
        if (c != null || closed) {
            throw new IllegalStateException("rolling reader for " + dir + " is " + (closed ? "closed" : "already open"));
        }
        RollingDir d = RollingDir.forReader(dir, segmentSize, recordSize, allowForeign);
        d.meta.checkFrames(frames, dir);
        c = new RollingCursor(d, readOnly, allowForeign, failOnGap, timeoutMs);
        c.frames = frames;
        c.topics = topics;
        c.onSwitch = x -> current = x;
        c.stallLimitMs = stallLimitMs;
        try {
            initialEnd = c.currentEnd();
            c.openOldest();
            if (consumerName != null) {
                consumer = c.attach(consumerName, consumerStart);
            }
        } catch (IOException | RuntimeException e) {
            close();
            throw e;
        }
        return this;
    }

    @Override
    String describe() {
        return "rolling reader for " + dir;
    }

    @Override
    boolean openedOrClosed() {
        return c != null || closed;
    }

    @Override
    boolean isClosed() {
        return closed;
    }

    @Override
    long consumerPosition(long p, String what) {
        return RollingCursor.checkedPosition(p, segmentSize, recordSize, what + " of " + dir);
    }

    /**
     * Moves to the next committed record, across segments.
     *
     * @return true if a record is now current; false if there is none yet
     * @throws BusGapException      if the next records were removed by retention (and failOnGap is set)
     * @throws BusReplacedException if bus.meta no longer holds this bus's id
     * @throws IOException          if the next segment cannot be opened, or a segment is corrupt
     */
    public boolean next() throws IOException {
        // The common case first, as on a single file: a record in the segment being read. Anything else (none yet,
        // the segment's end, a segment awaited, checks now and then, closed) is the cursor's.
        MappedBusReader x = current;
        if (x != null) {
            try {
                return x.next() || c.empty();
            } catch (EOFException e) {
                // every slot of the segment is settled: the cursor moves on
            }
        }
        openState();
        return c.next();
    }

    @Override
    boolean waitPoll(boolean thorough) throws IOException {
        openState();
        return c.poll(thorough);
    }

    @Override
    void waitCheck() throws IOException {
        openState();
        c.check();
        if (wake != null) {
            wake.check();
        }
    }

    @Override
    WakeFile openWakeFile() {
        openState();
        return WakeFile.forRollingBus(dir, allowForeign, wakeNative);
    }

    /**
     * The global position of the next record to look at.
     *
     * @return {@code segmentIndex * segmentSize + offset}; the end of a segment is the start of the next
     */
    public long position() {
        openState();
        return c.position();
    }

    /**
     * The global position of the current record.
     *
     * @return its position, or -1 if there is none
     */
    public long recordPosition() {
        openState();
        return c.recordPosition();
    }

    /**
     * Moves to a global position; there is no current record afterwards. A position in a segment not created
     * yet waits for it; one before the oldest retained record is a gap.
     *
     * @param pos a record boundary in some segment, or a segment's end
     * @throws BusGapException if {@code pos} was removed by retention (and failOnGap is set; nothing moved)
     * @throws IOException     if the segment cannot be opened
     */
    public void seek(long pos) throws IOException {
        openState();
        c.seek(RollingCursor.checkedPosition(pos, segmentSize, recordSize, dir));
    }

    /**
     * Moves to the first record allocated at or after {@code epochNanos} (Python: {@code seek_time}), by the bus's
     * time index (docs/journal.md): every record allocated at or after that time is read from here on, and none
     * allocated before it rounded down to the millisecond (the resolution, {@link Layout#TIME_INDEX_RESOLUTION_NS}).
     * Archived segments count as the hot ones do. No record that recent: to the end ({@link #seekToEnd()}).
     *
     * @param epochNanos a time, nanoseconds since the Unix epoch
     * @throws CorruptBusException if an index file is not its segment's
     * @throws IOException         if a listing, an index or the segment cannot be read
     */
    public void seekTime(long epochNanos) throws IOException {
        openState();
        long end = c.currentEnd();
        long p = c.bus.positionAtTime(epochNanos, end);
        if (p >= end) {
            c.seekToEnd();
        } else {
            c.seek(p);
        }
    }

    /**
     * {@link #seekTime(long)} at an instant.
     *
     * @param t the instant
     * @throws IOException as {@link #seekTime(long)}
     */
    public void seekTime(java.time.Instant t) throws IOException {
        seekTime(Math.addExact(Math.multiplyExact(t.getEpochSecond(), 1_000_000_000L), t.getNano()));
    }

    /**
     * Moves past every record allocated so far (to the limit of the newest segment with records).
     *
     * @throws IOException if the newest segment cannot be opened
     */
    public void seekToEnd() throws IOException {
        openState();
        c.seekToEnd();
    }

    /**
     * The type (object message) or byte length (byte array) of the current record.
     *
     * @return its metadata
     */
    public int readType() {
        return current().readType();
    }

    /**
     * Reads the current record into a message.
     *
     * @param message the message to fill
     * @param <T>     its class
     * @return {@code message}
     */
    public <T extends MappedBusMessage> T readMessage(T message) {
        return current().readMessage(message);
    }

    /**
     * Copies the current record's bytes.
     *
     * @param dst    destination
     * @param offset index of the first destination byte
     * @return the number of bytes copied
     * @throws CorruptBusException if the stored length is out of range
     */
    public int readBuffer(byte[] dst, int offset) throws CorruptBusException {
        return current().readBuffer(dst, offset);
    }

    /**
     * Reads the bus as a framed bus (docs/design/frames.md), as {@link MappedBusReader#setFrames}. Call before
     * {@link #open()}.
     *
     * @param frames true for a framed bus
     * @return this
     */
    public RollingBusReader setFrames(boolean frames) {
        if (c != null || closed) {
            throw new IllegalStateException("setFrames before open(): rolling reader for " + dir);
        }
        if (frames) {
            Frames.checkRecordSize(recordSize);
        }
        this.frames = frames;
        return this;
    }

    /**
     * Delivers only the messages of these topics, as {@link MappedBusReader#setTopics}.
     *
     * @param names topic names (none: every message)
     * @return this
     */
    public RollingBusReader setTopics(String... names) {
        if (!frames) {
            throw new IllegalStateException("topics are a framed bus's: setFrames(true) first (" + dir + ")");
        }
        for (String t : names) {
            TopicsFile.checkName(t);
        }
        topics = names.clone();
        if (c != null) {
            c.topics(topics);
        }
        return this;
    }

    /**
     * The current message, copied out whole (its position global), as {@link MappedBusReader#message()}.
     *
     * @return the message
     * @throws CorruptBusException if its topic id is not published
     */
    public FrameMessage message() throws CorruptBusException {
        return current().message();
    }

    /**
     * Copies the current message's payload into {@code dst}, as {@link MappedBusReader#readPayload(java.nio.ByteBuffer)}.
     *
     * @param dst the destination
     * @return the bytes copied
     */
    public int readPayload(java.nio.ByteBuffer dst) {
        return current().readPayload(dst);
    }

    /** @return the current message's payload, copied into a new array */
    public byte[] readPayload() {
        return current().readPayload();
    }

    /**
     * The current message's topic.
     *
     * @return its name, or null for none
     * @throws CorruptBusException if its id is not published
     */
    public String topic() throws CorruptBusException {
        return current().topic();
    }

    /** @return committed messages the topic filter passed over */
    public long filtered() {
        return c == null ? 0 : c.filtered();
    }

    private MappedBusReader current() {
        MappedBusReader r = current;
        if (r == null) {
            openState();
            throw new IllegalStateException("no current record: call next() and check that it returned true");
        }
        return r;
    }

    private void openState() {
        if (c == null || closed) {
            throw new IllegalStateException("rolling reader for " + dir + " is " + (closed ? "closed" : "not open"));
        }
    }

    /** @return record slots skipped because retention removed them (failOnGap false) */
    public long lost() {
        return c == null ? 0 : c.lost;
    }

    /** @return records skipped as rolled back or (read-only) timed out, all segments together */
    public long rolledBackSkipped() {
        return c == null ? 0 : c.rolledBackSkipped();
    }

    /** @return records this reader rolled back, all segments together */
    public long rollbacks() {
        return c == null ? 0 : c.rollbacks();
    }

    /** @return the bus's id (from bus.meta) */
    public String busId() {
        openState();
        return c.bus.meta.id();
    }

    /** @return the index of the segment being read (or awaited) */
    public long segment() {
        return c == null ? 0 : c.segment;
    }

    /** @return the logical size of every segment (given, or from bus.meta) */
    public long segmentSize() {
        return segmentSize;
    }

    /** @return the payload size of every record (given, or from bus.meta) */
    public int recordSize() {
        return recordSize;
    }

    /** @return whether this reader has reached the end of what was allocated when it was opened */
    public boolean hasRecovered() {
        return position() >= initialEnd;
    }

    /** Releases the current segment; later calls throw {@link IllegalStateException}. Idempotent. */
    @Override
    public void close() {
        closed = true;
        releaseConsumer();
        if (c != null) {
            c.close();
        }
        closeWake();
    }
}
