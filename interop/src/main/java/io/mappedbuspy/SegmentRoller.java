package io.mappedbuspy;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.FutureTask;
import io.mappedbuspy.internal.ConsumerRetention;
import io.mappedbuspy.internal.MemoryMappedFile;
import io.mappedbuspy.internal.RollingDir;
import io.mappedbuspy.internal.WakeFile;
import io.mappedbuspy.internal.WritersFile;

/**
 * The segments of a {@link RollingBusWriter} and its moves between them (docs/files-and-rolling.md, "Rolling bus":
 * writers roll, spare segment, claims, retention, age): the segment written, the spare made and mapped ahead of time
 * on a helper thread (so the write that rolls only swaps mappings), the roll, and the work kept off the write that
 * rolls (unmapping, the full segment's modification time, retention). Not thread-safe, like its writer.
 */
final class SegmentRoller {
    final RollingDir bus;
    private final WakeFile wake;
    private final boolean allowForeign;
    private final long half;
    private final long threeQuarters;
    /** The segment written, and its writer (null once closed). */
    MappedBusWriter w;
    long segment;
    // The segment after the one written: its state in the spare's preparation (Spare).
    private Spare next = IDLE;
    // Kept off the write that rolls, done at the next look-ahead: closing the old mapping, and setting the full
    // segment's modification time (age retention) to the time of the roll (null: none pending).
    private MappedBusWriter retired;
    private Mark mark;
    // The current segment's file, open for reading its limit (null until the first look).
    private LimitReader limitReader;
    private final ByteBuffer limitBuf = ByteBuffer.allocateDirect(8).order(ByteOrder.LITTLE_ENDIAN);
    // Set by a roll: the mapping step under way stops populating and hands its segment over.
    private volatile boolean cutMapping;

    /**
     * The spare: the segment after the one written ({@code index}, always {@code segment + 1}), prepared in two steps
     * on the helper thread. Made if this writer is its maker: its temporary file preallocated (64 MiB on tmpfs:
     * 40 ms) and linked, both under the claim (a writer that rolls meanwhile must not find it neither made nor
     * claimed, and make a second one); the creator's retention runs at the next look-ahead. Then mapped with its pages
     * (populateAll: 25 ms in its maker, 7 in the others), so no write waits for the kernel. One state at a time:
     * Idle, then Making and Mapping, or Mapping alone when another writer made it, then Ready; a roll takes a Ready
     * spare and starts again from Idle. A segment whose making failed (MakeFailed) is left to the roll, which makes
     * it itself and reports the error.
     */
    private sealed interface Spare { }

    /** Nothing under way: a look-ahead or the spare trigger starts the next step. */
    private record Idle() implements Spare { }

    /** The making step of segment {@code index} runs on the helper thread. */
    private record Making(long index, Future<Made> step) implements Spare { }

    /** The mapping step of segment {@code index} runs on the helper thread. */
    private record Mapping(long index, Future<MappedBusWriter> step) implements Spare { }

    /** Segment {@code index} is mapped, its pages too: the roll swaps to {@code writer}. */
    private record Ready(long index, MappedBusWriter writer) implements Spare { }

    /** Making segment {@code index} failed: not tried again here (a look-ahead may still map it once it exists). */
    private record MakeFailed(long index) implements Spare { }

    private static final Spare IDLE = new Idle();

    private record Made(boolean linked) { } // whether the making step linked the segment (else it existed)

    /** A roll's mark, applied at the next look-ahead: segment {@code index} became full at {@code ms} (Unix ms). */
    private record Mark(long index, long ms) { }

    /** Segment {@code index}'s file, open for reading its limit. */
    private record LimitReader(long index, FileChannel channel) { }

    // The thread that prepares spares and unmaps retired segments for this writer, started at the first spare.
    private ExecutorService helper;
    // bus.meta, open for the claims' locks (claim), never written.
    private FileChannel metaChannel;
    private boolean noClaims;
    long rolls;
    long rollNanos;
    long maxRollNanos;

    // The bus's writers file with the rolling writer's slot: its segment writers publish their claims there.
    final WritersFile writers;

    private SegmentRoller(RollingDir bus, WakeFile wake, WritersFile writers, boolean allowForeign, long segment,
            MappedBusWriter w) {
        this.bus = bus;
        this.wake = wake;
        this.writers = writers;
        this.allowForeign = allowForeign;
        this.half = bus.segmentSize / 2;
        this.threeQuarters = half + half / 2;
        this.segment = segment;
        this.w = w;
    }

    /** The segments of a writer at the newest segment with records (making segment 0 again if there is none). */
    static SegmentRoller openNewest(RollingDir bus, WakeFile wake, WritersFile writers, boolean allowForeign)
            throws IOException {
        for (;;) {
            RollingDir.Current current = bus.chooseCurrent();
            if (current == null) {
                bus.createSegment(0, 0); // never made, or removed by someone: the first segment again
                continue;
            }
            try {
                MappedBusWriter w = openSegment(bus, wake, writers, allowForeign, current.segment());
                return new SegmentRoller(bus, wake, writers, allowForeign, current.segment(), w);
            } catch (NoSuchFileException e) {
                // retention removed it after the listing: look again
            }
        }
    }

    private MappedBusWriter openSegment(long index) throws IOException {
        return openSegment(bus, wake, writers, allowForeign, index);
    }

    private static MappedBusWriter openSegment(RollingDir bus, WakeFile wake, WritersFile writers, boolean allowForeign,
            long index)
            throws IOException {
        MappedBusWriter x = MappedBusWriter.forSegment(bus.segmentPath(index).toString(), bus.segmentSize,
                bus.recordSize);
        x.wake = wake;
        x.writers = writers;
        x.positionBase = Layout.joinPosition(index, 0, bus.segmentSize);
        return x.setAllowForeign(allowForeign).open();
    }

    // The report of a fault that the JVM may still hold for this thread (JDK 17 raises it late, at the thread's next
    // entry into the VM), taken before a look-ahead's or a roll's file work: most likely the last write's look at a
    // wake file cut under it, then no longer used. A truncated segment is found by the writer's own length checks.
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

    // This writer took its segment's spare trigger (RollingLayout.spareTrigger): it makes the next segment (if absent)
    // and maps it, off the writing thread, unless its preparation is under way, done or failed. Never throws: a
    // failure is the roll's.
    void makeSpare() {
        if (next instanceof Idle) {
            startMaking(segment + 1);
        }
    }

    // Once every few thousand writes: a roll's deferred work; the spare's steps as they finish; past the middle, the
    // spare mapped once it exists; past three quarters, made if its maker has not (it died, or a batch skipped it).
    void lookAhead() throws IOException {
        takeFaultReports();
        applyMark();
        if (retired != null) {
            retire(retired);
            retired = null;
        }
        if (next instanceof Making m) {
            if (m.step().isDone()) {
                finishMaking(true);
            }
            return;
        }
        if (next instanceof Mapping m) {
            if (!m.step().isDone()) {
                return;
            }
            finishMapping();
        }
        if (next instanceof Ready) {
            return;
        }
        long limit = currentLimit();
        if (limit < half) {
            return;
        }
        long index = segment + 1;
        if (bus.exists(index)) {
            startMapping(index, false);
        } else if (limit >= threeQuarters && next instanceof Idle) { // not after a failed making: the roll's
            startMaking(index);
        }
    }

    private ExecutorService helper() {
        if (helper == null) {
            helper = Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "mappedbus-segments " + bus.dir.getFileName());
                t.setDaemon(true); // a writer never closed does not keep the JVM alive
                return t;
            });
        }
        return helper;
    }

    // The making step of segment `index` on the helper thread: its temporary file, under its claim (when another
    // writer holds the claim, that one makes it: nothing here), unless it exists (then it is only mapped).
    private void startMaking(long index) {
        next = new Making(index, helper().submit(() -> {
            if (bus.exists(index)) {
                return new Made(false);
            }
            FileLock claim = claim(index);
            if (claim == null && !noClaims) {
                return null; // another writer makes it: a look-ahead maps it
            }
            try {
                if (bus.exists(index)) {
                    return new Made(false);
                }
                if (bus.firstAfter(index) >= 0) {
                    return null; // this writer is behind: it jumps ahead when it rolls
                }
                // The claim ends with the segment linked: a writer that rolls first waits for it, then opens it.
                return new Made(bus.linkTemporary(index, bus.makeTemporary(index)));
            } finally {
                release(claim);
            }
        }));
    }

    // The making step is over (waits for it if not): the creator's retention and the readers waiting for the segment;
    // with `thenMap`, the mapping step.
    private void finishMaking(boolean thenMap) throws IOException {
        Making step = (Making) next;
        long index = step.index();
        next = IDLE;
        Made m;
        try {
            m = await(step.step());
        } catch (ExecutionException e) {
            next = new MakeFailed(index);
            return;
        }
        if (m == null) {
            return;
        }
        boolean made = m.linked();
        if (made) {
            bus.afterCreate(index, segment);
            wake.wakeIfNeeded(); // a reader past the end of the current segment waits for this one
        }
        if (thenMap && index == segment + 1) {
            startMapping(index, made);
        }
    }

    // The mapping step of segment `index` on the helper thread: opened, its pages mapped (one pending is retired):
    // for writing if this writer `made` it (its fallocated pages are zeroed there), else for reading, 16 pages a fault.
    private void startMapping(long index, boolean made) {
        next = new Mapping(index, helper().submit(() -> {
            MappedBusWriter x;
            try {
                x = openSegment(index);
            } catch (NoSuchFileException e) {
                return null; // removed at once by retention: the writers are further on
            }
            x.populateAll(made, () -> cutMapping);
            return x;
        }));
    }

    // The mapping step is over (waits for it if not): the spare, or retired if this writer rolled past it.
    private void finishMapping() {
        Mapping step = (Mapping) next;
        next = IDLE;
        MappedBusWriter x;
        try {
            x = await(step.step());
        } catch (ExecutionException e) {
            return; // the roll opens it itself
        }
        if (x != null) {
            if (step.index() == segment + 1) {
                next = new Ready(step.index(), x);
            } else {
                retire(x);
            }
        }
    }

    // A helper step's result, waited for; one the helper has not started runs here (a roll would wait 6-12 ms for the
    // helper to be scheduled where threads spin on every core). An interrupt is kept for the caller.
    private static <T> T await(Future<T> f) throws ExecutionException {
        if (f instanceof FutureTask<?> t) {
            t.run(); // nothing once the helper started it
        }
        boolean interrupted = false;
        try {
            for (;;) {
                try {
                    return f.get();
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
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
        if (limitReader == null || limitReader.index() != segment) {
            if (limitReader != null) {
                limitReader.channel().close();
                limitReader = null;
            }
            limitReader = new LimitReader(segment, FileChannel.open(bus.segmentPath(segment), StandardOpenOption.READ,
                    LinkOption.NOFOLLOW_LINKS));
        }
        limitBuf.clear();
        limitReader.channel().read(limitBuf, Layout.LIMIT_OFFSET);
        return limitBuf.getLong(0);
    }

    // A roll's deferred work: the full segment's mtime, then retention, which now counts that segment as
    // history (the creation of the segment rolled into counted it as the current one).
    private void applyMark() throws IOException {
        if (mark != null) {
            Mark m = mark;
            mark = null;
            bus.markFull(m.index(), m.ms());
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
        if (held != null) {
            held.check(); // a registry that cannot be read fails the write that rolls, before anything moves
            if (held.blocks()) {
                held.awaitRoom(full + 1); // before anything moves: a BusBackPressureException leaves the write retryable
            }
        }
        takeFaultReports();
        if (next instanceof Making) {
            finishMaking(false); // the spare not made yet: waited for rather than made twice
        }
        if (next instanceof Mapping) {
            cutMapping = true; // its populate stops at the next step: taken as the spare (an mmap waits), or retired
            finishMapping();
            cutMapping = false;
        }
        applyMark(); // a previous roll's, not yet applied: rolls came faster than look-aheads
        mark = new Mark(full, System.currentTimeMillis());
        MappedBusWriter to;
        long target = full + 1;
        // No file-system call here: cold NIO code costs ~200 us on this rarely run path. The spare cannot
        // have been removed unless full (retention spares every writer's current segment, and nobody
        // moves past target before filling it), and a full one just rolls again.
        if (next instanceof Ready r && r.index() == target) {
            to = r.writer();
        } else {
            if (next instanceof Ready r) {
                retire(r.writer());
            }
            to = null;
            while (to == null) {
                if (!bus.exists(target)) {
                    long[] segs = bus.segments();
                    if (segs.length > 0 && segs[segs.length - 1] > target) {
                        target = segs[segs.length - 1];
                        mark = null; // not full because of this writer's roll
                    } else if (awaitClaim(target)) {
                        continue; // another writer was making it: look again
                    } else {
                        bus.createSegment(target, full); // not linked if a later one exists: looked at again
                    }
                }
                try {
                    to = openSegment(target);
                } catch (NoSuchFileException e) {
                    // removed by retention meanwhile: look again
                }
            }
        }
        next = IDLE; // the segment after the new one: nothing prepared yet
        if (retired != null) {
            retire(retired);
        }
        retired = w;
        w = to;
        segment = target;
        wake.wakeIfNeeded(); // readers at the end of the full segment: their next one exists now
        long dt = System.nanoTime() - t0;
        rolls++;
        rollNanos += dt;
        maxRollNanos = Math.max(maxRollNanos, dt);
    }

    /** The pending mark (best effort), then every segment mapping, the limit channel and the consumer registry. */
    void close() {
        if (next instanceof Making) {
            try {
                finishMaking(false);
            } catch (IOException e) {
                // best effort: the next creator applies retention
            }
        }
        if (next instanceof Mapping) {
            finishMapping();
        }
        if (mark != null) {
            try {
                applyMark();
            } catch (IOException e) {
                // best effort: the segment keeps an earlier time, so it is removed earlier by age
            }
        }
        MappedBusWriter spare = next instanceof Ready r ? r.writer() : null;
        for (MappedBusWriter x : new MappedBusWriter[] {w, spare, retired}) {
            if (x != null) {
                x.close();
            }
        }
        w = null;
        next = IDLE;
        retired = null;
        if (helper != null) {
            try {
                await(CompletableFuture.runAsync(() -> { }, helper)); // after the unmaps queued: nothing stays mapped
            } catch (ExecutionException e) {
                // an empty step: nothing to fail
            }
            helper.shutdown();
            helper = null;
        }
        bus.close();
        for (FileChannel ch : new FileChannel[] {metaChannel, limitReader == null ? null : limitReader.channel()}) {
            try {
                if (ch != null) {
                    ch.close();
                }
            } catch (IOException e) {
                // bus.meta's for the claims, a segment's for reads: nothing written, nothing to lose
            }
        }
        metaChannel = null;
        limitReader = null;
    }
}
