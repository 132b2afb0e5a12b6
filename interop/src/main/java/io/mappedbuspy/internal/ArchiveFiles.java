package io.mappedbuspy.internal;

import io.mappedbuspy.*;

import io.mappedbuspy.internal.*;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Optional;
import java.util.TreeMap;

/**
 * A rolling bus's archive directory (docs/design/journal.md; the layout is Layout's "the journal", Python's
 * {@code mappedbus_py/formats/archive.py}): its settings as bus.meta keeps them ({@link Config}), the names of
 * archived segments, and their bytes: the segment's own bytes ({@code ARCHIVE/<20 digits>.bus}, which the Java
 * original reads as a single-file bus), zstd frames of them with their seek table ({@code .bus.zst}: zstd's seekable
 * format, {@link ZstdSeekTable}; one zstd frame, as the first archivers wrote, reads too) or one LZ4 frame of them
 * ({@code .bus.lz4}; {@link ArchiveCodec}). An archived segment is full and settled: it is read, never written.
 */
public final class ArchiveFiles {
    private ArchiveFiles() {
    }

    /** How an archived segment's bytes are stored, with bus.meta's name and the file name's suffix. */
    public enum Compression {
        /** The segment's bytes as they were. */
        NONE("none", Layout.ARCHIVE_SUFFIX_NONE),
        /** zstd frames and their seek table (zstd's seekable format), or one zstd frame (the first archivers'). */
        ZSTD("zstd", Layout.ARCHIVE_SUFFIX_ZSTD),
        /** One LZ4 frame. */
        LZ4("lz4", Layout.ARCHIVE_SUFFIX_LZ4);

        private final String text;
        private final String suffix;

        Compression(String text, String suffix) {
            this.text = text;
            this.suffix = suffix;
        }

        /** @return the name bus.meta stores ({@code archive_compress}) */
        public String text() {
            return text;
        }

        /** @return the suffix after {@code .bus} of an archived segment's name */
        public String suffix() {
            return suffix;
        }

        /**
         * The compression bus.meta names.
         *
         * @param text none, zstd or lz4
         * @return it
         * @throws IllegalArgumentException for another name
         */
        public static Compression of(String text) {
            for (Compression c : values()) {
                if (c.text.equals(text)) {
                    return c;
                }
            }
            throw new IllegalArgumentException("archive compression must be none, zstd or lz4, got '" + text + "'");
        }
    }

    /**
     * Loads what compressing as {@code compression} needs (zstd-jni's JNI library from beside its jar): what the
     * archiver calls before it compresses.
     *
     * @param compression the compression
     */
    public static void codecReady(Compression compression) {
        ArchiveCodec.ready(compression);
    }

    /**
     * A bus's archive tier as bus.meta stores it.
     *
     * @param dir            the archive directory (absolute)
     * @param after          full segments kept hot
     * @param ageMs          a full segment older than this moves even within {@code after} (0: no age)
     * @param compress       how archived segments are stored
     * @param retainSegments the archive's retention: most segments (0: no limit)
     * @param retainBytes    most bytes (0: no limit)
     * @param retainAgeMs    oldest age (0: no limit)
     */
    public record Config(Path dir, long after, long ageMs, Compression compress, long retainSegments,
                         long retainBytes, long retainAgeMs) { }

    /**
     * The archive settings of a bus, or null for a bus without an archive.
     *
     * @param meta the bus's metadata
     * @param path its file, for messages
     * @return the settings, or null
     * @throws CorruptBusException if the keys do not make settings
     */
    public static Config config(BusMeta meta, String path) throws CorruptBusException {
        String dir = meta.extra("archive_dir");
        if (dir == null) {
            return null;
        }
        try {
            Config c = new Config(Path.of(dir), num(meta, "archive_after", 1), num(meta, "archive_age_ms", 0),
                    Compression.of(meta.extra("archive_compress") == null ? "none" : meta.extra("archive_compress")),
                    num(meta, "archive_retain_segments", 0), num(meta, "archive_retain_bytes", 0),
                    num(meta, "archive_retain_age_ms", 0));
            if (!c.dir().isAbsolute()) {
                throw new IllegalArgumentException("archive_dir '" + dir + "' is not an absolute path");
            }
            return c;
        } catch (IllegalArgumentException e) {
            throw new CorruptBusException(path + ": archive settings are not valid: " + e.getMessage());
        }
    }

    private static long num(BusMeta meta, String key, long dflt) {
        String v = meta.extra(key);
        if (v == null) {
            return dflt;
        }
        if (v.isEmpty() || !v.chars().allMatch(ch -> ch >= '0' && ch <= '9') || v.length() > 18) {
            throw new IllegalArgumentException(key + "='" + v + "' is not a non-negative integer");
        }
        return Long.parseLong(v);
    }

    /**
     * An archived segment's file.
     *
     * @param segment     its index
     * @param path        the file
     * @param compression how its bytes are stored
     */
    public record Archived(long segment, Path path, Compression compression) { }

    /**
     * The archive file name of segment {@code index}.
     *
     * @param index       the segment
     * @param compression how it is stored
     * @return {@code <20 digits>.bus} and the compression's suffix
     */
    public static String name(long index, Compression compression) {
        return Layout.segmentName(index) + compression.suffix();
    }

    /**
     * The archived segment a file name names, or null if it names none.
     *
     * @param dir  the archive directory
     * @param name a file name in it
     * @return the segment, or null
     */
    public static Archived parse(Path dir, String name) {
        for (Compression c : new Compression[] {Compression.ZSTD, Compression.LZ4, Compression.NONE}) {
            if (!c.suffix().isEmpty() && !name.endsWith(c.suffix())) {
                continue;
            }
            long i = Layout.segmentIndex(name.substring(0, name.length() - c.suffix().length()));
            if (i >= 0) {
                return new Archived(i, dir.resolve(name), c);
            }
        }
        return null;
    }

    /**
     * The archived segments in {@code dir} (none if it does not exist), by index.
     *
     * @param dir the archive directory
     * @return its segments, ascending
     * @throws CorruptBusException if one segment is there in two forms
     * @throws IOException         if the directory cannot be listed
     */
    public static TreeMap<Long, Archived> list(Path dir) throws IOException {
        TreeMap<Long, Archived> out = new TreeMap<>();
        try (DirectoryStream<Path> s = Files.newDirectoryStream(dir)) {
            for (Path p : s) {
                Archived a = parse(dir, p.getFileName().toString());
                if (a == null) {
                    continue;
                }
                Archived twice = out.put(a.segment(), a);
                if (twice != null) {
                    throw new CorruptBusException(dir + " holds segment " + a.segment() + " twice ("
                            + twice.path().getFileName() + " and " + p.getFileName()
                            + "): an archive holds one form of each segment");
                }
            }
        } catch (NoSuchFileException e) {
            return out;
        }
        return out;
    }

    /**
     * Segment {@code index} in {@code dir}, in whichever form it is there, or null if it is not.
     *
     * @param dir   the archive directory
     * @param index the segment
     * @return its file, or null
     * @throws CorruptBusException if it is there in two forms
     */
    public static Archived find(Path dir, long index) throws CorruptBusException {
        Archived found = null;
        for (Compression c : Compression.values()) {
            Path p = dir.resolve(name(index, c));
            if (Files.exists(p, LinkOption.NOFOLLOW_LINKS)) {
                if (found != null) {
                    throw new CorruptBusException(dir + " holds segment " + index + " twice ("
                            + found.path().getFileName() + " and " + p.getFileName()
                            + "): an archive holds one form of each segment");
                }
                found = new Archived(index, p, c);
            }
        }
        return found;
    }

    // A compressed archived segment's file, whole, in a direct buffer (position 0, limit its length): what the
    // codecs decompress from without streams. A file larger than any frames of a segment of `size` bytes could be is
    // named before it is read.
    private static ByteBuffer readCompressed(Path path, long size, SegmentBuffers buffers) throws IOException {
        try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS)) {
            long len = ch.size();
            long most = size + (size >> 6) + (1 << 16); // zstd's and LZ4's bound of incompressible bytes, and more
            if (len > most) {
                throw new CorruptBusException(path + " holds " + len + " bytes, more than any compressed segment of "
                        + size + " bytes (mapped_size(segment_size)): another bus's, or not a segment");
            }
            ByteBuffer src = buffers.compressed((int) len);
            try {
                while (src.hasRemaining()) {
                    if (ch.read(src) < 0) {
                        throw new CorruptBusException(path + " shrank while it was read (" + src.position()
                                + " of " + len + " bytes): not an archived segment");
                    }
                }
            } catch (IOException | RuntimeException e) {
                buffers.giveCompressed(src);
                throw e;
            }
            return src.flip();
        }
    }

    /**
     * A bus file mapped read-only (as {@code new MemoryMappedFile(path, fileSize, true)}), or, for a rolling bus's
     * segment no longer in its hot directory, that segment from the bus's archive (docs/journal.md): what a reader
     * that was given a segment's path (a Spark task planned before the segment moved) opens.
     *
     * @param path     a bus file, or a segment of a rolling bus ({@code DIR/<20 digits>.bus})
     * @param fileSize its logical size
     * @return its bytes; the caller closes them. {@link MemoryMappedFile#path()} names the archived file when the
     *         segment came from the archive
     * @throws NoSuchFileException if it is in neither tier
     * @throws IOException         as {@link #open}
     */
    public static MemoryMappedFile mapForRead(String path, long fileSize) throws IOException {
        try {
            return new MemoryMappedFile(path, fileSize, true);
        } catch (NoSuchFileException e) {
            Path p = Path.of(path);
            long index = p.getFileName() == null ? -1 : Layout.segmentIndex(p.getFileName().toString());
            Path metaPath = p.resolveSibling(Layout.META_FILE);
            BusMeta meta = index < 0 ? null : BusMeta.read(metaPath, false);
            Config cfg = meta == null || meta.kind() != BusKind.ROLLING ? null : config(meta, metaPath.toString());
            Archived a = cfg == null ? null : find(cfg.dir(), index);
            if (a == null) {
                throw e;
            }
            return open(a, meta.segmentSize(), meta.recordSize(), false);
        }
    }

    /**
     * An archived segment's bytes for reading: the file mapped read-only when stored as it was, else decompressed
     * into memory ({@link MemoryMappedFile#inMemory}). Either way {@code mappedSize(segmentSize)} bytes whose limit is
     * on the record grid.
     *
     * @param a            the archived segment
     * @param segmentSize  the bus's segment size
     * @param recordSize   the bus's record size
     * @param allowForeign accept a file of another user, or writable by group or others
     * @return its bytes; the caller closes them
     * @throws NoSuchFileException    if the file is gone (retention of the archive removed it)
     * @throws CorruptBusException    if the file is not a segment of this size (truncated, corrupt or foreign)
     * @throws UnsafeBusFileException if it is a link, or foreign
     */
    public static MemoryMappedFile open(Archived a, long segmentSize, int recordSize, boolean allowForeign)
            throws IOException {
        return open(a, segmentSize, recordSize, allowForeign, SegmentBuffers.NONE);
    }

    /**
     * As {@link #open(Archived, long, int, boolean)}, a compressed segment decompressed into a buffer of
     * {@code buffers} (a reader's, which takes it back when the bytes are closed).
     *
     * @param a            the archived segment
     * @param segmentSize  the bus's segment size
     * @param recordSize   the bus's record size
     * @param allowForeign accept a file of another user, or writable by group or others
     * @param buffers      where the buffers come from and go back to
     * @return its bytes; the caller closes them
     * @throws IOException as {@link #open(Archived, long, int, boolean)}
     */
    public static MemoryMappedFile open(Archived a, long segmentSize, int recordSize, boolean allowForeign,
            SegmentBuffers buffers) throws IOException {
        long size = Layout.mappedSize(segmentSize);
        MemoryMappedFile m;
        if (a.compression() == Compression.NONE) {
            BusFiles.checkTrusted(a.path(), allowForeign);
            long len = Files.size(a.path());
            if (len != size) {
                throw new CorruptBusException(a.path() + " holds " + len + " bytes, not a segment's " + size
                        + " (mapped_size(segment_size)): truncated, or another bus's");
            }
            MemoryMappedFile.OpenOptions o = new MemoryMappedFile.OpenOptions();
            o.readOnly = true;
            o.allowForeign = allowForeign;
            m = MemoryMappedFile.open(a.path().toString(), segmentSize, o);
        } else {
            BusFiles.checkTrusted(a.path(), allowForeign);
            if (size > Integer.MAX_VALUE) {
                throw new IllegalArgumentException("a compressed archive of " + size + "-byte segments cannot be read "
                        + "into memory (at most " + Integer.MAX_VALUE + " bytes): archive such a bus uncompressed");
            }
            ByteBuffer dst = buffers.segment((int) size);
            ByteBuffer src = null;
            try {
                src = readCompressed(a.path(), size, buffers);
                ArchiveCodec.decompress(src, a.compression(), dst, a.path());
            } catch (IOException | RuntimeException e) {
                buffers.giveSegment(dst);
                throw e;
            } finally {
                if (src != null) {
                    buffers.giveCompressed(src);
                }
            }
            m = buffers.inMemory(a.path().toString(), dst);
        }
        return checkedLimit(m, a, segmentSize, recordSize);
    }

    /**
     * The buffers a reader decompresses archived segments into and reads their files into, kept from segment to
     * segment: one spare of each, so that a reader going through the archive (with a segment read ahead,
     * {@link ReadAhead}) allocates nothing after its first segments and touches pages already faulted in: a fresh
     * direct buffer of a segment costs its zeroing and a page fault a page (a quarter of a 1 MiB segment's
     * decompression on the bench machine, perf/results/history.md, session 19). {@link #NONE} keeps nothing: every
     * buffer is allocated and freed. A reader's thread uses its own; {@link #close} frees the spares.
     */
    public static final class SegmentBuffers implements AutoCloseable {
        /** Keeps nothing: what {@link ArchiveFiles#open(Archived, long, int, boolean)} uses. */
        public static final SegmentBuffers NONE = new SegmentBuffers(false);
        private final boolean keep;
        private ByteBuffer spareSegment;
        private ByteBuffer spareCompressed;

        private SegmentBuffers(boolean keep) {
            this.keep = keep;
        }

        /** @return buffers that keep a spare of each kind */
        public static SegmentBuffers kept() {
            return new SegmentBuffers(true);
        }

        // A buffer of exactly `size` bytes (contents undefined: the decompression writes every byte).
        synchronized ByteBuffer segment(int size) {
            ByteBuffer b = spareSegment;
            spareSegment = null;
            if (b != null && b.capacity() == size) {
                return b.clear();
            }
            if (b != null) {
                UnsafeAccess.unmap(b);
            }
            return ByteBuffer.allocateDirect(size);
        }

        // A buffer of at least `len` bytes, position 0 and limit `len`.
        synchronized ByteBuffer compressed(int len) {
            ByteBuffer b = spareCompressed;
            spareCompressed = null;
            if (b != null && b.capacity() >= len) {
                return b.clear().limit(len);
            }
            if (b != null) {
                UnsafeAccess.unmap(b);
            }
            return ByteBuffer.allocateDirect(len);
        }

        synchronized void giveSegment(ByteBuffer b) {
            if (keep && spareSegment == null) {
                spareSegment = b;
            } else {
                UnsafeAccess.unmap(b);
            }
        }

        synchronized void giveCompressed(ByteBuffer b) {
            if (keep && spareCompressed == null) {
                spareCompressed = b;
            } else {
                UnsafeAccess.unmap(b);
            }
        }

        // A segment's bytes in `dst`, handed back here when closed.
        MemoryMappedFile inMemory(String path, ByteBuffer dst) {
            return keep ? MemoryMappedFile.inMemory(path, dst, this::giveSegment) : MemoryMappedFile.inMemory(path, dst);
        }

        /** Frees the spares (the buffers in use are freed when handed back, later). */
        @Override
        public synchronized void close() {
            if (spareSegment != null) {
                UnsafeAccess.unmap(spareSegment);
                spareSegment = null;
            }
            if (spareCompressed != null) {
                UnsafeAccess.unmap(spareCompressed);
                spareCompressed = null;
            }
        }
    }

    // m, once its limit is on the record grid; else CorruptBusException (m closed).
    private static MemoryMappedFile checkedLimit(MemoryMappedFile m, Archived a, long segmentSize, int recordSize)
            throws CorruptBusException {
        long limit = m.getLongAcquire(Layout.LIMIT_OFFSET);
        // (A full segment's limit may lie past its end: the writers' fetch-and-adds that found it full.)
        if (limit != 0 && !Layout.isRecordBoundary(limit, recordSize)) {
            m.closeAndUnmap();
            throw new CorruptBusException(a.path() + ": its limit " + limit + " is not on the record grid of a segment "
                    + "of segmentSize " + segmentSize + " and recordSize " + recordSize + " (corrupt, or another bus's)");
        }
        return m;
    }

    /**
     * An archived zstd segment decompressed ahead of its reader (a Java rolling reader's next segment while it reads one
     * from the archive: Python's {@code ArchiveTier} read-ahead, docs/design/journal.md): its file read and its frames
     * handed to the decompression pool's threads at {@link #start}; {@link #take} gives the segment, decompressing
     * itself the frames no pool thread has claimed yet; {@link #close} drops it. On one CPU, or for a file of one
     * frame, nothing starts early ({@link #start} is empty) and the reader opens the segment when it needs it.
     */
    public static final class ReadAhead implements AutoCloseable {
        private final Archived archived;
        private final ByteBuffer src;
        private final ByteBuffer dst;
        private final ArchiveCodec.Ahead job;
        private final SegmentBuffers buffers;
        private boolean over; // taken or dropped: the buffers are the caller's or handed back

        private ReadAhead(Archived archived, ByteBuffer src, ByteBuffer dst, ArchiveCodec.Ahead job,
                SegmentBuffers buffers) {
            this.archived = archived;
            this.src = src;
            this.dst = dst;
            this.job = job;
            this.buffers = buffers;
        }

        /**
         * Starts decompressing an archived segment ahead, into buffers allocated for it.
         *
         * @param a            the archived segment
         * @param segmentSize  the bus's segment size
         * @param allowForeign accept a file of another user, or writable by group or others
         * @return it, or empty when nothing is gained by starting early (not zstd, one frame, one CPU, too large)
         * @throws IOException as {@link #open} (the file gone, foreign, or its seek table corrupt)
         */
        public static Optional<ReadAhead> start(Archived a, long segmentSize, boolean allowForeign)
                throws IOException {
            return start(a, segmentSize, allowForeign, SegmentBuffers.NONE);
        }

        /**
         * Starts decompressing an archived segment ahead, into buffers of {@code buffers} (handed back when the
         * segment's bytes are closed, or when this is dropped).
         *
         * @param a            the archived segment
         * @param segmentSize  the bus's segment size
         * @param allowForeign accept a file of another user, or writable by group or others
         * @param buffers      the reader's buffers
         * @return it, or empty when nothing is gained by starting early (not zstd, one frame, one CPU, too large)
         * @throws IOException as {@link #open} (the file gone, foreign, or its seek table corrupt)
         */
        public static Optional<ReadAhead> start(Archived a, long segmentSize, boolean allowForeign,
                SegmentBuffers buffers) throws IOException {
            long size = Layout.mappedSize(segmentSize);
            if (a.compression() != Compression.ZSTD || size > Integer.MAX_VALUE || !ArchiveCodec.canDecompressAhead()) {
                return Optional.empty(); // (one CPU: the file is read once, when the segment is opened)
            }
            BusFiles.checkTrusted(a.path(), allowForeign);
            ByteBuffer src = readCompressed(a.path(), size, buffers);
            ByteBuffer dst = null;
            try {
                dst = buffers.segment((int) size);
                Optional<ArchiveCodec.Ahead> job = ArchiveCodec.startAhead(src, dst, a.path());
                if (job.isPresent()) {
                    return Optional.of(new ReadAhead(a, src, dst, job.get(), buffers));
                }
            } catch (IOException | RuntimeException | Error e) {
                buffers.giveCompressed(src);
                if (dst != null) {
                    buffers.giveSegment(dst);
                }
                throw e;
            }
            buffers.giveCompressed(src);
            buffers.giveSegment(dst);
            return Optional.empty();
        }

        /** @return the archived segment it reads */
        public Archived archived() {
            return archived;
        }

        /**
         * The segment's bytes, as {@link #open} gives them (the caller closes them); once only.
         *
         * @param segmentSize the bus's segment size
         * @param recordSize  the bus's record size
         * @return them
         * @throws CorruptBusException if a frame does not decompress to its size, or the limit is not a segment's
         */
        public MemoryMappedFile take(long segmentSize, int recordSize) throws IOException {
            if (over) {
                throw new IllegalStateException("segment " + archived.segment() + " read ahead was taken or dropped");
            }
            over = true;
            try {
                job.finish();
            } catch (IOException | RuntimeException | Error e) {
                buffers.giveSegment(dst); // finish() returned or threw only once no pool thread writes into it
                throw e;
            } finally {
                buffers.giveCompressed(src);
            }
            return checkedLimit(buffers.inMemory(archived.path().toString(), dst), archived, segmentSize,
                    recordSize);
        }

        /** Drops it unless taken: waits for the frames under way, hands the buffers back. */
        @Override
        public void close() {
            if (over) {
                return;
            }
            over = true;
            job.drop();
            buffers.giveCompressed(src);
            buffers.giveSegment(dst);
        }
    }
}
