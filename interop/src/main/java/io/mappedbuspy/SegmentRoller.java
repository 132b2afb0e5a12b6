package io.mappedbuspy;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.StandardOpenOption;

/**
 * The segments of a {@link RollingBusWriter} and its moves between them (docs/files-and-rolling.md, "Rolling bus":
 * writers roll, spare segment, retention, age): the segment written, the spare made ahead of time and mapped once
 * the current one is half full (so the write that rolls only swaps mappings), the roll, and the work kept off the
 * write that rolls (closing the old mapping, setting the full segment's modification time, retention). Not
 * thread-safe, like its writer.
 */
final class SegmentRoller {
    final RollingDir bus;
    private final WakeFile wake;
    private final boolean allowForeign;
    private final long half;
    /** The segment written, and its writer (null once closed). */
    MappedBusWriter w;
    long segment = -1;
    private MappedBusWriter spare;
    private long spareIndex = -1;
    // Kept off the write that rolls, done at the next look-ahead: closing the old mapping, and setting the full
    // segment's modification time (age retention) to the time of the roll.
    private MappedBusWriter retired;
    private long markIndex = -1;
    private long markMs;
    private FileChannel limitChannel;
    private long limitChannelIndex = -1;
    private final ByteBuffer limitBuf = ByteBuffer.allocateDirect(8).order(ByteOrder.LITTLE_ENDIAN);
    long rolls;
    long rollNanos;
    long maxRollNanos;

    SegmentRoller(RollingDir bus, WakeFile wake, boolean allowForeign) {
        this.bus = bus;
        this.wake = wake;
        this.allowForeign = allowForeign;
        this.half = bus.segmentSize / 2;
    }

    /** Opens the newest segment with records (making segment 0 again if there is none). */
    void openNewest() throws IOException {
        for (;;) {
            long[] current = bus.chooseCurrent();
            if (current == null) {
                bus.createSegment(0, 0); // never made, or removed by someone: the first segment again
                continue;
            }
            try {
                w = openSegment(current[0]);
                segment = current[0];
                return;
            } catch (NoSuchFileException e) {
                // retention removed it after the listing: look again
            }
        }
    }

    private MappedBusWriter openSegment(long index) throws IOException {
        MappedBusWriter x = MappedBusWriter.forSegment(bus.segmentPath(index).toString(), bus.segmentSize,
                bus.recordSize);
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

    /** Once every few writes: deferred work, then, past the middle of the segment, the spare. */
    void lookAhead() throws IOException {
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
            wake.wakeIfNeeded(); // a reader past the end of the current segment waits for this one
        }
        try {
            spare = openSegment(next);
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
            limitChannel = FileChannel.open(bus.segmentPath(segment), StandardOpenOption.READ,
                    LinkOption.NOFOLLOW_LINKS);
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

    /**
     * Segment {@code segment} is full: to the next one (the spare, or opened or created now), or to the newest when
     * other writers are further already (a record never goes below a segment already in use).
     */
    void roll() throws IOException {
        long t0 = System.nanoTime();
        long full = segment;
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
                    next = openSegment(target);
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
        wake.wakeIfNeeded(); // readers at the end of the full segment: their next one exists now
        long dt = System.nanoTime() - t0;
        rolls++;
        rollNanos += dt;
        maxRollNanos = Math.max(maxRollNanos, dt);
    }

    /** The pending mark (best effort), then every segment mapping, the limit channel and the consumer registry. */
    void close() {
        if (markIndex >= 0) {
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
        w = null;
        spare = null;
        retired = null;
        bus.close();
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
