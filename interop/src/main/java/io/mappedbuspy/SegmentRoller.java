package io.mappedbuspy;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.FutureTask;

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
    // The spare being made off the writing thread (RollingDir.makeSegment: on tmpfs 64 MiB of zeros, 30-40 ms,
    // a third of the time a Java writer takes to fill a 64 MiB segment, which the write that found it missing used
    // to wait for); its result is taken by a later look-ahead, or waited for by a roll or close. A segment whose
    // making failed is left to the roll, which makes it itself and reports the error.
    private FutureTask<Boolean> making;
    private long makingIndex = -1;
    private long makeFailed = -1;
    // bus.meta, open for the claims' locks (claim), never written.
    private FileChannel metaChannel;
    private boolean noClaims;
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
        if (making != null) {
            if (!making.isDone()) {
                return;
            }
            finishMaking();
        }
        if (!bus.exists(next)) {
            if (next == makeFailed) {
                return; // left to the roll
            }
            FileLock lock = claim(next);
            if (lock == null && !noClaims) {
                return; // another writer makes it: looked at again at the next look-ahead
            }
            if (bus.exists(next) || bus.firstAfter(next) >= 0) {
                release(lock); // made meanwhile; or this writer is behind: it jumps ahead when it rolls
                return;
            }
            startMaking(next, lock);
            return;
        }
        try {
            spare = openSegment(next);
            spareIndex = next;
        } catch (NoSuchFileException e) {
            // removed at once by retention: the writers are further on
        }
    }

    private void startMaking(long index, FileLock claim) {
        FutureTask<Boolean> f = new FutureTask<>(() -> {
            try {
                return bus.makeSegment(index);
            } finally {
                release(claim);
            }
        });
        Thread t = new Thread(f, "mappedbus-segment-" + index);
        t.setDaemon(true); // a writer never closed does not keep the JVM alive (its temporary file goes as stale)
        t.start();
        making = f;
        makingIndex = index;
    }

    // The spare's making is over (waits for it if not): the creator's retention, and the readers waiting for it.
    private void finishMaking() throws IOException {
        FutureTask<Boolean> f = making;
        long index = makingIndex;
        making = null;
        makingIndex = -1;
        boolean created;
        boolean interrupted = false;
        for (;;) {
            try {
                created = f.get();
                break;
            } catch (InterruptedException e) {
                interrupted = true; // the making cannot be abandoned midway: wait, keep the interrupt
            } catch (ExecutionException e) {
                makeFailed = index;
                created = false;
                break;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
        if (created) {
            bus.afterCreate(index, segment);
            wake.wakeIfNeeded(); // a reader past the end of the current segment waits for this one
        }
    }

    /**
     * A writer's claim to make segment {@code index} ahead of time: a POSIX record lock (non-blocking) on byte
     * {@link #CLAIM_BASE} + index of {@code bus.meta}, so one writer of the bus fills the segment where every writer
     * past the middle of the segment did (measured, four Java writers and a reader on 2 vCPUs: four makers a segment,
     * 100-300 ms each instead of 35 ms alone, 0.5-0.8 s of system time a 20 M record run). The kernel drops the lock
     * of a killed claimer; a stopped one is waited for at most {@link #CLAIM_WAIT_MS} by the rolls, which then make
     * the segment themselves ({@link RollingDir#createSegment}). The files and linking are unchanged: linking stays
     * the only arbiter of a segment, and a lost claim only costs a second maker.
     *
     * @return the lock; null if another writer holds it
     */
    private FileLock claim(long index) {
        if (noClaims) {
            return null;
        }
        try {
            if (metaChannel == null) {
                metaChannel = FileChannel.open(bus.dir.resolve(Layout.META_FILE), StandardOpenOption.WRITE,
                        LinkOption.NOFOLLOW_LINKS);
            }
            return metaChannel.tryLock(CLAIM_BASE + index, 1, false);
        } catch (java.nio.channels.OverlappingFileLockException e) {
            return null; // another writer of this JVM
        } catch (IOException e) {
            noClaims = true; // bus.meta not writable here (a foreign bus), or no locks: every writer makes it
            return null;
        }
    }

    private static void release(FileLock lock) {
        try {
            if (lock != null && lock.isValid()) {
                lock.release();
            }
        } catch (IOException e) {
            // closed with its channel: released
        }
    }

    /** Where the claims' bytes start in bus.meta's lock space (past any file's end: locks only, never data). */
    static final long CLAIM_BASE = 1L << 40;
    /** The most a roll waits for another writer's claim before it makes the segment itself. */
    static final long CLAIM_WAIT_MS = 2_000;

    /**
     * At a roll, segment {@code index} missing: while another writer holds the claim on it, waits for the segment
     * (at most {@link #CLAIM_WAIT_MS}).
     *
     * @return true if it waited (look again), false if nobody holds the claim (make it)
     */
    private boolean awaitClaim(long index) throws IOException {
        if (noClaims) {
            return false;
        }
        long deadline = System.nanoTime() + CLAIM_WAIT_MS * 1_000_000L;
        boolean waited = false;
        while (!bus.exists(index) && System.nanoTime() - deadline < 0) {
            FileLock lock = claim(index);
            if (lock != null || noClaims) {
                release(lock);
                return waited;
            }
            waited = true;
            try {
                Thread.sleep(1);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return true;
            }
        }
        return waited && bus.exists(index);
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
        if (making != null) {
            finishMaking(); // the spare not made yet: waited for rather than made twice
        }
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
                    } else if (awaitClaim(target)) {
                        continue; // another writer was making it: look again
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
        if (making != null) {
            try {
                finishMaking();
            } catch (IOException e) {
                // best effort: the next creator applies retention
            }
        }
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
        if (metaChannel != null) {
            try {
                metaChannel.close();
            } catch (IOException e) {
                // nothing written: nothing to lose
            }
            metaChannel = null;
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
