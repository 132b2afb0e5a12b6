package io.mappedbuspy.internal;

import io.mappedbuspy.*;

import java.io.EOFException;
import java.lang.invoke.VarHandle;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.channels.WritableByteChannel;
import java.nio.file.DirectoryStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributeView;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * The archiver of a rolling bus with an archive (docs/design/journal.md, "The move"; Python's
 * {@code rolling.archive.Archiver}, whose steps, states and files these are, so that either language completes a move
 * the other left): while it holds the bus's archiver lock (the OFD lock on {@link Layout#ARCHIVER_LOCK_BYTE} of
 * {@code ARCHIVE/bus.meta}, {@link Liveness}), it completes what a killed archiver left, then moves each full, settled
 * segment beyond {@code archive_after} full hot segments (or filled longer than {@code archive_age} ago) into the
 * archive, oldest first, up to {@link #MOVE_BATCH} together, then applies the archive's retention. When
 * {@code archive_after >= 1} full segments are hot and the current one is past {@link Layout#ARCHIVER_EARLY_FILL_PERCENT}
 * %, the oldest full one is due too (layout.py, "WHEN a segment moves"): it moves while the current one fills, so
 * that the hot directory never holds more than {@code archive_after + 1} segments with records, not even at a roll.
 *
 * <p>How often it looks: at once when its writer rolls ({@link #wake}); while the current segment's limit changes,
 * every {@link Layout#ARCHIVER_ACTIVE_POLL_MS} (a writer in another process or language does not wake it), through a
 * small mapping of that segment's first page (one load: no directory listing), listing the directory only when that
 * limit crosses the early fill or the segment's end; after {@link Layout#ARCHIVER_IDLE_AFTER_MS} without a change,
 * every {@link Layout#ARCHIVER_IDLE_POLL_MS}. A full look (listing the directory) runs at least every second, and every
 * idle poll when time alone makes segments due (an age rule of either tier) or no segment is watched.
 *
 * <p>It runs on a daemon thread of the writer's JVM (Python uses a child process so that moving and compressing never
 * wait for the writer's GIL; a JVM has no such lock, and a second JVM would cost a start-up and its memory): the
 * thread shares nothing with the write path, which only wakes it ({@link LockSupport#unpark}) when it rolls. The
 * kernel drops the lock when the JVM dies, and another writer's archiver (of either language) takes over.
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
 */
public final class Archiver {
    /** Test hook: a {@link MoveState}'s name makes the archiver stop forever right after reaching it (tests SIGKILL). */
    public static final String ARCHIVE_STALL_ENV = "MAPPEDBUS_TEST_ARCHIVE_STALL";
    /**
     * Test hook: this value of {@link #ARCHIVE_STALL_ENV} (no {@link MoveState}: only the copy ahead honours it) makes
     * the archiver stop forever right after a copy ahead is written and fsynced (tests SIGKILL).
     */
    public static final String COPY_AHEAD_STALL = "COPY_AHEAD";
    /** The most segments moved together (one fsync of the archive directory for all of them). */
    public static final int MOVE_BATCH = 8;
    private static final String FILE_PERMS = "rw-------";
    private static final SecureRandom RANDOM = new SecureRandom();
    private static final String STALL = System.getenv(ARCHIVE_STALL_ENV);

    private final Path hot;
    private final BusMeta meta;
    private final ArchiveFiles.Config cfg;
    private final long segmentSize;
    private final int recordSize;
    private final long end;           // a full segment's limit
    private final boolean frames;     // a framed bus: its settled scan steps frame by frame
    private final boolean allowForeign;
    private final int timeoutMs;
    private FileChannel lock;         // ARCHIVE/bus.meta, holding the archiver's byte while `holding`
    private volatile boolean holding;
    private volatile boolean busy;
    private volatile boolean stop;
    private Thread thread;
    private long settlingIndex = -1;  // the segment `settling` reads, rolling back dead writers' slots
    private MappedBusReader settling;
    private volatile Throwable error;
    /** Segments moved by this archiver. */
    private volatile long moved;
    // The current segment as the last full look saw it, and its limit between full looks (the archiver's thread only).
    private final Watch watch = new Watch();
    // The compressor and its buffers, kept from move to move (the archiver's thread only).
    private final ArchiveCompressor compressor = new ArchiveCompressor();
    // Set by wake() (a roll): the next look is a full one.
    private volatile boolean woken;
    /**
     * The copies ahead, by segment index (the map is the archiver's thread's; stop() after joining it): each full hot
     * segment not due yet (at most {@code archive_after}), once settled, copied (compressed or not) into a temporary
     * file of the archive ({@link Layout#TMP_PREFIX}) and fsynced by the copier thread, oldest first, one at a time,
     * the segment staying hot and nothing named in the archive; its move then starts from this file (MOVE_COPIED at
     * once after its time index), so that the move at the early fill is a rename, fsyncs and unlinks. A segment is
     * copied from the roll that filled it while the moves go on in the archiver's thread, so its copy has until its own
     * move (one and a half to two segments' fill with archive_after=2), not only the half segment after the move of
     * the one before it. Each future's value is the temporary file, or null if the segment was not settled. A kill
     * leaves only temporary files, which the next archiver (either language) removes ({@link #completeMoves}).
     */
    private final TreeMap<Long, CompletableFuture<Path>> ahead = new TreeMap<>();
    // The archive's segments as this archiver knows them, for the archive's retention (no listing a look).
    final ArchiveListing archived;
    // The copier thread (made at the first copy ahead) and its own compressor.
    private ExecutorService copier;
    private final ArchiveCompressor copyCompressor = new ArchiveCompressor();

    /**
     * Opens a reader of one hot segment that rolls back, after its timeout, the slots of writers that are gone, asking
     * the bus's writers file {@code writers} about the holders (the API's {@code MappedBusReader.forSegment}, which
     * only its package calls): what the archiver reads a segment with until every slot is settled.
     */
    @FunctionalInterface
    public interface SettlingReaders {
        MappedBusReader open(Path segment, long segmentSize, int recordSize, Path writers, long firstPosition)
                throws IOException;
    }

    private final SettlingReaders settlingReaders;

    public Archiver(Path hot, BusMeta meta, ArchiveFiles.Config cfg, boolean allowForeign, int timeoutMs,
            SettlingReaders settlingReaders) {
        this.settlingReaders = settlingReaders;
        this.hot = hot;
        this.meta = meta;
        this.cfg = cfg;
        this.archived = new ArchiveListing(cfg, FULL_LOOK_AT_LEAST_NS);
        this.segmentSize = meta.segmentSize();
        this.recordSize = meta.recordSize();
        this.end = RollingLayout.endBoundary(segmentSize, recordSize);
        this.frames = meta.frames();
        this.allowForeign = allowForeign;
        this.timeoutMs = timeoutMs;
    }

    /** The archiver's failure (kept; the writer's close throws it), or null. */
    public Throwable error() {
        return error;
    }

    /** Segments moved by this archiver. */
    public long moved() {
        return moved;
    }

    /** Starts the daemon thread. */
    public void start() {
        thread = new Thread(this::run, "mappedbus-archiver " + hot.getFileName());
        thread.setDaemon(true);
        thread.start();
    }

    /** Look now (the writer rolled): one unpark, nothing else on the write path. */
    public void wake() {
        Thread t = thread;
        if (t != null) {
            woken = true;
            LockSupport.unpark(t);
        }
    }

    /** Stops the thread and lets the lock go. */
    public void stop() {
        stop = true;
        Thread t = thread;
        if (t != null) {
            LockSupport.unpark(t);
            try {
                t.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            thread = null;
        }
        closeSettling();
        watch.forget();
        dropAhead();
        compressor.close();
        copyCompressor.close();
        if (lock != null) {
            try {
                lock.close();
            } catch (IOException e) {
                // the lock goes with the descriptor anyway
            }
            lock = null;
            holding = false;
        }
    }

    /**
     * Waits (waking the thread) until this archiver holds the lock and no segment is due to move, or the timeout.
     *
     * @return true if none is due
     */
    public boolean waitIdle(long timeout, TimeUnit unit) throws IOException {
        long deadline = System.nanoTime() + unit.toNanos(timeout);
        for (;;) {
            if (holding && !busy && candidates().length == 0) {
                return true;
            }
            if (System.nanoTime() - deadline >= 0) {
                return false;
            }
            wake();
            LockSupport.parkNanos(5_000_000L);
        }
    }

    private static final long ACTIVE_POLL_NS = TimeUnit.MILLISECONDS.toNanos(Layout.ARCHIVER_ACTIVE_POLL_MS);
    private static final long IDLE_POLL_NS = TimeUnit.MILLISECONDS.toNanos(Layout.ARCHIVER_IDLE_POLL_MS);
    private static final long IDLE_AFTER_NS = TimeUnit.MILLISECONDS.toNanos(Layout.ARCHIVER_IDLE_AFTER_MS);

    // Full looks (runOnce) at a roll, when the current segment's limit crosses the early fill or its end, while moves
    // are left over, and at least every idle poll; between them, while the limit changes, a load of it every active
    // poll (WHEN, layout.py).
    private void run() {
        warmUp();
        boolean full = true;
        long lastFull = 0;
        while (!stop) {
            long now;
            if (full) {
                woken = false;
                busy = true;
                try {
                    runOnce();
                } catch (IOException | RuntimeException e) {
                    error = e; // kept; the writer's close throws it; retried meanwhile
                    watch.forget();
                } finally {
                    busy = false;
                }
                lastFull = System.nanoTime();
            }
            if (stop) {
                break;
            }
            if (watch.left != Left.MORE) {
                now = System.nanoTime();
                LockSupport.parkNanos(watch.active(now) || watch.retrySoon(now) ? ACTIVE_POLL_NS : IDLE_POLL_NS);
            }
            now = System.nanoTime();
            full = woken || watch.left == Left.MORE || watch.retrySoon(now) || now - lastFull >= fullLookEvery()
                    || watch.crossed(now);
        }
    }

    /** The most time between two full looks of a bus whose current segment is watched and unchanged. */
    private static final long FULL_LOOK_AT_LEAST_NS = TimeUnit.SECONDS.toNanos(1);

    // How long a full look may wait while nothing changes: an idle poll when time alone makes segments due (the age
    // rules of either tier), when no segment is watched (no lock, or a look failed) or a look failed; else, the short
    // looks at the watched segment's limit see every change that makes one due, and a full look each second is the
    // safety net (a bus changed in a way no limit shows).
    private long fullLookEvery() {
        boolean timed = cfg.ageMs() > 0 || cfg.retainAgeMs() > 0;
        return timed || !watch.watching() || error != null ? IDLE_POLL_NS : FULL_LOOK_AT_LEAST_NS;
    }

    /** What a full look left behind of the segments due. */
    private enum Left {
        /** Nothing: every due segment moved. */
        NONE,
        /** More than a batch was due: look again at once. */
        MORE,
        /** The oldest due one is not settled yet (a slot not committed): look again each active poll for a while. */
        UNSETTLED
    }

    /**
     * What one full look saw of the current segment (the one being written: the newest, or the one before it when the
     * newest is a spare made ahead), with a read-only mapping of its first page through which each short look loads
     * its limit; and whether the look left due segments behind (not settled yet, or more than a batch).
     */
    private final class Watch {
        private long index = -1;
        private MemoryMappedFile limitPage;
        private long limit;
        private boolean early;
        private long changedAt;
        private long unsettledSince;
        Left left = Left.NONE;

        /** The full look's view: the current segment {@code current} at {@code currentLimit}; what it left. */
        void saw(HotView v, Left l) throws IOException {
            if (l == Left.UNSETTLED && left != Left.UNSETTLED) {
                unsettledSince = System.nanoTime();
            }
            left = l;
            if (v.current() != index) {
                forget();
                if (v.current() >= 0) {
                    MemoryMappedFile.OpenOptions o = new MemoryMappedFile.OpenOptions();
                    o.readOnly = true;
                    o.allowShort = true;
                    o.lock = false; // a load of the limit: no open lock (a POSIX lock of this JVM's writer stays)
                    o.allowForeign = allowForeign;
                    try {
                        limitPage = MemoryMappedFile.open(segmentPath(hot, v.current()).toString(), Layout.PAGE_SIZE,
                                o);
                    } catch (NoSuchFileException e) {
                        return; // moved on: the next full look sees the new one
                    }
                    index = v.current();
                }
            }
            if (v.currentLimit() != limit) {
                changedAt = System.nanoTime();
            }
            limit = v.currentLimit();
            early = pastEarlyFill(limit, segmentSize);
        }

        /** Whether the bus moved in the last {@link Layout#ARCHIVER_IDLE_AFTER_MS}. */
        boolean active(long now) {
            return now - changedAt < IDLE_AFTER_NS;
        }

        /** Whether an unsettled segment is retried at the next active poll (for the first idle-after span). */
        boolean retrySoon(long now) {
            return left == Left.UNSETTLED && now - unsettledSince < IDLE_AFTER_NS;
        }

        /**
         * A short look: the current segment's limit, loaded; true when it crossed the early fill since the full look,
         * or the segment is full and the next one exists (a roll: one stat).
         */
        boolean crossed(long now) {
            MemoryMappedFile m = limitPage;
            if (m == null) {
                return false;
            }
            long l = m.getLongAcquire(Layout.LIMIT_OFFSET);
            if (l != limit) {
                limit = l;
                changedAt = now;
                if (!early && pastEarlyFill(l, segmentSize)) {
                    return true;
                }
            }
            return l >= end && Files.exists(segmentPath(hot, index + 1), LinkOption.NOFOLLOW_LINKS);
        }

        boolean watching() {
            return limitPage != null;
        }

        void forget() {
            if (limitPage != null) {
                limitPage.close();
                limitPage = null;
            }
            index = -1;
        }
    }

    /**
     * Whether a current segment's {@code limit} is past {@link Layout#ARCHIVER_EARLY_FILL_PERCENT} % of the segment
     * (its {@code segmentSize} bytes): the oldest full hot segment is due then (Python's {@code past_early_fill}).
     */
    public static boolean pastEarlyFill(long limit, long segmentSize) {
        return limit * 100 > segmentSize * Layout.ARCHIVER_EARLY_FILL_PERCENT;
    }

    private boolean takeLock() throws IOException {
        if (holding) {
            return true;
        }
        if (lock == null) {
            Path p = cfg.dir().resolve(Layout.META_FILE);
            BusFiles.checkTrusted(p, allowForeign);
            // the archive's bus.meta: never replaced (the hot one is, when keys are added)
            lock = FileChannel.open(p, StandardOpenOption.READ, StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS);
        }
        Liveness.Hold h = Liveness.hold(lock, Layout.ARCHIVER_LOCK_BYTE);
        if (h == Liveness.Hold.UNKNOWN) {
            throw new IllegalStateException("mappedbus: the archiver of " + hot + " cannot take its lock (no JNI "
                    + "library, or a file system without OFD locks): nothing is archived by this writer");
        }
        holding = h == Liveness.Hold.TAKEN;
        if (holding) {
            completeMoves(hot, cfg, allowForeign);
        }
        return holding;
    }

    /** One look: returns the segments moved. */
    public long[] runOnce() throws IOException {
        if (!takeLock()) {
            return new long[0];
        }
        List<Long> ready = new ArrayList<>();
        HotView view = look();
        long[] due = due(view);
        Left left = Left.NONE;
        for (long k : due) {
            if (stop || ready.size() >= MOVE_BATCH) {
                left = Left.MORE;
                break;
            }
            boolean ok;
            try {
                // A segment copied ahead was settled then, and a full settled segment stays so (a decided slot is
                // never undecided): its scan is not made again (5 to 15 ms of a 16 MiB segment here).
                ok = copyMade(k)
                        || settled(segmentPath(hot, k), segmentSize, recordSize, frames) || settle(k);
            } catch (NoSuchFileException e) {
                continue;
            }
            if (!ok) {
                left = Left.UNSETTLED;
                break; // oldest first: a later segment waits for this one
            }
            ready.add(k);
        }
        long[] done = ready.stream().mapToLong(Long::longValue).toArray();
        if (done.length > 0) {
            Map<Long, Path> made = new LinkedHashMap<>();
            for (long k : done) {
                Path tmp = takeCopy(k); // a copy under way is waited for: quicker than copying again
                if (tmp != null && Files.exists(tmp, LinkOption.NOFOLLOW_LINKS)) {
                    made.put(k, tmp);
                }
            }
            try {
                moveSegments(hot, cfg, done, segmentSize, allowForeign, compressor, made);
            } catch (IOException | RuntimeException e) {
                for (Path p : made.values()) {
                    Files.deleteIfExists(p); // renamed already, or left: a copy again at the next move
                }
                throw e;
            }
            moved += done.length;
        }
        watch.saw(view, left);
        copyAhead(done.length > 0 ? look() : view, left == Left.NONE);
        if (hasArchiveRetention(cfg)) {
            archived.removed(applyArchiveRetention(cfg, meta, System.currentTimeMillis(),
                    archived.current(done, System.nanoTime())));
        }
        return done;
    }

    /**
     * The copies ahead ({@link #ahead}) in the hot directory {@code v}: those finished taken in (one whose segment was
     * not settled, or was gone, forgotten: looked at again); each dropped when its segment is gone or not a full hot
     * one any more (moved without it); when {@code make} and {@code archive_after >= 1}, and no copy is under way, one
     * more started in the copier thread: of the oldest full hot segment without one ({@link #copy} checks that it is
     * settled).
     */
    private void copyAhead(HotView v, boolean make) throws IOException {
        long[] full = Arrays.copyOf(v.segments(), v.full());
        boolean underWay = false;
        for (var it = ahead.entrySet().iterator(); it.hasNext();) {
            var e = it.next();
            CompletableFuture<Path> f = e.getValue();
            if (f.isDone()) {
                Path tmp;
                try {
                    tmp = copyResult(f, true);
                } catch (IOException | RuntimeException x) {
                    it.remove(); // reported once; copied again at a later look
                    throw x;
                }
                if (tmp == null) {
                    it.remove(); // not settled when looked at, or gone
                    continue;
                }
            } else {
                underWay = true;
            }
            if (Arrays.binarySearch(full, e.getKey()) < 0
                    || !Files.exists(segmentPath(hot, e.getKey()), LinkOption.NOFOLLOW_LINKS)) {
                discardCopy(f);
                it.remove();
            }
        }
        if (!make || cfg.after() < 1 || stop || underWay) {
            return;
        }
        long next = -1;
        for (long k : full) {
            if (!ahead.containsKey(k)) {
                next = k;
                break;
            }
        }
        if (next < 0) {
            return;
        }
        if (copier == null) {
            copier = Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "mappedbus-archiver-copy " + hot);
                t.setDaemon(true);
                return t;
            });
        }
        long index = next;
        ahead.put(index, CompletableFuture.supplyAsync(() -> {
            try {
                return copyAheadOf(index);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }, copier));
    }

    // The copier thread's copy ahead of segment `index`: its temporary file, fsynced; null if it is not settled or gone.
    private Path copyAheadOf(long index) throws IOException {
        Path src = segmentPath(hot, index);
        Path tmp;
        try {
            BusFiles.checkTrusted(src, allowForeign);
            tmp = copy(src, cfg, index, segmentSize, copyCompressor, m -> settled(m, src.toString(), segmentSize,
                    recordSize, frames));
            if (tmp == null) {
                return null; // settled at a later look (or by its move)
            }
            try {
                force(tmp);
            } catch (IOException | RuntimeException e) {
                Files.deleteIfExists(tmp);
                throw e;
            }
        } catch (NoSuchFileException e) {
            return null; // gone meanwhile
        }
        if (COPY_AHEAD_STALL.equals(STALL)) {
            System.err.println("stalled " + COPY_AHEAD_STALL);
            System.err.flush();
            for (;;) {
                LockSupport.parkNanos(3_600_000_000_000L);
            }
        }
        return tmp;
    }

    // Whether segment k's copy ahead is made (then k was settled, and stays so).
    private boolean copyMade(long k) throws IOException {
        CompletableFuture<Path> f = ahead.get(k);
        return f != null && f.isDone() && !f.isCompletedExceptionally() && f.getNow(null) != null;
    }

    // Segment k's copy ahead for its move (waiting for one under way), or null.
    private Path takeCopy(long k) throws IOException {
        CompletableFuture<Path> f = ahead.remove(k);
        return f == null ? null : copyResult(f, true);
    }

    // A copy ahead's temporary file (waiting for it), or null; its failure thrown when `raise`, else ignored.
    private static Path copyResult(CompletableFuture<Path> f, boolean raise) throws IOException {
        try {
            return f.join();
        } catch (java.util.concurrent.CompletionException | java.util.concurrent.CancellationException e) {
            if (!raise) {
                return null;
            }
            Throwable c = e.getCause() instanceof UncheckedIOException u ? u.getCause() : e.getCause();
            if (c instanceof IOException io) {
                throw io;
            }
            if (c instanceof RuntimeException r) {
                throw r;
            }
            throw new IOException("copy ahead failed", c);
        }
    }

    // Removes a copy ahead, now or once its copier is done with it.
    private static void discardCopy(CompletableFuture<Path> f) {
        f.whenComplete((tmp, e) -> {
            if (tmp != null) {
                deleteQuietly(tmp);
            }
        });
    }

    /** Removes the copies ahead (waiting for one under way) and ends the copier thread. */
    private void dropAhead() {
        for (CompletableFuture<Path> f : ahead.values()) {
            discardCopy(f);
            try {
                copyResult(f, false);
            } catch (IOException e) {
                // ignored: nothing to keep
            }
        }
        ahead.clear();
        if (copier != null) {
            copier.shutdown();
            try {
                copier.awaitTermination(1, TimeUnit.MINUTES);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            copier = null;
        }
    }

    private static void deleteQuietly(Path tmp) {
        try {
            Files.deleteIfExists(tmp);
        } catch (IOException e) {
            // left to the next archiver's completeMoves
        }
    }

    /** The hot segments due to move, oldest first (not yet checked to be settled). */
    public long[] candidates() throws IOException {
        return due(look());
    }

    /**
     * One listing of the hot directory: its segments (oldest first), how many of them are full (all but the current
     * one and a spare), and the current one (-1: none) with its limit.
     */
    record HotView(long[] segments, int full, long current, long currentLimit) { }

    private HotView look() throws IOException {
        long[] segs = hotSegments(hot);
        if (segs.length == 0) {
            return new HotView(segs, 0, -1, 0);
        }
        int current = segs.length - 1;
        long limit = limit(hot, segs[current]);
        // The newest may be a spare made ahead (limit 8): then the one before it is current, unless that one is full
        // (its writer is rolling to the spare; the same segments are due either way).
        if (limit <= Layout.FIRST_RECORD_OFFSET && current > 0) {
            long before = limit(hot, segs[current - 1]);
            if (before < end) {
                current--;
                limit = before;
            }
        }
        return new HotView(segs, current, segs[current], limit);
    }

    private long[] due(HotView v) throws IOException {
        long[] segs = v.segments();
        int full = v.full();
        if (full == 0) {
            return new long[0];
        }
        // archive_after full ones stay hot; one fewer once the current one is past the early fill, so that the oldest
        // moves while it fills and its roll leaves archive_after full ones beside the next (WHEN, layout.py).
        long keep = cfg.after() >= 1 && pastEarlyFill(v.currentLimit(), segmentSize) ? cfg.after() - 1 : cfg.after();
        int due = (int) Math.max(0, full - keep);
        if (cfg.ageMs() > 0) {
            long now = System.currentTimeMillis();
            while (due < full) {
                FileTime t;
                try {
                    t = Files.getLastModifiedTime(segmentPath(hot, segs[due]), LinkOption.NOFOLLOW_LINKS);
                } catch (NoSuchFileException e) {
                    due++;
                    continue;
                }
                if (now - t.toMillis() > cfg.ageMs()) {
                    due++;
                } else {
                    break;
                }
            }
        }
        return Arrays.copyOf(segs, due);
    }

    // Reads segment k as a reader does (rolling back, after the timeout, the slots of writers that are gone): true
    // once every slot is settled.
    private boolean settle(long k) throws IOException {
        if (settling != null && settlingIndex != k) {
            closeSettling();
        }
        if (settling == null) {
            settling = settlingReaders.open(segmentPath(hot, k), segmentSize, recordSize,
                    hot.resolve(Layout.WRITERS_FILE), Layout.joinPosition(k, 0, segmentSize));
            settling.setTimeout(timeoutMs);
            settlingIndex = k;
        }
        try {
            while (settling.next()) {
                // delivered: settled
            }
        } catch (EOFException e) {
            closeSettling();
            return settled(segmentPath(hot, k), segmentSize, recordSize, frames);
        }
        return false;
    }

    private void closeSettling() {
        if (settling != null) {
            settling.close();
            settling = null;
            settlingIndex = -1;
        }
    }

    // ---- the steps (static: the unit tests run them one by one) ----

    public static Path segmentPath(Path dir, long index) {
        return dir.resolve(Layout.segmentName(index));
    }

    public static long[] hotSegments(Path hot) throws IOException {
        List<Long> out = new ArrayList<>();
        try (DirectoryStream<Path> s = Files.newDirectoryStream(hot, "*" + Layout.SEGMENT_SUFFIX)) {
            for (Path p : s) {
                long i = Layout.segmentIndex(p.getFileName().toString());
                if (i >= 0) {
                    out.add(i);
                }
            }
        }
        return out.stream().mapToLong(Long::longValue).sorted().toArray();
    }

    private static long limit(Path hot, long k) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
        try (FileChannel ch = FileChannel.open(segmentPath(hot, k), StandardOpenOption.READ,
                LinkOption.NOFOLLOW_LINKS)) {
            ch.read(b, Layout.LIMIT_OFFSET);
        } catch (NoSuchFileException e) {
            return 0;
        }
        return b.getLong(0);
    }

    /**
     * Whether a segment is full and every slot of it committed or rolled back (its limit and status words, read-only).
     */
    public static boolean settled(Path path, long segmentSize, int recordSize) throws IOException {
        return settled(path, segmentSize, recordSize, false);
    }

    /**
     * Whether a segment is full and every slot of it committed or rolled back; in a framed bus ({@code frames}), every
     * frame's first slot, stepping over its continuation slots (payload, whose first bytes are no status).
     */
    public static boolean settled(Path path, long segmentSize, int recordSize, boolean frames) throws IOException {
        long end = RollingLayout.endBoundary(segmentSize, recordSize);
        long slot = Layout.slotSize(recordSize);
        try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS)) {
            if (ch.size() < end) {
                return false;
            }
            MappedByteBuffer m = ch.map(FileChannel.MapMode.READ_ONLY, 0, end);
            try {
                return settled(m, path.toString(), segmentSize, recordSize, frames);
            } finally {
                UnsafeAccess.unmap(m);
            }
        }
    }

    // The same of a segment mapped in `m` (at least its record grid) from offset 0; an acquire fence once it is settled,
    // so that what the caller reads of the records next is what was committed (the writers' statuses are release
    // stores).
    private static boolean settled(ByteBuffer m, String path, long segmentSize, int recordSize, boolean frames)
            throws CorruptBusException {
        long end = RollingLayout.endBoundary(segmentSize, recordSize);
        long slot = Layout.slotSize(recordSize);
        m.order(ByteOrder.LITTLE_ENDIAN);
        if (m.limit() < end || m.getLong(Layout.LIMIT_OFFSET) < end) {
            return false;
        }
        boolean ok = frames ? everyFrameDecided(m, path, end, slot) : everySlotDecided(m, end, slot);
        VarHandle.acquireFence();
        return ok;
    }

    // No slot of [8, end) has the status NOT_SET (the segment's bytes in `m`, little-endian).
    private static boolean everySlotDecided(ByteBuffer m, long end, long slot) {
        for (long p = Layout.FIRST_RECORD_OFFSET; p + slot <= end; p += slot) {
            if (m.getInt((int) p) == Layout.STATUS_NOT_SET) {
                return false;
            }
        }
        return true;
    }

    // The same in a framed bus: each frame's first slot decided, stepped over by its slot count (a continuation slot
    // holds payload, never a status): committed, a frame that fits (Frames.committedSlots); rolled back or padding,
    // Frames.skipSlots (a count of 0 steps one, as readers do); any other status is a corrupt segment, not archived
    // (Python's frames_settled).
    private static boolean everyFrameDecided(ByteBuffer m, String path, long end, long slot) throws CorruptBusException {
        long p = Layout.FIRST_RECORD_OFFSET;
        while (p + slot <= end) {
            int status = m.getInt((int) p);
            int frameMeta = m.getInt((int) p + Layout.METADATA_OFFSET);
            if (status == Layout.STATUS_NOT_SET) {
                return false;
            } else if (status == Layout.STATUS_COMMITTED) {
                long length = m.getLong((int) (p + Layout.PAYLOAD_OFFSET + Layout.FRAME_LENGTH_OFFSET));
                p += Frames.committedSlots(path, p, frameMeta, length, end, slot) * slot;
            } else if (status == Layout.STATUS_ROLLED_BACK) {
                p += Frames.skipSlots(frameMeta) * slot;
            } else {
                throw new CorruptBusException("framed message at position " + p + " in " + path + " has status "
                        + status + " (0, 1 or 2 expected): a corrupt segment, not archived");
            }
        }
        return true;
    }

    /** Slots the warm-up scans: enough for the JIT to compile the scan (one 1 MiB segment of 24-byte slots). */
    private static final long WARM_SLOTS = 50_000;
    /** The most bytes the warm-up compresses and scans at a time. */
    private static final int WARM_BYTES = 1 << 18;

    /**
     * Before the first look, on the archiver's own thread: loads the compression library and makes its context, and
     * has the JIT compile the settled scan and the compressor's path, on a buffer of this process (so the first
     * segments a writer fills do not wait for class loading and interpreted scans: 150 ms for the first move, 25 ms for
     * the next ones, without it). A few ms of this thread's time once loaded, once per archiver; nothing on the write
     * path.
     */
    private void warmUp() {
        long slot = Layout.slotSize(recordSize);
        int size = (int) Math.min(Layout.mappedSize(segmentSize), WARM_BYTES);
        ByteBuffer b = ByteBuffer.allocateDirect(size).order(ByteOrder.LITTLE_ENDIAN);
        try {
            long end = Math.min(this.end, size);
            for (long p = Layout.FIRST_RECORD_OFFSET; p + slot <= end; p += slot) {
                b.putInt((int) p, Layout.STATUS_COMMITTED);
                if (p + 16 <= end) {
                    b.putLong((int) p + 8, p * 31);
                }
            }
            long slots = Math.max(1, (end - Layout.FIRST_RECORD_OFFSET) / slot);
            for (long n = 0; n < WARM_SLOTS && !stop; n += slots) {
                everySlotDecided(b, end, slot);
            }
            if (cfg.compress() != ArchiveFiles.Compression.NONE) {
                compressor.compress(b, cfg.compress(), DISCARD, hot);
            }
        } catch (IOException | RuntimeException e) {
            // a library missing: the first move reports it
        } finally {
            UnsafeAccess.unmap(b);
        }
    }

    // Where the warm-up's compressed bytes go.
    private static final WritableByteChannel DISCARD = new WritableByteChannel() {
        @Override
        public int write(ByteBuffer src) {
            int n = src.remaining();
            src.position(src.limit());
            return n;
        }

        @Override
        public boolean isOpen() {
            return true;
        }

        @Override
        public void close() {
        }
    };

    private static void stall(MoveState state) {
        if (state.name().equals(STALL)) {
            System.err.println("stalled " + state.name());
            System.err.flush();
            for (;;) {
                LockSupport.parkNanos(3_600_000_000_000L);
            }
        }
    }

    private static Path tmpPath(Path dir, String name) {
        return dir.resolve(Layout.TMP_PREFIX + name + "-" + ProcessHandle.current().pid() + "-"
                + Integer.toHexString(RANDOM.nextInt() | 0x10000000));
    }

    private static byte[] readAll(Path p, boolean allowForeign) throws IOException {
        BusFiles.checkTrusted(p, allowForeign);
        try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS)) {
            return Channels.newInputStream(ch).readAllBytes();
        }
    }

    private static FileChannel create(Path tmp) throws IOException {
        return FileChannel.open(tmp, java.util.Set.of(StandardOpenOption.WRITE, StandardOpenOption.CREATE_NEW,
                LinkOption.NOFOLLOW_LINKS), PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString(
                FILE_PERMS)));
    }

    private static Path writeTmp(Path dir, String name, byte[] data, boolean sync) throws IOException {
        Path tmp = tmpPath(dir, name);
        try (FileChannel ch = create(tmp)) {
            ByteBuffer b = ByteBuffer.wrap(data);
            while (b.hasRemaining()) {
                ch.write(b);
            }
            if (sync) {
                ch.force(true);
            }
        } catch (IOException | RuntimeException e) {
            Files.deleteIfExists(tmp);
            throw e;
        }
        return tmp;
    }

    private static void rename(Path from, Path to) throws IOException {
        Files.move(from, to, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    }

    /**
     * Moves settled segments from {@code hot} into the archive together, through the states of {@link MoveState} in
     * order (the caller holds the archiver's lock and checked {@link #settled}): Python's {@code move_segments}.
     */
    public static void moveSegments(Path hot, ArchiveFiles.Config cfg, long[] indices, long segmentSize,
                             boolean allowForeign) throws IOException {
        try (ArchiveCompressor c = new ArchiveCompressor()) {
            moveSegments(hot, cfg, indices, segmentSize, allowForeign, c, Map.of());
        }
    }

    // `made`: the copies made ahead (fsynced temporary files of the archive) of some of `indices`; the others are
    // copied here.
    private static void moveSegments(Path hot, ArchiveFiles.Config cfg, long[] indices, long segmentSize,
                             boolean allowForeign, ArchiveCompressor compressor, Map<Long, Path> made)
            throws IOException {
        Path aix = cfg.dir().resolve(Layout.TIME_INDEX_DIR);
        stall(MoveState.MOVE_SETTLED);
        Map<Long, byte[]> indexBytes = new LinkedHashMap<>();
        Map<Long, Path> copies = new LinkedHashMap<>();
        List<Path> toForce = new ArrayList<>();
        for (long index : indices) {
            Path hix = TimeIndex.path(hot, index);
            byte[] ix;
            try {
                ix = readAll(hix, allowForeign);
            } catch (NoSuchFileException e) {
                ix = null;
            }
            if (ix != null) {
                Files.createDirectories(aix);
                rename(writeTmp(aix, TimeIndex.name(index), ix, false), aix.resolve(TimeIndex.name(index)));
            }
            indexBytes.put(index, ix);
            stall(MoveState.MOVE_INDEX);
            Path tmp = made.get(index);
            if (tmp == null) {
                Path src = segmentPath(hot, index);
                BusFiles.checkTrusted(src, allowForeign);
                tmp = copy(src, cfg, index, segmentSize, compressor);
                toForce.add(tmp);
            }
            copies.put(index, tmp);
        }
        forceAll(toForce);
        stall(MoveState.MOVE_COPIED);
        for (Map.Entry<Long, Path> c : copies.entrySet()) {
            rename(c.getValue(), cfg.dir().resolve(ArchiveFiles.name(c.getKey(), cfg.compress())));
        }
        WriterSync.forceDir(aix);
        WriterSync.forceDir(cfg.dir());
        stall(MoveState.MOVE_RENAMED);
        for (Map.Entry<Long, byte[]> e : indexBytes.entrySet()) {
            long index = e.getKey();
            Files.deleteIfExists(segmentPath(hot, index));
            // A writer's entries appended after the copy (it appends after its commit): its hot index read after its
            // unlink, and merged into the archive's.
            mergeHotIndex(hot, cfg, index, e.getValue(), allowForeign);
        }
        WriterSync.forceDir(hot);
        WriterSync.forceDir(hot.resolve(Layout.TIME_INDEX_DIR));
        stall(MoveState.MOVE_UNLINKED);
    }

    /** A look at a segment's mapping before it is copied: whether to copy it ({@link #settled}). */
    @FunctionalInterface
    private interface CopyCheck {
        boolean accepts(ByteBuffer segment) throws IOException;
    }

    // The segment's copy (compressed or not) in a temporary file of the archive, fsynced, with the hot file's times.
    private static Path copy(Path src, ArchiveFiles.Config cfg, long index, long segmentSize,
            ArchiveCompressor compressor) throws IOException {
        return copy(src, cfg, index, segmentSize, compressor, null);
    }

    // The same, once `check` accepts the segment's mapping (null: not copied, nothing made); a compressed copy reads
    // the records through that same mapping (its pages faulted in once, by the check).
    private static Path copy(Path src, ArchiveFiles.Config cfg, long index, long segmentSize,
            ArchiveCompressor compressor, CopyCheck check) throws IOException {
        long size = Layout.mappedSize(segmentSize);
        BasicFileAttributes st = Files.readAttributes(src, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        if (st.size() != size) {
            throw new IOException(src + " is " + st.size() + " bytes, not " + size + ": not archived");
        }
        boolean compressed = cfg.compress() != ArchiveFiles.Compression.NONE;
        if (compressed && size > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("segments of " + size + " bytes cannot be compressed (at most "
                    + Integer.MAX_VALUE + "): archive such a bus uncompressed");
        }
        try (FileChannel in = FileChannel.open(src, StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS)) {
            MappedByteBuffer m = null;
            try {
                if (compressed || check != null) {
                    m = in.map(FileChannel.MapMode.READ_ONLY, 0, compressed ? size : Math.min(size, Integer.MAX_VALUE));
                    if (check != null && !check.accepts(m)) {
                        return null;
                    }
                }
                return copyTo(in, m, src, st, cfg, index, size, compressor);
            } finally {
                if (m != null) {
                    UnsafeAccess.unmap(m);
                }
            }
        }
    }

    // copy's temporary file, from `in` (`m`: its mapping, for a compressed copy).
    private static Path copyTo(FileChannel in, MappedByteBuffer m, Path src, BasicFileAttributes st,
            ArchiveFiles.Config cfg, long index, long size, ArchiveCompressor compressor) throws IOException {
        Path tmp = tmpPath(cfg.dir(), ArchiveFiles.name(index, cfg.compress()));
        try (FileChannel out = create(tmp)) {
            switch (cfg.compress()) {
                case NONE -> {
                    long done = 0;
                    while (done < size) {
                        long n = in.transferTo(done, size - done, out);
                        if (n <= 0) {
                            throw new IOException(src + " ended at " + done + " of " + size + " bytes while copied");
                        }
                        done += n;
                    }
                }
                case ZSTD, LZ4 -> compressor.compress(m, cfg.compress(), out, src);
                default -> throw new IllegalStateException(cfg.compress().toString());
            }
            // its mtime stays when it filled (retention ages it by that; seek_time bounds it by it)
            Files.getFileAttributeView(tmp, BasicFileAttributeView.class, LinkOption.NOFOLLOW_LINKS)
                    .setTimes(st.lastModifiedTime(), st.lastAccessTime(), null);
        } catch (IOException | RuntimeException e) {
            Files.deleteIfExists(tmp);
            throw e;
        }
        return tmp; // not yet fsynced: forceAll
    }

    /** Threads that fsync a batch's copies together (daemon; they end after a few idle seconds). */
    private static final java.util.concurrent.ThreadPoolExecutor FORCERS;

    static {
        FORCERS = new java.util.concurrent.ThreadPoolExecutor(MOVE_BATCH, MOVE_BATCH, 5, TimeUnit.SECONDS,
                new java.util.concurrent.LinkedBlockingQueue<>(), r -> {
                    Thread t = new Thread(r, "mappedbus-archiver-fsync");
                    t.setDaemon(true);
                    return t;
                });
        FORCERS.allowCoreThreadTimeOut(true);
    }

    /**
     * Fsyncs the copies of a batch (MOVE_COPIED for all of them once it returns), at the same time when there are
     * several: the file system commits them together (8 copies fsynced one after another took 26 to 56 ms on the
     * development disk, together 3 to 17 ms). On a failure every copy is removed and the first error thrown.
     */
    private static void forceAll(java.util.Collection<Path> copies) throws IOException {
        List<java.util.concurrent.Future<?>> running = new ArrayList<>();
        Throwable failed = null;
        try {
            if (copies.size() == 1) {
                force(copies.iterator().next());
            } else {
                for (Path c : copies) {
                    running.add(FORCERS.submit(() -> {
                        force(c);
                        return null;
                    }));
                }
            }
        } catch (IOException | RuntimeException e) {
            failed = e;
        }
        for (java.util.concurrent.Future<?> f : running) {
            try {
                f.get();
            } catch (java.util.concurrent.ExecutionException e) {
                failed = failed != null ? failed : e.getCause();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                failed = failed != null ? failed : new java.io.InterruptedIOException("archiver interrupted");
            }
        }
        if (failed != null) {
            for (Path c : copies) {
                Files.deleteIfExists(c);
            }
            if (failed instanceof IOException e) {
                throw e;
            }
            if (failed instanceof RuntimeException e) {
                throw e;
            }
            throw new IOException(failed);
        }
    }

    private static void force(Path p) throws IOException {
        try (FileChannel ch = FileChannel.open(p, StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS)) {
            ch.force(true);
        }
    }

    /**
     * Segment {@code index}'s hot time index (moved, or being moved: its segment archived) taken out of the hot
     * directory: unlinked, then read through a channel opened before, and any entry of it the archive's index lacks
     * appended there (a temporary file, forced, renamed, the directory forced; {@code copied}: the bytes the move
     * copied, when nothing can be new). So a writer's append racing the unlink is read here (before it) or appended
     * again by path by the writer (after it: {@link TimeIndex.Appender#append}), never lost; a kill between the unlink
     * and the merge loses the entries appended since the copy (docs/design/journal.md, "late entries"). Python's
     * {@code _merge_hot_index}.
     */
    private static void mergeHotIndex(Path hot, ArchiveFiles.Config cfg, long index, byte[] copied,
            boolean allowForeign) throws IOException {
        Path hix = TimeIndex.path(hot, index);
        byte[] late;
        try (FileChannel ch = FileChannel.open(hix, StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS)) {
            BusFiles.checkTrusted(hix, allowForeign);
            Files.deleteIfExists(hix);
            late = Channels.newInputStream(ch).readAllBytes();
        } catch (NoSuchFileException e) {
            return;
        }
        if (copied != null && Arrays.equals(late, copied)) {
            return;
        }
        Path aixDir = cfg.dir().resolve(Layout.TIME_INDEX_DIR);
        Path aix = aixDir.resolve(TimeIndex.name(index));
        byte[] have;
        try {
            have = readAll(aix, allowForeign);
        } catch (NoSuchFileException e) {
            have = null;
        }
        byte[] merged = mergedIndex(have, late);
        if (merged == null) {
            return;
        }
        Files.createDirectories(aixDir);
        rename(writeTmp(aixDir, TimeIndex.name(index), merged, true), aix);
        WriterSync.forceDir(aixDir);
    }

    // An index file's bytes holding every entry of `have` (the archive's, or null) and of `late` (a hot one of the same
    // segment), or null when `have` holds them all already (or `late` is not an index of the same header: left out).
    // Whole entries only. Python's _merged_index.
    static byte[] mergedIndex(byte[] have, byte[] late) {
        int head = Layout.TIME_INDEX_ENTRIES_OFFSET;
        int size = Layout.TIME_INDEX_ENTRY_SIZE;
        if (late.length < head || (have != null && (have.length < head
                || !Arrays.equals(have, 0, head, late, 0, head)))) {
            return null;
        }
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        out.write(late, 0, head);
        java.util.Set<java.nio.ByteBuffer> known = new java.util.HashSet<>();
        if (have != null) {
            for (int i = head; i + size <= have.length; i += size) {
                known.add(java.nio.ByteBuffer.wrap(have, i, size).slice());
                out.write(have, i, size);
            }
        }
        boolean added = false;
        for (int i = head; i + size <= late.length; i += size) {
            java.nio.ByteBuffer e = java.nio.ByteBuffer.wrap(late, i, size).slice();
            boolean zero = true;
            for (int j = i; j < i + size && zero; j++) {
                zero = late[j] == 0;
            }
            if (!zero && known.add(e)) {
                out.write(late, i, size);
                added = true;
            }
        }
        return have != null && !added ? null : out.toByteArray();
    }

    /**
     * What a killed archiver left (the caller holds the archiver's lock): temporary files removed; a segment in both
     * tiers (MOVE_RENAMED) removed from the hot one; a hot index whose segment is archived (a killed move's, or one a
     * writer's late append made again) merged into the archive's and removed. Python's {@code complete_moves}.
     *
     * @return the segments it completed
     */
    public static long[] completeMoves(Path hot, ArchiveFiles.Config cfg) throws IOException {
        return completeMoves(hot, cfg, false);
    }

    /**
     * {@link #completeMoves(Path, ArchiveFiles.Config)}, with files of another user accepted or not.
     *
     * @return the segments it completed
     */
    public static long[] completeMoves(Path hot, ArchiveFiles.Config cfg, boolean allowForeign) throws IOException {
        for (Path d : new Path[] {cfg.dir(), cfg.dir().resolve(Layout.TIME_INDEX_DIR)}) {
            try (DirectoryStream<Path> s = Files.newDirectoryStream(d, Layout.TMP_PREFIX + "*")) {
                for (Path p : s) {
                    Files.deleteIfExists(p);
                }
            } catch (NoSuchFileException e) {
                // no such directory yet
            }
        }
        TreeMap<Long, ArchiveFiles.Archived> archived = ArchiveFiles.list(cfg.dir());
        List<Long> done = new ArrayList<>();
        for (long k : hotSegments(hot)) {
            if (archived.containsKey(k)) {
                Files.deleteIfExists(segmentPath(hot, k));
                done.add(k);
            }
        }
        Path hix = hot.resolve(Layout.TIME_INDEX_DIR);
        List<Long> merge = new ArrayList<>();
        try (DirectoryStream<Path> s = Files.newDirectoryStream(hix, "*" + Layout.TIME_INDEX_SUFFIX)) {
            for (Path p : s) {
                String n = p.getFileName().toString();
                String digits = n.substring(0, n.length() - Layout.TIME_INDEX_SUFFIX.length());
                long k = Layout.segmentIndex(digits + Layout.SEGMENT_SUFFIX);
                if (k >= 0 && archived.containsKey(k) && !Files.exists(segmentPath(hot, k), LinkOption.NOFOLLOW_LINKS)) {
                    merge.add(k);
                }
            }
        } catch (NoSuchFileException e) {
            // no hot index directory
        }
        for (long k : merge) {
            mergeHotIndex(hot, cfg, k, null, allowForeign);
        }
        if (!done.isEmpty()) {
            WriterSync.forceDir(hot);
        }
        if (!merge.isEmpty()) {
            WriterSync.forceDir(hix);
        }
        return done.stream().mapToLong(Long::longValue).toArray();
    }

    /** Whether the archive {@code cfg} has a retention of its own (any {@code archive_retain_*}). */
    public static boolean hasArchiveRetention(ArchiveFiles.Config cfg) {
        return cfg.retainSegments() != 0 || cfg.retainBytes() != 0 || cfg.retainAgeMs() != 0;
    }

    /**
     * The archive's own retention ({@code archive_retain_*}): the oldest archived segments beyond it removed, with their
     * indices (the same plan as the hot tier's, over the archived segments, none held back as "current").
     *
     * @return the removed segments
     */
    public static long[] applyArchiveRetention(ArchiveFiles.Config cfg, BusMeta meta, long nowMs) throws IOException {
        if (!hasArchiveRetention(cfg)) {
            return new long[0];
        }
        return applyArchiveRetention(cfg, meta, nowMs, ArchiveFiles.list(cfg.dir()));
    }

    /**
     * {@link #applyArchiveRetention(ArchiveFiles.Config, BusMeta, long)} to the archive as the caller knows it (an
     * archiver's {@link ArchiveListing}) instead of a listing made now.
     *
     * @param archived the archived segments by index
     * @return the removed segments
     */
    public static long[] applyArchiveRetention(ArchiveFiles.Config cfg, BusMeta meta, long nowMs,
            TreeMap<Long, ArchiveFiles.Archived> archived) throws IOException {
        if (!hasArchiveRetention(cfg) || archived.isEmpty()) {
            return new long[0];
        }
        long[] segs = archived.keySet().stream().mapToLong(Long::longValue).toArray();
        BusMeta view = BusMeta.rolling(meta.recordSize(), meta.segmentSize(),
                new Retention(cfg.retainSegments(), cfg.retainBytes(), cfg.retainAgeMs()));
        long past = segs[segs.length - 1] + 1;
        long[] plan;
        try {
            plan = RollingLayout.retentionPlan(segs, view, past, past, nowMs, i -> {
                try {
                    return Files.getLastModifiedTime(archived.get(i).path(), LinkOption.NOFOLLOW_LINKS).toMillis();
                } catch (NoSuchFileException e) {
                    return null;
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            }, RollingLayout.NO_HOLD);
        } catch (UncheckedIOException e) {
            throw e.getCause();
        }
        for (long i : plan) {
            Files.deleteIfExists(archived.get(i).path());
            Files.deleteIfExists(cfg.dir().resolve(Layout.TIME_INDEX_DIR).resolve(TimeIndex.name(i)));
        }
        if (plan.length > 0) {
            WriterSync.forceDir(cfg.dir());
        }
        return plan;
    }

    /**
     * Makes the archive directory (0700, with its index directory) and its bus.meta (a copy of the hot one) if absent;
     * Python's {@code prepare_archive}.
     *
     * @throws BusMismatchException if it holds another bus's
     */
    public static void prepareArchive(Path hot, BusMeta meta, ArchiveFiles.Config cfg, boolean allowForeign)
            throws IOException {
        java.nio.file.attribute.FileAttribute<?> dirPerms = PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwx------"));
        try {
            Files.createDirectory(cfg.dir(), dirPerms);
        } catch (FileAlreadyExistsException e) {
            // there already
        }
        BusFiles.checkTrustedDirectory(cfg.dir(), allowForeign);
        try {
            Files.createDirectory(cfg.dir().resolve(Layout.TIME_INDEX_DIR), dirPerms);
        } catch (FileAlreadyExistsException e) {
            // there already
        }
        Path apath = cfg.dir().resolve(Layout.META_FILE);
        BusMeta theirs = BusMeta.read(apath, allowForeign);
        if (theirs == null) {
            meta.write(apath, FILE_PERMS, true);
            WriterSync.forceDir(cfg.dir());
            theirs = BusMeta.read(apath, allowForeign);
        }
        if (theirs == null || !theirs.id().equals(meta.id())) {
            throw new BusMismatchException(cfg.dir() + " is the archive of bus " + (theirs == null ? "?" : theirs.id())
                    + ", not of bus " + meta.id() + " (" + hot + "): one archive directory per bus");
        }
    }

    /**
     * The compression of archived segments (a class of its own: the libraries are loaded only when compressing): zstd
     * in zstd's seekable format (frames of {@link Layout#ARCHIVE_ZSTD_FRAME_BYTES} and their {@link ZstdSeekTable}),
     * LZ4 as one frame. One per archiver, on its thread: the zstd context, the output buffer and the lz4 staging array
     * are kept from move to move (a new zstd context per segment costs its tables; a new direct buffer, an allocation
     * and an unmap).
     */
    public static final class ArchiveCompressor implements AutoCloseable {
        // lz4 frames of 64 KiB blocks (lz4.frame's default, as Python's archiver writes them): each block's input and
        // hash table stay in cache, faster than one block of the whole segment.
        private static final int LZ4_BLOCK = 1 << 16;
        private Object zstdCtx;        // com.github.luben.zstd.ZstdCompressCtx, made at the first zstd segment
        private ByteBuffer zstdOut;    // direct: the compressBound of each frame of the segment, and its seek table
        private byte[] lz4Chunk;

        private ArchiveCompressor() {
        }

        void compress(ByteBuffer src, ArchiveFiles.Compression how, WritableByteChannel out, Path path)
                throws IOException {
            try {
                switch (how) {
                    case ZSTD -> zstd(src, out);
                    case LZ4 -> lz4(src, out);
                    default -> throw new IllegalArgumentException("not compressed: " + how);
                }
            } catch (NoClassDefFoundError | UnsatisfiedLinkError e) {
                throw new IllegalStateException("mappedbus: archiving " + path + " as " + how.text() + " needs "
                        + (how == ArchiveFiles.Compression.ZSTD ? "zstd-jni (Debian: libzstd-jni-java)"
                        : "lz4-java (Debian: liblz4-java)") + " on the class path (interop/codec-libs.sh): " + e, e);
            }
        }

        // zstd's seekable format (layout.py, "ZSTD SEEKABLE"): a frame per ARCHIVE_ZSTD_FRAME_BYTES of the segment (the
        // last the rest), each with its content size in its header (ZSTD_compress2's one-shot frame), direct to direct,
        // then their seek table, the whole file written from one buffer.
        private void zstd(ByteBuffer src, WritableByteChannel out) throws IOException {
            com.github.luben.zstd.ZstdCompressCtx ctx = (com.github.luben.zstd.ZstdCompressCtx) zstdCtx;
            if (ctx == null) {
                ArchiveFiles.codecReady(ArchiveFiles.Compression.ZSTD); // zstd-jni's JNI library, as the readers
                ctx = new com.github.luben.zstd.ZstdCompressCtx();
                ctx.setLevel(Layout.ARCHIVE_ZSTD_LEVEL);
                ctx.setContentSize(true);
                ctx.setChecksum(true); // each frame's content checksum (layout.py, "ZSTD SEEKABLE")
                zstdCtx = ctx;
            }
            int n = src.remaining();
            int piece = Layout.ARCHIVE_ZSTD_FRAME_BYTES;
            int frames = Math.max(1, (int) (((long) n + piece - 1) / piece));
            long bound = ZstdSeekTable.encodedSize(frames);
            for (int i = 0; i < frames; i++) {
                bound += com.github.luben.zstd.Zstd.compressBound(Math.min(piece, n - (long) i * piece));
            }
            if (bound > Integer.MAX_VALUE) {
                throw new IllegalArgumentException("a segment of " + n + " bytes compresses into at most " + bound
                        + " bytes, more than a buffer holds: archive such a bus uncompressed");
            }
            if (zstdOut == null || zstdOut.capacity() < bound) {
                if (zstdOut != null) {
                    UnsafeAccess.unmap(zstdOut);
                    zstdOut = null;
                }
                zstdOut = ByteBuffer.allocateDirect((int) bound);
            }
            ByteBuffer dst = zstdOut;
            dst.clear();
            ZstdSeekTable.Builder table = new ZstdSeekTable.Builder();
            ByteBuffer s = src.duplicate();
            int from = src.position();
            for (int i = 0; i < frames; i++) {
                int len = Math.min(piece, n - i * piece);
                s.limit(from + i * piece + len).position(from + i * piece);
                int made;
                try {
                    made = ctx.compress(dst, s); // throws ZstdException on an error
                } catch (com.github.luben.zstd.ZstdException e) {
                    throw new IOException("zstd: " + e.getMessage(), e);
                }
                table.add(made, len);
            }
            table.build().write(dst);
            dst.flip();
            while (dst.hasRemaining()) {
                out.write(dst);
            }
        }

        // One LZ4 frame: independent blocks (lz4-java reads no linked ones), the content size in its header.
        private void lz4(ByteBuffer src, WritableByteChannel out) throws IOException {
            OutputStream os = Channels.newOutputStream(out);
            net.jpountz.lz4.LZ4FrameOutputStream z = new net.jpountz.lz4.LZ4FrameOutputStream(
                    new java.io.BufferedOutputStream(new NonClosing(os), 1 << 16),
                    net.jpountz.lz4.LZ4FrameOutputStream.BLOCKSIZE.SIZE_64KB, src.remaining(),
                    net.jpountz.lz4.LZ4FrameOutputStream.FLG.Bits.BLOCK_INDEPENDENCE,
                    net.jpountz.lz4.LZ4FrameOutputStream.FLG.Bits.CONTENT_SIZE);
            if (lz4Chunk == null) {
                lz4Chunk = new byte[LZ4_BLOCK];
            }
            byte[] chunk = lz4Chunk;
            ByteBuffer s = src.duplicate();
            while (s.hasRemaining()) {
                int n = Math.min(chunk.length, s.remaining());
                s.get(chunk, 0, n);
                z.write(chunk, 0, n);
            }
            z.close(); // the end mark, flushed to `out` (left open)
        }

        /** Frees the zstd context and the output buffer. */
        @Override
        public void close() {
            if (zstdCtx != null) {
                ((com.github.luben.zstd.ZstdCompressCtx) zstdCtx).close();
                zstdCtx = null;
            }
            if (zstdOut != null) {
                UnsafeAccess.unmap(zstdOut);
                zstdOut = null;
            }
        }
    }

    private static final class NonClosing extends java.io.FilterOutputStream {
        NonClosing(OutputStream out) {
            super(out);
        }

        @Override
        public void write(byte[] b, int off, int len) throws IOException {
            out.write(b, off, len);
        }

        @Override
        public void close() throws IOException {
            flush();
        }
    }
}
