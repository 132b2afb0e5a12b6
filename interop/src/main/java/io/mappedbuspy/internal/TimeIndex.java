package io.mappedbuspy.internal;

import io.mappedbuspy.*;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.OptionalLong;

/**
 * A rolling bus's time index (docs/design/journal.md; the layout is Layout's "the journal", Python's
 * {@code mappedbus_py/formats/timeindex.py}): one file per segment, {@code DIR/index/<segment>.time}, a 64-byte header
 * then 16-byte (time_ns, position) entries that writers append, at most one per writer per millisecond, each the
 * time read just before a record's slot was allocated and that record's position. So every slot allocated after an
 * entry's position was allocated at or after its time, and {@link #firstAtOrAfter} finds where "everything since t"
 * begins, to {@link Layout#TIME_INDEX_RESOLUTION_NS}.
 *
 * <p>An instance is an index as read: its entries sorted by time, all-zero entries dropped, a torn last entry (shorter
 * than 16 bytes: a power loss) ignored. {@link Appender} is a writer's descriptor for appending.
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
 */
public final class TimeIndex {
    private static final SecureRandom RANDOM = new SecureRandom();
    private static final String PERMS = "rw-------";

    private final Path path;
    private final long segment;
    private final long[] times;
    private final long[] positions;
    // suffixMin[i]: the smallest position among entries i.. (by time).
    private final long[] suffixMin;
    private final int torn;

    private TimeIndex(Path path, long segment, long[] times, long[] positions, int torn) {
        this.path = path;
        this.segment = segment;
        this.times = times;
        this.positions = positions;
        this.torn = torn;
        suffixMin = new long[positions.length];
        long m = Long.MAX_VALUE;
        for (int i = positions.length - 1; i >= 0; i--) {
            m = Math.min(m, positions[i]);
            suffixMin[i] = m;
        }
    }

    /** @return the index file */
    public Path path() {
        return path;
    }

    /** @return its segment */
    public long segment() {
        return segment;
    }

    /** @return its entries' times (Unix ns), ascending */
    public long[] times() {
        return times.clone();
    }

    /** @return its entries' positions, in the order of {@link #times()} */
    public long[] positions() {
        return positions.clone();
    }

    /** @return bytes of a partial last entry, ignored */
    public int torn() {
        return torn;
    }

    /** @return whether it has no entry */
    public boolean empty() {
        return times.length == 0;
    }

    /** @return the earliest entry's time; the index must not be {@link #empty()} */
    public long firstTime() {
        return times[0];
    }

    /**
     * The smallest position among the entries at or after {@code tNs}.
     *
     * @param tNs a time (Unix ns)
     * @return it, or empty when every record this index knows was allocated before {@code tNs}
     */
    public OptionalLong firstAtOrAfter(long tNs) {
        int lo = 0;
        int hi = times.length;
        while (lo < hi) { // the first entry with time >= tNs
            int mid = (lo + hi) >>> 1;
            if (times[mid] < tNs) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo >= times.length ? OptionalLong.empty() : OptionalLong.of(suffixMin[lo]);
    }

    /**
     * This index's entries and {@code other}'s (the same segment's index from the other tier), sorted by time: entries
     * are facts about slots, so an entry in either file holds. A segment's hot index can gain entries after its
     * archived copy was made (a writer stalled between its write and its append: docs/design/journal.md), and both
     * files exist while the segment moves or when such an append made the hot one again. Python's
     * {@code TimeIndex.union}.
     *
     * @param other the segment's index from the other tier
     * @return the union
     */
    public TimeIndex union(TimeIndex other) {
        int n = times.length + other.times.length;
        long[] t = new long[n];
        long[] p = new long[n];
        int i = 0;
        int j = 0;
        for (int k = 0; k < n; k++) { // a merge of two sorted runs, this one's first on equal times
            if (j >= other.times.length || (i < times.length && times[i] <= other.times[j])) {
                t[k] = times[i];
                p[k] = positions[i++];
            } else {
                t[k] = other.times[j];
                p[k] = other.positions[j++];
            }
        }
        return new TimeIndex(path, segment, t, p, torn + other.torn);
    }

    /**
     * A time rounded down to the index's resolution.
     *
     * @param timeNs Unix ns
     * @return {@code timeNs} rounded down to a multiple of {@link Layout#TIME_INDEX_RESOLUTION_NS}
     */
    public static long floorMs(long timeNs) {
        return Math.floorDiv(timeNs, Layout.TIME_INDEX_RESOLUTION_NS) * Layout.TIME_INDEX_RESOLUTION_NS;
    }

    /**
     * The index file of {@code segment} under a bus directory or its archive.
     *
     * @param dir     the hot directory or the archive
     * @param segment the segment
     * @return {@code dir/index/<20 digits>.time}
     */
    public static Path path(Path dir, long segment) {
        return dir.resolve(Layout.TIME_INDEX_DIR).resolve(name(segment));
    }

    /**
     * @param segment the segment
     * @return its index file's name: 20 digits and {@link Layout#TIME_INDEX_SUFFIX}
     */
    public static String name(long segment) {
        if (segment < 0) {
            throw new IllegalArgumentException("segment index must not be negative, got " + segment);
        }
        return String.format("%0" + Layout.SEGMENT_DIGITS + "d%s", segment, Layout.TIME_INDEX_SUFFIX);
    }

    /**
     * The 64 header bytes of a segment's index.
     *
     * @param busId       the bus's id (32 hex digits)
     * @param segment     the segment
     * @param segmentSize the bus's segment size
     * @param recordSize  the bus's record size
     * @return the header
     */
    public static byte[] header(String busId, long segment, long segmentSize, int recordSize) {
        ByteBuffer b = ByteBuffer.allocate(Layout.TIME_INDEX_ENTRIES_OFFSET).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(Layout.TIME_INDEX_MAGIC_OFFSET, Layout.TIME_INDEX_MAGIC);
        b.putInt(Layout.TIME_INDEX_VERSION_OFFSET, Layout.TIME_INDEX_VERSION);
        b.putInt(Layout.TIME_INDEX_ENTRY_SIZE_OFFSET, Layout.TIME_INDEX_ENTRY_SIZE);
        b.put(Layout.TIME_INDEX_BUS_ID_OFFSET, HexFormat.of().parseHex(busId));
        b.putLong(Layout.TIME_INDEX_SEGMENT_OFFSET, segment);
        b.putLong(Layout.TIME_INDEX_SEGMENT_SIZE_OFFSET, segmentSize);
        b.putInt(Layout.TIME_INDEX_RECORD_SIZE_OFFSET, recordSize);
        return b.array();
    }

    /**
     * The index file of {@code segment} under {@code dir}, made with its whole header first (a temporary file linked
     * into place: nobody sees half a header) unless it exists; the {@code index} directory is made (rwx------) if
     * absent.
     *
     * @return its path
     * @throws IOException if it cannot be made
     */
    public static Path create(Path dir, String busId, long segment, long segmentSize, int recordSize)
            throws IOException {
        Path d = dir.resolve(Layout.TIME_INDEX_DIR);
        try {
            Files.createDirectory(d, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        } catch (FileAlreadyExistsException e) {
            // made by another writer (or it is not a directory: the open below says so)
        }
        Path p = d.resolve(name(segment));
        if (Files.exists(p, LinkOption.NOFOLLOW_LINKS)) {
            return p;
        }
        Path tmp = d.resolve(Layout.TMP_PREFIX + name(segment) + "-" + ProcessHandle.current().pid() + "-"
                + Long.toHexString(RANDOM.nextLong()));
        try {
            try (FileChannel ch = FileChannel.open(tmp, java.util.Set.of(StandardOpenOption.CREATE_NEW,
                    StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS),
                    PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString(PERMS)))) {
                ByteBuffer h = ByteBuffer.wrap(header(busId, segment, segmentSize, recordSize));
                while (h.hasRemaining()) {
                    ch.write(h);
                }
            }
            try {
                Files.createLink(p, tmp);
            } catch (FileAlreadyExistsException e) {
                // another writer made it first: the same header
            }
        } finally {
            Files.deleteIfExists(tmp);
        }
        return p;
    }

    /**
     * Reads and checks the index file of segment {@code segment} of bus {@code busId}.
     *
     * @return the index
     * @throws NoSuchFileException    if it is absent
     * @throws CorruptBusException    naming the file for a bad header or entry
     * @throws UnsafeBusFileException for a link, or a file of another user (unless {@code allowForeign})
     */
    public static TimeIndex read(Path path, String busId, long segment, long segmentSize, int recordSize,
            boolean allowForeign) throws IOException {
        if (Files.isSymbolicLink(path)) {
            throw new UnsafeBusFileException(path + " is a symbolic link: bus files are never opened through links");
        }
        byte[] data;
        try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS)) {
            BusFiles.checkTrusted(path, allowForeign);
            long size = ch.size();
            if (size > Integer.MAX_VALUE - 64) {
                throw bad(path, busId, segment, size + " bytes: far more than any segment's index");
            }
            ByteBuffer b = ByteBuffer.allocate((int) size);
            while (b.hasRemaining() && ch.read(b) >= 0) {
                // to the end as it was when opened
            }
            data = Arrays.copyOf(b.array(), b.position());
        }
        return parse(path, data, busId, segment, segmentSize, recordSize);
    }

    /** {@link #read}'s checks on the bytes of an index file. */
    public static TimeIndex parse(Path path, byte[] data, String busId, long segment, long segmentSize, int recordSize)
            throws CorruptBusException {
        if (data.length < Layout.TIME_INDEX_ENTRIES_OFFSET) {
            throw bad(path, busId, segment, data.length + " bytes, shorter than its "
                    + Layout.TIME_INDEX_ENTRIES_OFFSET + "-byte header");
        }
        ByteBuffer b = ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN);
        long magic = b.getLong(Layout.TIME_INDEX_MAGIC_OFFSET);
        if (magic != Layout.TIME_INDEX_MAGIC) {
            throw bad(path, busId, segment, "magic 0x" + Long.toHexString(magic) + ", not 0x"
                    + Long.toHexString(Layout.TIME_INDEX_MAGIC) + " (\"MBUSTIX1\")");
        }
        int version = b.getInt(Layout.TIME_INDEX_VERSION_OFFSET);
        int esize = b.getInt(Layout.TIME_INDEX_ENTRY_SIZE_OFFSET);
        if (version != Layout.TIME_INDEX_VERSION || esize != Layout.TIME_INDEX_ENTRY_SIZE) {
            throw bad(path, busId, segment, "version " + version + " with " + esize + "-byte entries; this version "
                    + "reads " + Layout.TIME_INDEX_VERSION + " with " + Layout.TIME_INDEX_ENTRY_SIZE);
        }
        String bid = HexFormat.of().formatHex(data, Layout.TIME_INDEX_BUS_ID_OFFSET,
                Layout.TIME_INDEX_BUS_ID_OFFSET + Layout.TIME_INDEX_BUS_ID_SIZE);
        if (!bid.equals(busId)) {
            throw bad(path, busId, segment, "it belongs to bus " + bid);
        }
        long seg = b.getLong(Layout.TIME_INDEX_SEGMENT_OFFSET);
        long ssize = b.getLong(Layout.TIME_INDEX_SEGMENT_SIZE_OFFSET);
        int rsize = b.getInt(Layout.TIME_INDEX_RECORD_SIZE_OFFSET);
        if (seg != segment || ssize != segmentSize || rsize != recordSize) {
            throw bad(path, busId, segment, "its header says segment " + seg + ", segment_size " + ssize
                    + ", record_size " + rsize);
        }
        int body = data.length - Layout.TIME_INDEX_ENTRIES_OFFSET;
        int n = body / Layout.TIME_INDEX_ENTRY_SIZE;
        int torn = body % Layout.TIME_INDEX_ENTRY_SIZE;
        long[][] entries = new long[n][];
        int kept = 0;
        long base = segment * segmentSize;
        long slot = Layout.slotSize(recordSize);
        for (int i = 0; i < n; i++) {
            int at = Layout.TIME_INDEX_ENTRIES_OFFSET + i * Layout.TIME_INDEX_ENTRY_SIZE;
            long t = b.getLong(at + Layout.TIME_ENTRY_TIME_OFFSET);
            long p = b.getLong(at + Layout.TIME_ENTRY_POSITION_OFFSET);
            if (t == 0 && p == 0) {
                continue; // a file extended but not written before a power loss
            }
            long off = p - base;
            if (t <= 0 || off < Layout.FIRST_RECORD_OFFSET || off + slot > segmentSize
                    || (off - Layout.FIRST_RECORD_OFFSET) % slot != 0) {
                throw bad(path, busId, segment, "entry (" + t + ", " + p + ") is not a time and a record position of "
                        + "this segment");
            }
            entries[kept++] = new long[] {t, p};
        }
        long[][] sorted = Arrays.copyOf(entries, kept);
        Arrays.sort(sorted, (x, y) -> Long.compare(x[0], y[0])); // stable
        long[] times = new long[kept];
        long[] positions = new long[kept];
        for (int i = 0; i < kept; i++) {
            times[i] = sorted[i][0];
            positions[i] = sorted[i][1];
        }
        return new TimeIndex(path, segment, times, positions, torn);
    }

    private static CorruptBusException bad(Path path, String busId, long segment, String why) {
        return new CorruptBusException(path + " is not the time index of segment " + segment + " of bus " + busId
                + ": " + why);
    }

    /**
     * A writer's descriptor of one segment's index, opened {@code O_APPEND}: each {@link #append} is one
     * {@code write(2)} of 16 bytes, which concurrent writers never interleave. Not thread-safe.
     */
    public static final class Appender implements AutoCloseable {
        private final long segment;
        private final FileChannel channel;
        private final ByteBuffer entry = ByteBuffer.allocateDirect(Layout.TIME_INDEX_ENTRY_SIZE)
                .order(ByteOrder.LITTLE_ENDIAN);
        private boolean failed;

        private final Path path;
        // The file's identity (inode) when opened: whether the path still names it (stillLinked).
        private final Object fileKey;

        private Appender(long segment, FileChannel channel, Path path, Object fileKey) {
            this.segment = segment;
            this.channel = channel;
            this.path = path;
            this.fileKey = fileKey;
        }

        /**
         * Makes (if absent) and opens segment {@code segment}'s index under {@code dir} for appending.
         *
         * @return the appender
         * @throws IOException if it cannot be made or opened, or is not to be trusted
         */
        public static Appender open(Path dir, String busId, long segment, long segmentSize, int recordSize,
                boolean allowForeign) throws IOException {
            Path p = create(dir, busId, segment, segmentSize, recordSize);
            FileChannel ch = FileChannel.open(p, StandardOpenOption.WRITE, StandardOpenOption.APPEND,
                    LinkOption.NOFOLLOW_LINKS);
            Object key;
            try {
                BusFiles.checkTrusted(p, allowForeign);
                key = Files.readAttributes(p, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS).fileKey();
            } catch (IOException | RuntimeException e) {
                ch.close();
                throw e;
            }
            return new Appender(segment, ch, p, key);
        }

        /**
         * Whether the index path still names the file this appender writes. Not when the segment moved to the
         * archive since it was opened (the move unlinks the hot index): a writer that stalled between its write and
         * its append then appends again through a new appender, which makes the hot index again; seekTime reads it
         * with the archived one and the next archiver merges it there (docs/design/journal.md, "late entries").
         * Python's writer checks {@code fstat}'s link count.
         *
         * @return false once the file is unlinked or replaced
         */
        public boolean stillLinked() {
            try {
                Object now = Files.readAttributes(path, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS).fileKey();
                return fileKey == null || fileKey.equals(now);
            } catch (IOException e) {
                return false;
            }
        }

        /** @return the segment whose index this appends to */
        public long segment() {
            return segment;
        }

        /**
         * Appends one entry (one write of 16 bytes). An index that cannot be written (its disk full, its file
         * removed with the segment) costs the index, never the write: the first failure stops this appender.
         *
         * @param timeNs   the time read before the record's slot was allocated (Unix ns)
         * @param position the record's global position
         */
        public void append(long timeNs, long position) {
            if (failed) {
                return;
            }
            entry.clear();
            entry.putLong(0, timeNs).putLong(8, position);
            try {
                if (channel.write(entry) != Layout.TIME_INDEX_ENTRY_SIZE) {
                    failed = true; // a short write (disk full): later entries would be off the 16-byte grid
                }
            } catch (IOException e) {
                failed = true;
            }
        }

        /**
         * Its data to the disk ({@code fdatasync}).
         *
         * @throws IOException if that fails
         */
        public void force() throws IOException {
            channel.force(false);
        }

        @Override
        public void close() {
            try {
                channel.close();
            } catch (IOException e) {
                // appended with single writes: nothing buffered to lose
            }
        }
    }
}
