package io.mappedbuspy.internal;

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
                        policy == null ? ConsumerPolicy.DEFAULT : policy);
                madeMeta = mine.write(metaPath, FILE_PERMS, true);
                // The loser of a creation race reads the winner's and checks it like any existing bus.
                m = madeMeta ? mine : BusMeta.read(metaPath, allowForeign);
                if (m == null) {
                    throw new NoSuchFileException(metaPath.toString(), null,
                            "bus.meta vanished while the rolling bus was being created");
                }
            }
            checkMeta(m, metaPath, recordSize, segmentSize);
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
        }
        out = Arrays.copyOf(out, n);
        Arrays.sort(out);
        return out;
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
     * Removes the oldest segments of history beyond the bus's retention ({@link RollingLayout#retentionPlan}, with
     * the consumers' hold). History is the segments below {@code keepFrom} (the segment being written): those at or
     * above it (the current and the spare, up to {@code newest}) are neither counted nor removed. Age: segment k's
     * modification time is set when a writer rolls out of it (it is full), so k goes once that is older than the age.
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
