package io.mappedbuspy;

import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.StandardOpenOption;
import java.util.Objects;

/**
 * Appends records to a rolling bus: a directory of numbered segments, each a complete Mappedbus 0.5.1
 * file (docs/files-and-rolling.md, "Rolling bus"). When a record does not fit in the current segment the
 * writer moves to the next one, creating it if no other writer has yet; a record never spans segments.
 * The writer that creates a segment applies the bus's retention. Readers parked on the bus's wake file
 * ({@code DIR/bus.wake}, {@link WakeFile}) are woken after each commit and after the writer moves to a new segment.
 *
 * <p>Any number of writers (threads or processes) may share a bus. Not thread-safe: one writer per thread.
 */
public final class RollingBusWriter implements AutoCloseable {
    private final String dir;
    private final long segmentSize;
    private final int recordSize;
    private final long[] retention = new long[3];
    // The consumer policy of a bus this writer creates: {maxConsumerLag, onConsumerLag, consumerBlockMs}, or null.
    private Object[] consumerPolicy;
    private final long half;
    private final int every;
    private boolean allowForeign;
    private RollingDir bus;
    private MappedBusWriter w;
    private long segment = -1;
    // The next segment, created ahead of time and mapped once the current one is half full, so the write
    // that rolls only swaps mappings.
    private MappedBusWriter spare;
    private long spareIndex = -1;
    // Work kept off the write that rolls, done at the next look-ahead: closing the old mapping, and setting
    // the full segment's modification time (age retention) to the time of the roll.
    private MappedBusWriter retired;
    private long markIndex = -1;
    private long markMs;
    private int countdown;
    private FileChannel limitChannel;
    private long limitChannelIndex = -1;
    private final ByteBuffer limitBuf = ByteBuffer.allocateDirect(8).order(ByteOrder.LITTLE_ENDIAN);
    private boolean closed;
    // The current segment mapped for reserve(), opened on its first use.
    private MemoryMappedFile reserving;
    private long reservingIndex = -1;
    private long rolls;
    private long rollNanos;
    // The bus's wake file, shared by the segment writers.
    private WakeFile wake = WakeFile.NONE;
    private long maxRollNanos;

    /**
     * Creates a writer of an existing rolling bus with the sizes its {@code DIR/bus.meta} records (read now;
     * {@link #open()} checks them again, and the files' owner and mode); call {@link #open()} before writing.
     *
     * @param dir the bus directory
     * @throws IllegalArgumentException if there is no {@code DIR/bus.meta}, or it describes a single-file bus: a
     *                                  new bus needs both sizes ({@link #RollingBusWriter(String, long, int)})
     * @throws UnsafeBusFileException   if {@code dir} is a link or not a directory
     * @throws IOException              if bus.meta cannot be read or is not a metadata file
     */
    public RollingBusWriter(String dir) throws IOException {
        this(dir, BusMeta.ofRollingDir(dir, "RollingBusWriter"));
    }

    private RollingBusWriter(String dir, BusMeta meta) {
        this(dir, meta.segmentSize(), meta.recordSize());
    }

    /**
     * Creates a writer; call {@link #open()} before writing.
     *
     * @param dir         the bus directory (created by {@link #open()} if absent; its parent must exist)
     * @param segmentSize logical size of every segment, at least {@code 16 + recordSize}
     * @param recordSize  payload size of every record
     */
    public RollingBusWriter(String dir, long segmentSize, int recordSize) {
        this.dir = Objects.requireNonNull(dir, "dir");
        MappedBusWriter.checkSizes(segmentSize, recordSize);
        this.segmentSize = segmentSize;
        this.recordSize = recordSize;
        this.half = segmentSize / 2;
        this.every = (int) Math.max(1, Math.min(4096, RollingLayout.slotsPerSegment(segmentSize, recordSize) / 8));
    }

    /**
     * Sets the retention of a bus this writer creates (stored in its bus.meta); 0 means no limit. Call before
     * {@link #open()}. On an existing bus, all zeros accept its retention, anything else must equal it.
     *
     * @param segments most segments kept
     * @param bytes    most bytes of segments kept (each counted as the segment size)
     * @param ageMs    a segment is removed once its successor was created longer ago than this
     * @return this
     */
    public RollingBusWriter setRetention(long segments, long bytes, long ageMs) {
        if (segments < 0 || bytes < 0 || ageMs < 0) {
            throw new IllegalArgumentException("retention must not be negative, got segments=" + segments
                    + " bytes=" + bytes + " ageMs=" + ageMs);
        }
        openCheck();
        retention[0] = segments;
        retention[1] = bytes;
        retention[2] = ageMs;
        return this;
    }

    /**
     * Sets how far a registered consumer may lag and still hold segments from retention, on a bus this writer creates
     * (stored in its bus.meta as {@code max_consumer_lag}; Python: {@code max_consumer_lag=}). Call before
     * {@link #open()}. On an existing bus, a policy set must equal the bus's.
     *
     * @param segments segments behind the writers (0: consumers hold nothing)
     * @return this
     */
    public RollingBusWriter setMaxConsumerLag(long segments) {
        if (segments < 0) {
            throw new IllegalArgumentException("maxConsumerLag must not be negative, got " + segments);
        }
        policy()[0] = segments;
        return this;
    }

    /**
     * What happens to a consumer more than {@code max_consumer_lag} segments behind, on a bus this writer creates
     * (Python: {@code on_consumer_lag=}): {@link BusMeta#EXPIRE} (the default: it is flagged expired and its segments
     * go) or {@link BusMeta#BLOCK} (writers wait before rolling, then throw {@link BusBackPressureException}). Call
     * before {@link #open()}.
     *
     * @param policy "expire" or "block"
     * @return this
     */
    public RollingBusWriter setOnConsumerLag(String policy) {
        BusMeta.checkPolicy(policy);
        policy()[1] = policy;
        return this;
    }

    /**
     * How long a writer waits for a lagging consumer under {@code block} before it throws
     * {@link BusBackPressureException}, on a bus this writer creates (stored in milliseconds as
     * {@code consumer_block_ms}; Python: {@code consumer_block_timeout=} seconds). Call before {@link #open()}.
     *
     * @param timeout the wait (default {@link Layout#DEFAULT_CONSUMER_BLOCK_MS} ms)
     * @param unit    its unit
     * @return this
     */
    public RollingBusWriter setConsumerBlockTimeout(long timeout, java.util.concurrent.TimeUnit unit) {
        if (timeout < 0) {
            throw new IllegalArgumentException("consumer block timeout must not be negative, got " + timeout);
        }
        policy()[2] = unit.toMillis(timeout);
        return this;
    }

    private Object[] policy() {
        openCheck();
        if (consumerPolicy == null) {
            consumerPolicy = new Object[] {0L, BusMeta.EXPIRE, Layout.DEFAULT_CONSUMER_BLOCK_MS};
        }
        return consumerPolicy;
    }

    /**
     * Accepts a directory, bus.meta or segments owned by another user or writable by group or others. Call
     * before {@link #open()}.
     *
     * @param allow true to accept them
     * @return this
     */
    public RollingBusWriter setAllowForeign(boolean allow) {
        openCheck();
        this.allowForeign = allow;
        return this;
    }

    private void openCheck() {
        if (closed || bus != null) {
            throw new IllegalStateException("rolling writer for " + dir + " is " + (closed ? "closed" : "already open"));
        }
    }

    /**
     * Opens the bus (creating the directory, bus.meta and segment 0 if absent) at its newest segment.
     *
     * @return this
     * @throws BusMismatchException     if the bus was created with other sizes
     * @throws IllegalArgumentException if the retention set differs from the bus's
     * @throws IOException              if it cannot be opened or is not to be trusted
     */
    public RollingBusWriter open() throws IOException {
        openCheck();
        RollingDir b = RollingDir.forWriter(dir, segmentSize, recordSize, retention, consumerPolicy, allowForeign);
        wake = WakeFile.forRollingBus(dir, allowForeign); // never fails: without it, readers find records by polling
        try {
            for (;;) {
                long[] current = b.chooseCurrent();
                if (current == null) {
                    b.createSegment(0, 0); // never made, or removed by someone: the first segment again
                    continue;
                }
                try {
                    w = openSegment(b, current[0]);
                    segment = current[0];
                    break;
                } catch (NoSuchFileException e) {
                    // retention removed it after the listing: look again
                }
            }
        } catch (IOException | RuntimeException e) {
            wake.close();
            wake = WakeFile.NONE;
            throw e;
        }
        bus = b;
        countdown = 1; // look ahead at the first write
        return this;
    }

    private MappedBusWriter openSegment(RollingDir b, long index) throws IOException {
        MappedBusWriter x = MappedBusWriter.forSegment(b.segmentPath(index).toString(), segmentSize, recordSize);
        x.wake = wake;
        return x.setAllowForeign(allowForeign).open();
    }

    // The report of a fault that the JVM may still hold for this thread, taken before the file work of a look-ahead
    // or a roll enters the VM, where it would be raised (JDK 17 raises it late, at the thread's next entry into the
    // VM): most likely that of the last write's look at the wake file, cut under it (WakeFile.wakeIfNeeded), then
    // no longer used if found short. A segment truncated under its writer is still found by the writer's own
    // length checks.
    private void takeFaultReports() {
        try {
            MemoryMappedFile.raiseFaultReports();
        } catch (InternalError e) {
            if (!MemoryMappedFile.isMappingFault(e)) {
                throw e;
            }
            wake.check();
        }
    }

    /**
     * Wakes the readers parked on this bus, if any. The writes of this class do it after each commit; a caller that
     * commits the slots of {@link #reserve} itself calls this once after its batch.
     */
    public void wakeReaders() {
        wake.wakeIfNeeded();
    }

    /**
     * Writes an object message as one record, in a new segment if the current one is full.
     *
     * @param message the message
     * @return true if committed; false if a reader had already rolled the record back (too slow)
     * @throws IOException if the next segment cannot be created or opened
     */
    public boolean write(MappedBusMessage message) throws IOException {
        if (--countdown <= 0) {
            lookAhead();
        }
        for (;;) {
            try {
                return writer().write(message);
            } catch (EOFException e) {
                roll();
            }
        }
    }

    /**
     * Writes bytes as one record (the metadata holds {@code length}), in a new segment if the current one
     * is full.
     *
     * @param src    source array
     * @param offset index of the first byte
     * @param length number of bytes, at most the record size
     * @return true if committed; false if a reader had already rolled the record back (too slow)
     * @throws IOException if the next segment cannot be created or opened
     */
    public boolean write(byte[] src, int offset, int length) throws IOException {
        if (--countdown <= 0) {
            lookAhead();
        }
        for (;;) {
            try {
                return writer().write(src, offset, length);
            } catch (EOFException e) {
                roll();
            }
        }
    }

    /**
     * Reserves up to {@code n} contiguous record slots in one segment for a caller that fills and commits
     * them itself (the Spark connector's exactly-once writes): all {@code n} if they fit in the current
     * segment, else the slots left in it, moving to the next segment first when none is left. The slots
     * are the caller's alone and stay uncommitted until it commits (or rolls back) each of them, through
     * {@link #mapSegment}; readers wait on them up to their timeout.
     *
     * @param n slots wanted, at least 1
     * @return {global position of the first slot, number of slots reserved (1..n)}
     * @throws IOException if the next segment cannot be created or opened
     */
    public long[] reserve(long n) throws IOException {
        long slot = Layout.slotSize(recordSize);
        if (n < 1 || n > Long.MAX_VALUE / slot) {
            throw new IllegalArgumentException("cannot reserve " + n + " slots in " + dir);
        }
        if (--countdown <= 0) {
            lookAhead();
        }
        for (;;) {
            writer();
            if (reservingIndex != segment) {
                if (reserving != null) {
                    reserving.closeAndUnmap();
                    reserving = null;
                }
                reserving = mapSegment(segment);
                reservingIndex = segment;
            }
            long first = reserving.getAndAddLong(Layout.LIMIT_OFFSET, n * slot);
            if (first < Layout.FIRST_RECORD_OFFSET) {
                throw new CorruptBusException("limit " + first + " of segment " + bus.segmentPath(segment)
                        + " is before the first record (a corrupt segment)");
            }
            long fit = first >= segmentSize ? 0 : Math.min(n, (segmentSize - first) / slot);
            if (fit > 0) {
                return new long[] {Layout.joinPosition(segment, first, segmentSize), fit};
            }
            roll();
        }
    }

    /**
     * Maps segment {@code index} of this bus for reading and writing, never creating it.
     *
     * @param index the segment
     * @return its mapping, of {@link #segmentSize()} bytes; the caller closes it
     * @throws java.nio.file.NoSuchFileException if the segment does not exist (never made, or removed by retention)
     * @throws IOException                       if it cannot be opened or is not to be trusted
     */
    public MemoryMappedFile mapSegment(long index) throws IOException {
        if (bus == null) {
            throw new IllegalStateException("rolling writer for " + dir + " is not open");
        }
        MemoryMappedFile.OpenOptions o = new MemoryMappedFile.OpenOptions();
        o.exclusive = true;
        o.allowForeign = allowForeign;
        return MemoryMappedFile.open(bus.segmentPath(index).toString(), segmentSize, o);
    }

    // Once every `every` writes: deferred work, then, past the middle of the segment, the spare.
    private void lookAhead() throws IOException {
        countdown = every;
        if (bus == null) {
            return; // not open: the write reports it
        }
        takeFaultReports();
        applyMark();
        if (retired != null) {
            retired.close();
            retired = null;
        }
        if (spare != null || currentLimit() < half) {
            return;
        }
        long next = segment + 1;
        if (!bus.exists(next)) {
            if (bus.firstAfter(next) >= 0) {
                return; // this writer is behind: it jumps ahead when it rolls
            }
            bus.createSegment(next, segment);
            wakeReaders(); // a reader past the end of the current segment waits for this one
        }
        try {
            spare = openSegment(bus, next);
            spareIndex = next;
        } catch (NoSuchFileException e) {
            // removed at once by retention: the writers are further on
        }
    }

    // The current segment's limit, read through a channel kept open (a pread, not an open per look).
    private long currentLimit() throws IOException {
        if (limitChannel == null || limitChannelIndex != segment) {
            if (limitChannel != null) {
                limitChannel.close();
            }
            limitChannel = FileChannel.open(bus.segmentPath(segment), StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS);
            limitChannelIndex = segment;
        }
        limitBuf.clear();
        limitChannel.read(limitBuf, Layout.LIMIT_OFFSET);
        return limitBuf.getLong(0);
    }

    // A roll's deferred work: the full segment's mtime, then retention, which now counts that segment as
    // history (the creation of the segment rolled into counted it as the current one).
    private void applyMark() throws IOException {
        if (markIndex >= 0) {
            long index = markIndex;
            markIndex = -1;
            bus.markFull(index, markMs);
            bus.applyRetention(segment, segment);
        }
    }

    // Segment `segment` is full: to the next one (the spare, or opened or created now), or to the newest
    // when other writers are further already (a record never goes below a segment already in use).
    private void roll() throws IOException {
        long t0 = System.nanoTime();
        long full = segment;
        writer();
        ConsumerRetention held = bus.consumers();
        if (held != null && held.blocks()) {
            held.awaitRoom(full + 1); // before anything moves: a BusBackPressureException leaves the write retryable
        }
        takeFaultReports();
        applyMark(); // a previous roll's, not yet applied: rolls came faster than look-aheads
        markIndex = full;
        markMs = System.currentTimeMillis();
        MappedBusWriter next;
        long target = full + 1;
        // No file-system call here: cold NIO code costs ~200 us on this rarely run path. The spare cannot
        // have been removed unless full (retention spares every writer's current segment, and nobody
        // moves past target before filling it), and a full one just rolls again.
        if (spare != null && spareIndex == target) {
            next = spare;
        } else {
            if (spare != null) {
                spare.close();
            }
            next = null;
            while (next == null) {
                if (!bus.exists(target)) {
                    long[] segs = bus.segments();
                    if (segs.length > 0 && segs[segs.length - 1] > target) {
                        target = segs[segs.length - 1];
                        markIndex = -1; // not full because of this writer's roll
                    } else if (bus.createSegment(target, full) && bus.firstAfter(target) >= 0) {
                        // This writer was so slow that others filled target and retention removed it:
                        // the segment just made would bring it back below newer ones.
                        Files.deleteIfExists(bus.segmentPath(target));
                        continue;
                    }
                }
                try {
                    next = openSegment(bus, target);
                } catch (NoSuchFileException e) {
                    // removed by retention meanwhile: look again
                }
            }
        }
        spare = null;
        spareIndex = -1;
        if (retired != null) {
            retired.close();
        }
        retired = w;
        w = next;
        segment = target;
        countdown = every;
        wakeReaders(); // readers at the end of the full segment: their next one exists now
        long dt = System.nanoTime() - t0;
        rolls++;
        rollNanos += dt;
        maxRollNanos = Math.max(maxRollNanos, dt);
    }

    private MappedBusWriter writer() {
        MappedBusWriter x = w;
        if (x == null) {
            throw new IllegalStateException("rolling writer for " + dir + " is " + (closed ? "closed" : "not open"));
        }
        return x;
    }

    /** @return the bus's id (from bus.meta) */
    public String busId() {
        if (bus == null) {
            throw new IllegalStateException("rolling writer for " + dir + " is not open");
        }
        return bus.meta.id();
    }

    /** @return the index of the segment this writer writes to */
    public long segment() {
        return segment;
    }

    /** @return the times this writer moved to another segment */
    public long rolls() {
        return rolls;
    }

    /** @return nanoseconds spent moving to other segments, all rolls together */
    public long rollNanos() {
        return rollNanos;
    }

    /** @return nanoseconds of the slowest roll */
    public long maxRollNanos() {
        return maxRollNanos;
    }

    /** @return the segment size */
    public long segmentSize() {
        return segmentSize;
    }

    /** @return the record payload size */
    public int recordSize() {
        return recordSize;
    }

    /** Releases the current segment; later writes throw {@link IllegalStateException}. Idempotent. */
    @Override
    public void close() {
        closed = true;
        if (bus != null && markIndex >= 0) {
            try {
                applyMark();
            } catch (IOException e) {
                // best effort: the segment keeps an earlier time, so it is removed earlier by age
            }
        }
        for (MappedBusWriter x : new MappedBusWriter[] {w, spare, retired}) {
            if (x != null) {
                x.close();
            }
        }
        if (reserving != null) {
            reserving.closeAndUnmap();
            reserving = null;
        }
        w = null;
        spare = null;
        retired = null;
        wake.close();
        if (bus != null) {
            bus.close();
        }
        if (limitChannel != null) {
            try {
                limitChannel.close();
            } catch (IOException e) {
                // read-only channel: nothing to lose
            }
            limitChannel = null;
        }
    }
}
