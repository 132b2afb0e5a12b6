package io.mappedbuspy;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

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
    private final long threeQuarters;
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
    // The spare being prepared off the writing thread (prepare): made if this writer is its maker (RollingDir
    // .makeSegment: on tmpfs 64 MiB of zeros, 30-40 ms, a third of the time a Java writer takes to fill a 64 MiB
    // segment), then mapped and its pages mapped ahead (MappedBusWriter.populateAll), so neither the write that
    // rolls nor the writes after it wait for the kernel. Its result is taken by a later look-ahead, or waited for by a
    // roll or close. A segment whose making failed is left to the roll, which makes it itself and reports the error.
    private Future<MappedBusWriter> preparing;
    private long preparingIndex = -1;
    // Set by the helper once it linked the segment it made, so a look-ahead applies the creator's retention (and wakes
    // readers) then, not once the mapping is ready too: the bus holds no more segments than retention allows.
    private volatile boolean preparingMade;
    private boolean preparingApplied;
    private long makeFailed = -1;
    // The thread that prepares spares and unmaps retired segments for this writer, started at the first spare.
    private ExecutorService helper;
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
        this.threeQuarters = half + half / 2;
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

    /**
     * This writer allocated its segment's spare trigger (RollingLayout.spareTrigger): it is the maker of the next
     * segment, which it makes (if absent) and maps off the writing thread. Never throws: a failure is the roll's.
     */
    void makeSpare() {
        if (spare == null && preparing == null && segment + 1 != makeFailed) {
            prepare(segment + 1, true);
        }
    }

    /**
     * Once every few thousand writes: a roll's deferred work; past the middle of the segment, the spare: mapped once
     * it exists; past three quarters, made if its maker has not (it died, or a batch stepped over the trigger).
     */
    void lookAhead() throws IOException {
        takeFaultReports();
        applyMark();
        if (retired != null) {
            retire(retired);
            retired = null;
        }
        if (preparing != null) {
            applyCreated();
            if (!preparing.isDone()) {
                return;
            }
            finishPreparing();
        }
        if (spare != null) {
            return;
        }
        long limit = currentLimit();
        if (limit < half) {
            return;
        }
        long next = segment + 1;
        if (bus.exists(next)) {
            prepare(next, false);
        } else if (limit >= threeQuarters && next != makeFailed) {
            prepare(next, true);
        }
    }

    // Prepares segment `index` as the spare on the helper thread, off the writing thread: with `make`, makes it if
    // absent, holding its claim (when another writer holds it, that one makes it: nothing is prepared), then maps
    // it and its pages. Its result, the spare's writer or null, is finishPreparing's.
    private void prepare(long index, boolean make) {
        if (helper == null) {
            helper = Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "mappedbus-segments " + bus.dir.getFileName());
                t.setDaemon(true); // a writer never closed does not keep the JVM alive
                return t;
            });
        }
        preparingMade = false;
        preparingApplied = false;
        preparingIndex = index;
        preparing = helper.submit(() -> {
            if (make && !bus.exists(index)) {
                FileLock claim = claim(index);
                if (claim == null && !noClaims) {
                    return null; // another writer makes it: a look-ahead maps it
                }
                try {
                    if (!bus.exists(index)) {
                        if (bus.firstAfter(index) >= 0) {
                            return null; // this writer is behind: it jumps ahead when it rolls
                        }
                        preparingMade = bus.makeSegment(index);
                    }
                } finally {
                    release(claim);
                }
            }
            MappedBusWriter x;
            try {
                x = openSegment(index);
            } catch (NoSuchFileException e) {
                return null; // absent, or removed at once by retention: the writers are further on
            }
            x.populateAll();
            return x;
        });
    }

    // The spare's preparation is over (waits for it if not): the creator's retention, the readers waiting for it.
    private void finishPreparing() throws IOException {
        Future<MappedBusWriter> f = preparing;
        long index = preparingIndex;
        preparing = null;
        preparingIndex = -1;
        MappedBusWriter x = null;
        boolean interrupted = false;
        for (;;) {
            try {
                x = f.get();
                break;
            } catch (InterruptedException e) {
                interrupted = true; // the making cannot be abandoned midway: wait, keep the interrupt
            } catch (ExecutionException e) {
                makeFailed = index;
                break;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
        applyCreated(index);
        if (x != null) {
            if (index == segment + 1) {
                spare = x;
                spareIndex = index;
            } else {
                retire(x); // the writer rolled past it meanwhile
            }
        }
    }

    // The segment being prepared was made by this writer: the creator's retention, and the readers waiting for it.
    private void applyCreated() throws IOException {
        applyCreated(preparingIndex);
    }

    private void applyCreated(long index) throws IOException {
        if (preparingMade && !preparingApplied) {
            preparingApplied = true;
            bus.afterCreate(index, segment);
            wake.wakeIfNeeded(); // a reader past the end of the current segment waits for this one
        }
    }

    // Unmaps a segment this writer no longer writes, on the helper thread (a 64 MiB mapping: about a millisecond).
    private void retire(MappedBusWriter x) {
        if (helper == null) {
            x.close();
        } else {
            helper.execute(x::close);
        }
    }

    // Segment index's claim (Layout.SEGMENT_CLAIM_BASE), or null when another writer holds it or there are no
    // claims here.
    private FileLock claim(long index) {
        if (noClaims) {
            return null;
        }
        try {
            if (metaChannel == null) {
                metaChannel = FileChannel.open(bus.dir.resolve(Layout.META_FILE), StandardOpenOption.WRITE,
                        LinkOption.NOFOLLOW_LINKS);
            }
            return metaChannel.tryLock(Layout.SEGMENT_CLAIM_BASE + index, 1, false);
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

    /**
     * At a roll, segment {@code index} missing: while another writer holds the claim on it, waits for the segment
     * (at most {@link Layout#SEGMENT_CLAIM_WAIT_MS}).
     *
     * @return true if it waited (look again), false if nobody holds the claim (make it)
     */
    private boolean awaitClaim(long index) throws IOException {
        if (noClaims) {
            return false;
        }
        long deadline = System.nanoTime() + Layout.SEGMENT_CLAIM_WAIT_MS * 1_000_000L;
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
        if (preparing != null) {
            finishPreparing(); // the spare not ready yet: waited for rather than made twice
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
                retire(spare);
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
                    } else {
                        bus.createSegment(target, full); // not linked if a later one exists: looked at again
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
            retire(retired);
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
        if (preparing != null) {
            try {
                finishPreparing();
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
        if (helper != null) {
            helper.shutdown(); // after the unmaps queued, which close waits for: nothing stays mapped
            boolean interrupted = false;
            for (;;) {
                try {
                    helper.awaitTermination(1, java.util.concurrent.TimeUnit.DAYS);
                    break;
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
            helper = null;
        }
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
