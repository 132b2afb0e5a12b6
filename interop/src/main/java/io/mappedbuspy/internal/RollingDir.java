package io.mappedbuspy.internal;

import io.mappedbuspy.*;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.DirectoryStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.NotDirectoryException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.util.Arrays;
import java.util.Set;
import io.mappedbuspy.BusGapException;
import io.mappedbuspy.BusKind;
import io.mappedbuspy.BusMismatchException;
import io.mappedbuspy.BusReplacedException;
import io.mappedbuspy.ConsumerPolicy;
import io.mappedbuspy.Layout;
import io.mappedbuspy.MappedBusWriter;
import io.mappedbuspy.Retention;
import io.mappedbuspy.RollingBusReader;
import io.mappedbuspy.RollingBusWriter;
import io.mappedbuspy.UnsafeBusFileException;

/**
 * The directory of a rolling bus (docs/files-and-rolling.md, "Rolling bus"): the checked directory and its
 * {@code bus.meta}, the segments present, a segment's file and limit. The arithmetic and decisions on positions are
 * {@link RollingLayout}'s.
 *
 * <p>Public, for what reads a rolling bus without a {@link RollingBusReader} (the Spark connector): {@link #open},
 * {@link #meta()}, {@link #segments()}, {@link #segmentPath}, {@link #limitOf}, {@link #chooseCurrent()}. The rest
 * (segment creation, complete and then linked into place; retention) is {@link RollingBusWriter}'s, and
 * package-private. Each call reads the directory anew; one from {@link #open} holds no file open.
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
 */
public final class RollingDir {
    private static final SecureRandom RANDOM = new SecureRandom();
    private static final String DIR_PERMS = "rwx------";
    private static final String FILE_PERMS = "rw-------";
    /** A temporary file older than this is a dead creator's, removed by the next segment creator. */
    static final long STALE_TMP_MS = 60_000;

    public final Path dir;
    public final long segmentSize;
    public final int recordSize;
    final boolean allowForeign;
    public final BusMeta meta;
    // The archive's settings (null: none), read from meta at the first archive().
    private ArchiveFiles.Config archiveConfig;
    private boolean archiveRead;
    // Retention that holds consumers (max_consumer_lag > 0), made at its first use.
    private ConsumerRetention consumers;

    private RollingDir(Path dir, long segmentSize, int recordSize, boolean allowForeign, BusMeta meta) {
        this.dir = dir;
        this.segmentSize = segmentSize;
        this.recordSize = recordSize;
        this.allowForeign = allowForeign;
        this.meta = meta;
    }

    /**
     * Opens a rolling bus for writing: makes the directory and {@code bus.meta} if absent, checks them
     * otherwise, and makes segment 0 if there is no segment yet.
     */
    public static RollingDir forWriter(String dir, long segmentSize, int recordSize, Retention retention,
                                boolean allowForeign) throws IOException {
        return forWriter(dir, segmentSize, recordSize, retention, null, allowForeign);
    }

    /**
     * As {@link #forWriter(String, long, int, Retention, boolean)}, with the consumer policy of a bus this call
     * creates, or null for none given; on an existing bus, one given must equal the bus's.
     */
    public static RollingDir forWriter(String dir, long segmentSize, int recordSize, Retention retention,
                                ConsumerPolicy policy, boolean allowForeign) throws IOException {
        return forWriter(dir, segmentSize, recordSize, retention, policy, allowForeign, false);
    }

    /** As above; {@code frames}: a framed bus (made with frames=1 in its bus.meta, or checked to have it). */
    public static RollingDir forWriter(String dir, long segmentSize, int recordSize, Retention retention,
                                ConsumerPolicy policy, boolean allowForeign, boolean frames) throws IOException {
        MappedBusWriter.checkSizes(segmentSize, recordSize);
        Path d = Path.of(dir);
        boolean made = false;
        try {
            Files.createDirectory(d, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString(DIR_PERMS)));
            Files.setPosixFilePermissions(d, PosixFilePermissions.fromString(DIR_PERMS)); // whatever the umask
            made = true;
        } catch (FileAlreadyExistsException e) {
            // an existing directory: checked below
        }
        boolean madeMeta = false;
        try {
            checkDir(d, allowForeign);
            Path metaPath = d.resolve(Layout.META_FILE);
            BusMeta m = BusMeta.read(metaPath, allowForeign);
            if (m == null) {
                BusMeta mine = BusMeta.rolling(recordSize, segmentSize, retention,
                        policy == null ? ConsumerPolicy.DEFAULT : policy).withFrames(frames);
                madeMeta = mine.write(metaPath, FILE_PERMS, true);
                // The loser of a creation race reads the winner's and checks it like any existing bus.
                m = madeMeta ? mine : BusMeta.read(metaPath, allowForeign);
                if (m == null) {
                    throw new NoSuchFileException(metaPath.toString(), null,
                            "bus.meta vanished while the rolling bus was being created");
                }
            }
            checkMeta(m, metaPath, recordSize, segmentSize);
            m.checkFrames(frames, dir);
            if (!madeMeta && retention.removesAny() && !retention.equals(m.retention())) {
                throw new IllegalArgumentException(dir + " was created with retention " + m.retention()
                        + ", not " + retention + ": retention is fixed when a rolling bus is created"
                        + " (pass 0s to accept it)");
            }
            if (!madeMeta && policy != null && !policy.equals(m.consumerPolicy())) {
                ConsumerPolicy p = policy;
                throw new IllegalArgumentException(dir + " was created with " + m.consumerPolicy() + ", not "
                        + p.maxConsumerLag() + " " + p.onConsumerLag() + " " + p.consumerBlockMs()
                        + ": the consumer policy is fixed when a rolling bus is created (set none to accept it)");
            }
            RollingDir r = new RollingDir(d, segmentSize, recordSize, allowForeign, m);
            if (r.segments().length == 0) {
                r.createSegment(0, 0);
            }
            return r;
        } catch (IOException | RuntimeException e) {
            // A failed open leaves nothing it created behind.
            if (madeMeta) {
                Files.deleteIfExists(d.resolve(Layout.META_FILE));
            }
            if (made) {
                try {
                    Files.deleteIfExists(d);
                } catch (IOException ignored) {
                    // not empty: another writer has joined in the meantime
                }
            }
            throw e;
        }
    }

    /**
     * Opens the directory of an existing rolling bus, with the sizes its {@code bus.meta} records. Nothing is created.
     *
     * @param dir          the bus directory
     * @param allowForeign accept a directory or bus.meta owned by another user or writable by group or others
     * @return the directory
     * @throws IllegalArgumentException if there is no rolling bus's bus.meta in {@code dir}
     * @throws UnsafeBusFileException   if {@code dir} is a link, not a directory, or not to be trusted
     * @throws IOException              if bus.meta cannot be read or is not a metadata file
     */
    public static RollingDir open(String dir, boolean allowForeign) throws IOException {
        BusMeta m = BusMeta.ofRollingDir(dir, "RollingDir");
        return forReader(dir, m.segmentSize(), m.recordSize(), allowForeign);
    }

    /**
     * Opens the directory of an existing rolling bus created with these sizes. Nothing is created.
     *
     * @param dir          the bus directory
     * @param segmentSize  logical size of every segment
     * @param recordSize   payload size of every record
     * @param allowForeign accept a directory or bus.meta owned by another user or writable by group or others
     * @return the directory
     * @throws NoSuchFileException      if there is no bus.meta (no bus, or its first writer is not done creating it)
     * @throws BusMismatchException     if the bus was created with other sizes, or is a single-file bus
     * @throws UnsafeBusFileException   if {@code dir} is a link, not a directory, or not to be trusted
     * @throws IOException              if bus.meta cannot be read
     */
    public static RollingDir open(String dir, long segmentSize, int recordSize, boolean allowForeign)
            throws IOException {
        return forReader(dir, segmentSize, recordSize, allowForeign);
    }

    /** @return the bus's metadata, as read when opened */
    public BusMeta meta() {
        return meta;
    }

    /** Opens an existing rolling bus for reading; a reader never creates anything. */
    public static RollingDir forReader(String dir, long segmentSize, int recordSize, boolean allowForeign)
            throws IOException {
        MappedBusWriter.checkSizes(segmentSize, recordSize);
        Path d = Path.of(dir);
        checkDir(d, allowForeign);
        Path metaPath = d.resolve(Layout.META_FILE);
        BusMeta m = BusMeta.read(metaPath, allowForeign);
        if (m == null) {
            throw new NoSuchFileException(metaPath.toString(), null,
                    "no bus.meta: not a rolling bus, or its first writer has not finished creating it");
        }
        checkMeta(m, metaPath, recordSize, segmentSize);
        return new RollingDir(d, segmentSize, recordSize, allowForeign, m);
    }

    private static void checkMeta(BusMeta m, Path metaPath, int recordSize, long segmentSize)
            throws BusMismatchException {
        if (m.kind() != BusKind.ROLLING) {
            throw new BusMismatchException(metaPath + " describes a " + m.kind() + " bus, not a rolling one");
        }
        m.check(recordSize, segmentSize, metaPath.getParent().toString());
    }

    /** Refuses a directory that is a link, not a directory, another user's, or group/other-writable. */
    static void checkDir(Path d, boolean allowForeign) throws IOException {
        BusFiles.checkTrustedDirectory(d, allowForeign);
    }

    /**
     * The file of a segment (which may not exist).
     *
     * @param index segment index
     * @return {@code DIR/} and its name ({@link Layout#segmentName})
     */
    public Path segmentPath(long index) {
        return dir.resolve(Layout.segmentName(index));
    }

    public boolean exists(long index) {
        return Files.exists(segmentPath(index), LinkOption.NOFOLLOW_LINKS);
    }

    /**
     * The segments present now.
     *
     * @return their indices, ascending
     * @throws IOException if the directory cannot be listed
     */
    public long[] segments() throws IOException {
        long[] out = new long[16];
        int n = 0;
        try (DirectoryStream<Path> s = Files.newDirectoryStream(dir)) {
            for (Path p : s) {
                long i = Layout.segmentIndex(p.getFileName().toString());
                if (i >= 0) {
                    if (n == out.length) {
                        out = Arrays.copyOf(out, n * 2);
                    }
                    out[n++] = i;
                }
            }
        } catch (NoSuchFileException | NotDirectoryException e) {
            // This bus was open (its meta read): its directory gone means it was removed under this process, as
            // when another process removes and recreates it between a reader's identity check and this listing.
            throw new BusReplacedException("rolling bus " + dir + " (bus " + meta.id() + ") was removed: its "
                    + "directory is gone");
        }
        out = Arrays.copyOf(out, n);
        Arrays.sort(out);
        return out;
    }

    /**
     * The bus's archive tier (docs/design/journal.md), from bus.meta's {@code archive_*} keys.
     *
     * @return its settings, or null when the bus has no archive
     * @throws CorruptBusException if the keys do not make settings
     */
    public ArchiveFiles.Config archive() throws CorruptBusException {
        if (!archiveRead) {
            archiveConfig = ArchiveFiles.config(meta, dir.resolve(Layout.META_FILE).toString());
            archiveRead = true;
        }
        return archiveConfig;
    }

    /**
     * The segments a reader can read now: those of the hot directory and, for a bus with an archive, those archived
     * (a segment in both during its move counted once). The hot directory is listed first: a segment moving between
     * the two listings is in the archive by the second.
     *
     * @return their indices, ascending
     * @throws IOException if a directory cannot be listed, or the archive holds a segment twice
     */
    public long[] readableSegments() throws IOException {
        long[] hot = segments();
        ArchiveFiles.Config a = archive();
        if (a == null) {
            return hot;
        }
        java.util.TreeSet<Long> all = new java.util.TreeSet<>(ArchiveFiles.list(a.dir()).keySet());
        for (long k : hot) {
            all.add(k);
        }
        long[] out = new long[all.size()];
        int i = 0;
        for (long k : all) {
            out[i++] = k;
        }
        return out;
    }

    /**
     * Segment {@code index} in the archive, if the bus has one and holds it there.
     *
     * @param index the segment
     * @return its archived file, or null
     * @throws CorruptBusException if the archive holds it twice, or bus.meta's archive keys are bad
     */
    public ArchiveFiles.Archived archived(long index) throws CorruptBusException {
        ArchiveFiles.Config a = archive();
        return a == null ? null : ArchiveFiles.find(a.dir(), index);
    }

    /**
     * Segment {@code index}'s time index: the union of the hot directory's file and the archive's when both exist
     * ({@link TimeIndex#union}: the hot one may hold entries appended after the archived copy was made), else either.
     * The hot file is read first: a move writes the archive's before it unlinks the hot one, so one of the reads finds
     * it (Python's {@code seektime._load}).
     *
     * @return it, or null when neither has one (a segment written by the Java original, or its index lost)
     * @throws CorruptBusException if a file is not this segment's index
     */
    public TimeIndex timeIndex(long index) throws IOException {
        TimeIndex hot = readTimeIndex(dir, index);
        ArchiveFiles.Config a = archive();
        TimeIndex archived = a == null ? null : readTimeIndex(a.dir(), index);
        if (hot != null && archived != null) {
            return hot.union(archived);
        }
        return hot != null ? hot : archived;
    }

    // Segment index's time index in directory d (hot or archive), or null if it has none.
    private TimeIndex readTimeIndex(Path d, long index) throws IOException {
        try {
            return TimeIndex.read(TimeIndex.path(d, index), meta.id(), index, segmentSize, recordSize, allowForeign);
        } catch (NoSuchFileException e) {
            return null;
        }
    }

    /**
     * Where "everything allocated since {@code tNs}" begins (docs/design/journal.md, "The time index"; Python's
     * {@code rolling/seektime.py}): in the first segment (oldest first, archive then hot) whose index holds an entry at
     * or after {@code floorMs(tNs)}, the smallest position among such entries. A segment without a usable index is
     * passed over only when it filled before {@code floorMs(tNs)} (its modification time, set when its writer rolled
     * out of it) or a later segment's index has an entry before that; otherwise it is read from its start. Every
     * record allocated at or after {@code tNs} lies at or after the answer, none allocated before {@code floorMs(tNs)}.
     *
     * @param tNs a time, Unix ns
     * @param end the position past the last record now (read before the indexes)
     * @return a global position, or {@code end} when no record is that recent
     * @throws IllegalStateException if the bus keeps no time index (bus.meta has no {@code time_index=1})
     * @throws IOException           if a listing or an index cannot be read, or an index is corrupt
     */
    public long positionAtTime(long tNs, long end) throws IOException {
        if (!"1".equals(meta.extra(Layout.TIME_INDEX_META_KEY))) {
            BusMeta now = BusMeta.read(dir.resolve(Layout.META_FILE), allowForeign); // turned on since the open?
            if (now == null || !now.id().equals(meta.id()) || !"1".equals(now.extra(Layout.TIME_INDEX_META_KEY))) {
                throw new IllegalStateException(dir + " keeps no time index: seeking by time needs its writers opened "
                        + "with setTimeIndex(true) (Python: time_index=True; docs/journal.md)");
            }
        }
        long floor = TimeIndex.floorMs(tNs);
        long[] segs = readableSegments();
        long newest = segs.length == 0 ? 0 : segs[segs.length - 1];
        long unindexed = -1; // the oldest segment without entries since the last one passed over
        for (long k : segs) {
            TimeIndex ix = timeIndex(k);
            if (ix == null || ix.empty()) {
                if (unindexed < 0 && !filledBefore(k, newest, floor)) {
                    unindexed = k;
                }
                continue;
            }
            if (unindexed >= 0) {
                if (ix.firstTime() >= floor) {
                    return Layout.joinPosition(unindexed, Layout.FIRST_RECORD_OFFSET, segmentSize);
                }
                unindexed = -1;
            }
            java.util.OptionalLong p = ix.firstAtOrAfter(floor);
            if (p.isPresent()) {
                return p.getAsLong();
            }
        }
        return unindexed >= 0 ? Layout.joinPosition(unindexed, Layout.FIRST_RECORD_OFFSET, segmentSize) : end;
    }

    // A full segment below the newest whose modification time (set when its writer rolled out of it, kept by the
    // archive) is before x: every slot of it was allocated before x.
    private boolean filledBefore(long k, long newest, long x) throws IOException {
        if (k >= newest) {
            return false;
        }
        try (FileChannel ch = FileChannel.open(segmentPath(k), StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS)) {
            java.nio.ByteBuffer b = java.nio.ByteBuffer.allocate(8).order(java.nio.ByteOrder.LITTLE_ENDIAN);
            ch.read(b, Layout.LIMIT_OFFSET);
            boolean full = b.position() == 8
                    && b.getLong(0) >= RollingLayout.endBoundary(segmentSize, recordSize);
            return full && mtimeNs(segmentPath(k)) < x;
        } catch (NoSuchFileException e) {
            ArchiveFiles.Archived a = archived(k); // archived: full and settled when it moved
            try {
                return a != null && mtimeNs(a.path()) < x;
            } catch (NoSuchFileException gone) {
                return false;
            }
        }
    }

    private static long mtimeNs(Path p) throws IOException {
        return Files.getLastModifiedTime(p, LinkOption.NOFOLLOW_LINKS).to(java.util.concurrent.TimeUnit.NANOSECONDS);
    }

    /** The smallest segment index above {@code k} present now, or -1. */
    public long firstAfter(long k) throws IOException {
        for (long i : segments()) {
            if (i > k) {
                return i;
            }
        }
        return -1;
    }

    /**
     * Makes segment {@code index} complete before anyone can open it: a temporary file preallocated to its
     * mapped size with its limit set to 8, then linked to its name. Exactly one creator wins a race.
     *
     * @param current the segment the caller writes (retention keeps it)
     * @return true if this call created it; false if it existed already, or a later segment exists (then it is
     *         not linked)
     */
    public boolean createSegment(long index, long current) throws IOException {
        if (!makeSegment(index)) {
            return false;
        }
        afterCreate(index, current);
        return true;
    }

    // Creates a temporary file exclusively (O_EXCL, never through a link), exactly rw-------.
    private static FileChannel openTemporary(Path tmp) throws IOException {
        Set<PosixFilePermission> perms = PosixFilePermissions.fromString(FILE_PERMS);
        FileChannel ch = FileChannel.open(tmp, Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE,
                LinkOption.NOFOLLOW_LINKS), PosixFilePermissions.asFileAttribute(perms));
        try {
            Files.setPosixFilePermissions(tmp, perms); // exactly the bus mode, whatever the umask
        } catch (IOException | RuntimeException e) {
            ch.close();
            Files.deleteIfExists(tmp);
            throw e;
        }
        return ch;
    }

    // createSegment's file work alone, no retention: whoever gets true calls afterCreate. Its two halves touch no
    // state of this object: a rolling writer makes the file off its writing thread and links it there.
    public boolean makeSegment(long index) throws IOException {
        return linkTemporary(index, makeTemporary(index));
    }

    // The temporary file of segment `index`, preallocated, its limit set.
    public Path makeTemporary(long index) throws IOException {
        Path target = segmentPath(index);
        Path tmp = dir.resolve(Layout.TMP_PREFIX + target.getFileName() + "-" + ProcessHandle.current().pid()
                + "-" + Integer.toHexString(RANDOM.nextInt()));
        FileChannel ch = openTemporary(tmp);
        long mapped = Layout.mappedSize(segmentSize);
        boolean done = false;
        try (ch) {
            // The space first: a full file system fails here, not with SIGBUS on a later write (DiskSpace).
            DiskSpace.checkSpace(target.toString(), mapped);
            DiskSpace.preallocateSegment(ch, target.toString(), mapped); // the file's full length
            ByteBuffer limit = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
            limit.putLong(0, Layout.FIRST_RECORD_OFFSET);
            ch.write(limit, Layout.LIMIT_OFFSET);
            done = true;
        } finally {
            if (!done) {
                Files.deleteIfExists(tmp);
            }
        }
        return tmp;
    }

    // Links `tmp` to segment `index` unless it exists (another creator won: false) or a later one does (false), then
    // removes the temporary name.
    public boolean linkTemporary(long index, Path tmp) throws IOException {
        try {
            stall("before-link");
            if (firstAfter(index) >= 0) {
                // A later segment exists: index was filled and removed by retention while this file was being
                // made. Linked now it would come back, empty, below newer ones: the caller moves to the newest.
                return false;
            }
            try {
                Files.createLink(segmentPath(index), tmp);
            } catch (FileAlreadyExistsException e) {
                return false;
            }
            stall("after-link");
        } finally {
            Files.deleteIfExists(tmp);
        }
        return true;
    }

    /** What the creator of segment {@code index} does once it is linked: retention, then dead creators' files. */
    public void afterCreate(long index, long current) throws IOException {
        if (index > 0) {
            applyRetention(index, Math.min(current, index));
            removeStaleTemporaries();
        }
    }

    /**
     * Removes the oldest segments of history beyond the bus's retention, each with its time index
     * ({@link RollingLayout#retentionPlan}, with the consumers' hold). History is the segments below {@code keepFrom}
     * (the segment being written): those at or above it (the current and the spare, up to {@code newest}) are neither
     * counted nor removed. Age: segment k's modification time is set when a writer rolls out of it (it is full), so k
     * goes once that is older than the age.
     */
    public void applyRetention(long newest, long keepFrom) throws IOException {
        if (!RollingLayout.retains(meta)) {
            return; // nothing is removed: nothing to hold, nobody expires
        }
        ConsumerRetention c = consumers();
        long hold = c == null ? RollingLayout.NO_HOLD : c.hold(keepFrom);
        long[] plan;
        try {
            plan = RollingLayout.retentionPlan(segments(), meta, newest, keepFrom, System.currentTimeMillis(),
                    this::fullMs, hold);
        } catch (UncheckedIOException e) {
            throw e.getCause();
        }
        for (long index : plan) {
            Files.deleteIfExists(segmentPath(index));
            // its time index goes with it (a writer's late entry is not appended again for a segment that is gone)
            Files.deleteIfExists(TimeIndex.path(dir, index));
        }
    }

    /** Retention that holds consumers, or null when the bus was created without (max_consumer_lag 0). */
    public ConsumerRetention consumers() {
        if (consumers == null && meta.maxConsumerLag() > 0) {
            consumers = new ConsumerRetention(this);
        }
        return consumers;
    }

    /** Closes the consumer registry a writer's retention opened. */
    public void close() {
        if (consumers != null) {
            consumers.close();
            consumers = null;
        }
    }

    /** Sets segment {@code index}'s modification time: when a writer rolled out of it. */
    public void markFull(long index, long whenMs) throws IOException {
        try {
            Files.setLastModifiedTime(segmentPath(index), java.nio.file.attribute.FileTime.fromMillis(whenMs));
        } catch (NoSuchFileException e) {
            // removed by retention already
        }
    }

    // When the writers rolled out of segment `index` (its modification time, Unix ms); null once removed.
    private Long fullMs(long index) {
        try {
            return Files.getLastModifiedTime(segmentPath(index), LinkOption.NOFOLLOW_LINKS).toMillis();
        } catch (NoSuchFileException e) {
            return null; // another creator removed it
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * The limit of a segment, read from its file: the offset just past its last allocated slot (8 when it has none;
     * past {@link RollingLayout#endBoundary} once writers found it full).
     *
     * @param index segment index
     * @return its limit, or -1 if it does not exist
     * @throws IOException if it cannot be read
     */
    public long limitOf(long index) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
        try (FileChannel ch = FileChannel.open(segmentPath(index), StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS)) {
            ch.read(b, Layout.LIMIT_OFFSET);
        } catch (NoSuchFileException e) {
            return -1;
        }
        return b.getLong(0);
    }

    /**
     * The segment a writer (or a reader seeking to the end) starts in: the newest one with records, else
     * the oldest (segments made ahead of time have no records yet).
     *
     * @return the segment and its limit, or null if there is no segment
     * @throws IOException if the directory or a limit cannot be read
     */
    public Current chooseCurrent() throws IOException {
        long[] segs = segments();
        for (int i = segs.length - 1; i >= 0; i--) {
            long limit = limitOf(segs[i]);
            if (limit > Layout.FIRST_RECORD_OFFSET) {
                return new Current(segs[i], limit);
            }
        }
        return segs.length == 0 ? null : new Current(segs[0], Layout.FIRST_RECORD_OFFSET);
    }

    /**
     * The segment a writer (or a reader seeking to the end) starts in ({@link #chooseCurrent()}).
     *
     * @param segment its index
     * @param limit   its limit when looked at: the offset past its last allocated slot
     */
    public record Current(long segment, long limit) { }

    private void removeStaleTemporaries() throws IOException {
        long cutoff = System.currentTimeMillis() - STALE_TMP_MS;
        try (DirectoryStream<Path> s = Files.newDirectoryStream(dir, Layout.TMP_PREFIX + "*")) {
            for (Path p : s) {
                try {
                    if (Files.getLastModifiedTime(p, LinkOption.NOFOLLOW_LINKS).toMillis() < cutoff) {
                        Files.deleteIfExists(p);
                    }
                } catch (NoSuchFileException e) {
                    // its creator finished with it
                }
            }
        }
    }

    /**
     * The gap exception of a reader at {@code fromOffset} in the removed segment {@code fromSegment} whose next
     * retained segment is {@code oldest} ({@link RollingLayout#gapRange}).
     */
    public BusGapException gap(long fromSegment, long fromOffset, long oldest, String why) {
        RollingLayout.Gap g = RollingLayout.gapRange(fromSegment, fromOffset, oldest, segmentSize, recordSize);
        return new BusGapException("rolling bus " + dir + ": " + why + "; positions [" + g.from() + ", " + g.to()
                + ") (" + g.slots() + " record slots) were removed by retention", g.from(), g.to(), g.slots());
    }

    /** Re-reads {@code bus.meta}: BusReplacedException unless it still holds this bus's id. */
    public void checkIdentity() throws IOException {
        Path metaPath = dir.resolve(Layout.META_FILE);
        Object key = FileWatch.key(metaPath); // read again only when changed since its id last matched
        if (key != null && key.equals(metaKey)) {
            return;
        }
        BusMeta now = FileWatch.readMeta(metaPath, allowForeign);
        if (now == null) {
            throw new BusReplacedException("rolling bus " + dir + " (bus " + meta.id() + ") was removed: "
                    + metaPath + " no longer exists");
        }
        if (!now.id().equals(meta.id())) {
            throw new BusReplacedException("rolling bus " + dir + " was replaced: " + metaPath + " holds bus "
                    + now.id() + ", not " + meta.id() + " (deleted and recreated)");
        }
        metaKey = key;
    }
    private volatile Object metaKey; // FileWatch.key of bus.meta when its id last matched

    // Test hook, the same as mappedbus_py/rolling/__init__.py's: MAPPEDBUS_TEST_ROLL_STALL=before-link|after-link makes a
    // segment creator stop forever there (tests SIGKILL it), to show that a creator killed mid-roll leaves a bus
    // that others continue.
    private static void stall(String where) {
        if (where.equals(System.getenv("MAPPEDBUS_TEST_ROLL_STALL"))) {
            System.out.println("stalled " + where);
            System.out.flush();
            for (;;) {
                try {
                    Thread.sleep(3_600_000L);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
        }
    }
}
