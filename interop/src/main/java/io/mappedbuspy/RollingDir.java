package io.mappedbuspy;

import java.io.IOException;
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

/**
 * The directory protocol of a rolling bus (docs/files-and-rolling.md, "Rolling bus"), shared by
 * {@link RollingBusWriter} and {@link RollingBusReader}: the checked directory and its {@code bus.meta},
 * segment creation (complete, then linked into place), listing, retention and gap arithmetic.
 */
final class RollingDir {
    private static final SecureRandom RANDOM = new SecureRandom();
    private static final String DIR_PERMS = "rwx------";
    private static final String FILE_PERMS = "rw-------";
    /** A temporary file older than this is a dead creator's, removed by the next segment creator. */
    static final long STALE_TMP_MS = 60_000;

    final Path dir;
    final long segmentSize;
    final int recordSize;
    final long slot;
    /** Record slots in one segment. */
    final long perSegment;
    final boolean allowForeign;
    final BusMeta meta;
    // Retention that holds consumers (max_consumer_lag > 0), made at its first use.
    private ConsumerRetention consumers;

    private RollingDir(Path dir, long segmentSize, int recordSize, boolean allowForeign, BusMeta meta) {
        this.dir = dir;
        this.segmentSize = segmentSize;
        this.recordSize = recordSize;
        this.slot = Layout.slotSize(recordSize);
        this.perSegment = (segmentSize - Layout.FIRST_RECORD_OFFSET) / slot;
        this.allowForeign = allowForeign;
        this.meta = meta;
    }

    /**
     * Opens a rolling bus for writing: makes the directory and {@code bus.meta} if absent, checks them
     * otherwise, and makes segment 0 if there is no segment yet.
     */
    static RollingDir forWriter(String dir, long segmentSize, int recordSize, long[] retention,
                                boolean allowForeign) throws IOException {
        return forWriter(dir, segmentSize, recordSize, retention, null, allowForeign);
    }

    /**
     * As {@link #forWriter(String, long, int, long[], boolean)}, with the consumer policy of a bus this call creates:
     * {@code policy} is {maxConsumerLag, onConsumerLag, consumerBlockMs} or null for none given; on an existing bus,
     * one given must equal the bus's.
     */
    static RollingDir forWriter(String dir, long segmentSize, int recordSize, long[] retention, Object[] policy,
                                boolean allowForeign) throws IOException {
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
                BusMeta mine = policy == null
                        ? BusMeta.rolling(recordSize, segmentSize, retention[0], retention[1], retention[2])
                        : BusMeta.rolling(recordSize, segmentSize, retention[0], retention[1], retention[2],
                                (Long) policy[0], (String) policy[1], (Long) policy[2]);
                madeMeta = mine.write(metaPath, FILE_PERMS, true);
                // The loser of a creation race reads the winner's and checks it like any existing bus.
                m = madeMeta ? mine : BusMeta.read(metaPath, allowForeign);
                if (m == null) {
                    throw new NoSuchFileException(metaPath.toString(), null,
                            "bus.meta vanished while the rolling bus was being created");
                }
            }
            checkMeta(m, metaPath, recordSize, segmentSize);
            if (!madeMeta && (retention[0] | retention[1] | retention[2]) != 0
                    && (retention[0] != m.retainSegments() || retention[1] != m.retainBytes()
                        || retention[2] != m.retainAgeMs())) {
                throw new IllegalArgumentException(dir + " was created with retention segments="
                        + m.retainSegments() + " bytes=" + m.retainBytes() + " ageMs=" + m.retainAgeMs()
                        + ", not segments=" + retention[0] + " bytes=" + retention[1] + " ageMs=" + retention[2]
                        + ": retention is fixed when a rolling bus is created (pass 0s to accept it)");
            }
            if (!madeMeta && policy != null && (!policy[0].equals(m.maxConsumerLag())
                    || !policy[1].equals(m.onConsumerLag()) || !policy[2].equals(m.consumerBlockMs()))) {
                throw new IllegalArgumentException(dir + " was created with max_consumer_lag=" + m.maxConsumerLag()
                        + " on_consumer_lag=" + m.onConsumerLag() + " consumer_block_ms=" + m.consumerBlockMs()
                        + ", not " + policy[0] + " " + policy[1] + " " + policy[2] + ": the consumer policy is fixed"
                        + " when a rolling bus is created (set none to accept it)");
            }
            RollingDir r = new RollingDir(d, segmentSize, recordSize, allowForeign, m);
            if (r.list().length == 0) {
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

    /** Opens an existing rolling bus for reading; a reader never creates anything. */
    static RollingDir forReader(String dir, long segmentSize, int recordSize, boolean allowForeign)
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
        if (!BusMeta.ROLLING.equals(m.kind())) {
            throw new BusMismatchException(metaPath + " describes a " + m.kind() + " bus, not a rolling one");
        }
        m.check(recordSize, segmentSize, metaPath.getParent().toString());
    }

    /** Refuses a directory that is a link, not a directory, another user's, or group/other-writable. */
    static void checkDir(Path d, boolean allowForeign) throws IOException {
        BusFiles.checkTrustedDirectory(d, allowForeign);
    }

    Path segmentPath(long index) {
        return dir.resolve(Layout.segmentName(index));
    }

    boolean exists(long index) {
        return Files.exists(segmentPath(index), LinkOption.NOFOLLOW_LINKS);
    }

    /** The indices of the segments present now, ascending. */
    long[] list() throws IOException {
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
    long firstAfter(long k) throws IOException {
        for (long i : list()) {
            if (i > k) {
                return i;
            }
        }
        return -1;
    }

    /**
     * Makes segment {@code index} complete before anyone can open it: a temporary file reserved to its
     * mapped size with its limit set to 8, then linked to its name. Exactly one creator wins a race.
     *
     * @param current the segment the caller writes (retention keeps it)
     * @return true if this call created it; false if it existed already
     */
    boolean createSegment(long index, long current) throws IOException {
        Path target = segmentPath(index);
        long mapped = Layout.mappedSize(segmentSize);
        Path tmp = dir.resolve(Layout.TMP_PREFIX + target.getFileName() + "-" + ProcessHandle.current().pid()
                + "-" + Integer.toHexString(RANDOM.nextInt()));
        Set<PosixFilePermission> perms = PosixFilePermissions.fromString(FILE_PERMS);
        try {
            try (FileChannel ch = FileChannel.open(tmp, Set.of(StandardOpenOption.CREATE_NEW,
                    StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS), PosixFilePermissions.asFileAttribute(perms))) {
                Files.setPosixFilePermissions(tmp, perms); // exactly the bus mode, whatever the umask
                // Check the space first so a full file system fails here, not with SIGBUS on a later
                // write through the mapping; on tmpfs the segment's pages are then reserved, as the
                // Python side's posix_fallocate does (MemoryMappedFile.reserve).
                MemoryMappedFile.checkSpace(target.toString(), mapped);
                MemoryMappedFile.reserve(ch, tmp.toString(), 0, mapped); // the file's full length
                ByteBuffer limit = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
                limit.putLong(0, Layout.FIRST_RECORD_OFFSET);
                ch.write(limit, Layout.LIMIT_OFFSET);
            }
            stall("before-link");
            try {
                Files.createLink(target, tmp);
            } catch (FileAlreadyExistsException e) {
                return false;
            }
            stall("after-link");
        } finally {
            Files.deleteIfExists(tmp);
        }
        if (index > 0) {
            applyRetention(index, Math.min(current, index));
            removeStaleTemporaries();
        }
        return true;
    }

    /**
     * Removes the oldest segments of history beyond the bus's retention. History is the segments below
     * {@code keepFrom} (the segment being written): those at or above it (the current and the spare, up to
     * {@code newest}) are neither counted nor removed. Age: segment k's modification time is set when a
     * writer rolls out of it (it is full), so k goes once that is older than the age.
     */
    void applyRetention(long newest, long keepFrom) throws IOException {
        long rs = meta.retainSegments();
        long rb = meta.retainBytes();
        long age = meta.retainAgeMs();
        if ((rs | rb | age) == 0) {
            return;
        }
        ConsumerRetention c = consumers();
        long hold = c == null ? Long.MAX_VALUE : c.hold(keepFrom);
        long[] all = list();
        int n = 0;
        long history = Math.min(keepFrom, newest + 1);
        while (n < all.length && all[n] < history) {
            n++;
        }
        long now = System.currentTimeMillis();
        for (int first = 0; first < n && all[first] < hold; first++) {
            long count = n - first;
            boolean remove = (rs > 0 && count > rs) || (rb > 0 && count * segmentSize > rb);
            if (!remove && age > 0) {
                remove = now - modifiedMs(all[first]) > age;
            }
            if (!remove) {
                break;
            }
            Files.deleteIfExists(segmentPath(all[first]));
        }
    }

    /** Retention that holds consumers, or null when the bus was created without (max_consumer_lag 0). */
    ConsumerRetention consumers() {
        if (consumers == null && meta.maxConsumerLag() > 0) {
            consumers = new ConsumerRetention(this);
        }
        return consumers;
    }

    /** Closes the consumer registry a writer's retention opened. */
    void close() {
        if (consumers != null) {
            consumers.close();
            consumers = null;
        }
    }

    /** Sets segment {@code index}'s modification time: when a writer rolled out of it. */
    void markFull(long index, long whenMs) throws IOException {
        try {
            Files.setLastModifiedTime(segmentPath(index), java.nio.file.attribute.FileTime.fromMillis(whenMs));
        } catch (NoSuchFileException e) {
            // removed by retention already
        }
    }

    private long modifiedMs(long index) throws IOException {
        try {
            return Files.getLastModifiedTime(segmentPath(index), LinkOption.NOFOLLOW_LINKS).toMillis();
        } catch (NoSuchFileException e) {
            return Long.MAX_VALUE; // another creator removed it
        }
    }

    /** The limit of segment {@code index} read from the file, or -1 if it does not exist. */
    long limitOf(long index) throws IOException {
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
     * @return {index, limit}, or null if there is no segment
     */
    long[] chooseCurrent() throws IOException {
        long[] segs = list();
        for (int i = segs.length - 1; i >= 0; i--) {
            long limit = limitOf(segs[i]);
            if (limit > Layout.FIRST_RECORD_OFFSET) {
                return new long[] {segs[i], limit};
            }
        }
        return segs.length == 0 ? null : new long[] {segs[0], Layout.FIRST_RECORD_OFFSET};
    }

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

    /** The global position of {@code offset} in segment {@code index}. */
    long position(long index, long offset) {
        return index * segmentSize + offset;
    }

    /** The number of record slots before {@code position} (a record boundary or a segment's end). */
    long slotIndex(long position) {
        long seg = position / segmentSize;
        long off = position % segmentSize;
        long inSeg = off < Layout.FIRST_RECORD_OFFSET ? 0 : Math.min(perSegment, (off - Layout.FIRST_RECORD_OFFSET + slot - 1) / slot);
        return seg * perSegment + inSeg;
    }

    /** The gap exception for the range {@code [from, to)}. */
    BusGapException gap(long from, long to, String why) {
        long lost = slotIndex(to) - slotIndex(from);
        return new BusGapException("rolling bus " + dir + ": " + why + "; positions [" + from + ", " + to + ") ("
                + lost + " record slots) were removed by retention", from, to, lost);
    }

    /** Re-reads {@code bus.meta}: BusReplacedException unless it still holds this bus's id. */
    void checkIdentity() throws IOException {
        Path metaPath = dir.resolve(Layout.META_FILE);
        BusMeta now;
        try {
            now = BusMeta.read(metaPath, allowForeign);
        } catch (NoSuchFileException e) {
            now = null;
        }
        if (now == null) {
            throw new BusReplacedException("rolling bus " + dir + " (bus " + meta.id() + ") was removed: "
                    + metaPath + " no longer exists");
        }
        if (!now.id().equals(meta.id())) {
            throw new BusReplacedException("rolling bus " + dir + " was replaced: " + metaPath + " holds bus "
                    + now.id() + ", not " + meta.id() + " (deleted and recreated)");
        }
    }

    // Test hook, the same as mappedbus_py/rolling.py's: MAPPEDBUS_TEST_ROLL_STALL=before-link|after-link makes a
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
