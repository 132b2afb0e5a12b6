package io.mappedbuspy.internal;

import io.mappedbuspy.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The seek table of an archived zstd segment (layout.py, "ZSTD SEEKABLE"; Python's
 * {@code formats.archive.ZstdSeekTable}): the segment's bytes cut into pieces of
 * {@link Layout#ARCHIVE_ZSTD_FRAME_BYTES}, each one zstd frame with its content size and content checksum (zstd's
 * XXH64, checked by the decoder), followed by one skippable frame
 * of zstd's seekable format that lists them, so that a reader decompresses the frames in parallel
 * ({@link ArchiveCodec}). The table, little-endian:
 *
 * <pre>
 *   frame 0 | frame 1 | ... | frame n-1 | seek table
 *   +0           u32  ARCHIVE_ZSTD_SKIPPABLE_MAGIC
 *   +4           u32  n * ARCHIVE_ZSTD_SEEK_ENTRY_SIZE + ARCHIVE_ZSTD_SEEK_FOOTER_SIZE
 *   +8 + 8 i     u32  frame i's compressed size; u32 its decompressed size
 *   +8 + 8 n     u32  n
 *   +12 + 8 n    u8   ARCHIVE_ZSTD_SEEK_DESCRIPTOR (0: no checksums)
 *   +13 + 8 n    u32  ARCHIVE_ZSTD_SEEKABLE_MAGIC: the file's last bytes
 * </pre>
 *
 * <p>Internal: not a supported API.
 *
 * @param frames the frames in file order, each starting where the one before ends, in the file and in the segment
 */
public record ZstdSeekTable(List<Frame> frames) {
    /** The skippable frame's header before the entries: u32 magic, u32 the size of what follows. */
    static final int SKIPPABLE_HEADER = 8;

    /**
     * One zstd frame of an archived segment.
     *
     * @param srcOffset where it starts in the file
     * @param srcSize   its compressed bytes
     * @param dstOffset where its bytes start in the segment
     * @param dstSize   the bytes it decompresses to
     */
    public record Frame(long srcOffset, int srcSize, long dstOffset, int dstSize) { }

    /**
     * A table of {@code frames}: at least one, none empty, each starting where the one before ends (from 0) in the
     * file and in the segment.
     *
     * @throws IllegalArgumentException if they are not
     */
    public ZstdSeekTable {
        frames = List.copyOf(frames);
        if (frames.isEmpty() || frames.size() > Layout.ARCHIVE_ZSTD_MAX_FRAMES) {
            throw new IllegalArgumentException("a zstd seek table lists 1 to " + Layout.ARCHIVE_ZSTD_MAX_FRAMES
                    + " frames, not " + frames.size());
        }
        long src = 0;
        long dst = 0;
        for (Frame f : frames) {
            if (f.srcOffset() != src || f.dstOffset() != dst || f.srcSize() <= 0 || f.dstSize() <= 0) {
                throw new IllegalArgumentException("zstd seek table frames must follow one another from 0, none "
                        + "empty: " + f + " after " + src + " compressed, " + dst + " decompressed bytes");
            }
            src += f.srcSize();
            dst += f.dstSize();
        }
    }

    /** @return the frames' compressed bytes: where the table starts in the file */
    public long compressedSize() {
        Frame last = frames.get(frames.size() - 1);
        return last.srcOffset() + last.srcSize();
    }

    /** @return the frames' decompressed bytes: the segment's size */
    public long decompressedSize() {
        Frame last = frames.get(frames.size() - 1);
        return last.dstOffset() + last.dstSize();
    }

    /**
     * The bytes of a table of {@code frames} frames, skippable header to the seekable magic.
     *
     * @param frames the frames it lists
     * @return its size in the file
     */
    public static int encodedSize(int frames) {
        return SKIPPABLE_HEADER + frames * Layout.ARCHIVE_ZSTD_SEEK_ENTRY_SIZE + Layout.ARCHIVE_ZSTD_SEEK_FOOTER_SIZE;
    }

    /**
     * Writes the table (its skippable frame: what ends the file) at {@code dst}'s position, little-endian whatever
     * {@code dst}'s order, advancing the position by {@link #encodedSize}.
     *
     * @param dst where to write it, with {@code encodedSize(frames().size())} bytes remaining
     * @throws java.nio.BufferOverflowException if it has fewer
     */
    public void write(ByteBuffer dst) {
        int n = frames.size();
        ByteBuffer b = dst.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        b.putInt(Layout.ARCHIVE_ZSTD_SKIPPABLE_MAGIC);
        b.putInt(n * Layout.ARCHIVE_ZSTD_SEEK_ENTRY_SIZE + Layout.ARCHIVE_ZSTD_SEEK_FOOTER_SIZE);
        for (Frame f : frames) {
            b.putInt(f.srcSize());
            b.putInt(f.dstSize());
        }
        b.putInt(n);
        b.put((byte) Layout.ARCHIVE_ZSTD_SEEK_DESCRIPTOR);
        b.putInt((int) Layout.ARCHIVE_ZSTD_SEEKABLE_MAGIC);
        dst.position(b.position());
    }

    /** The frames of a table as a writer makes them, one after another (offsets from the sizes). */
    public static final class Builder {
        private final List<Frame> frames = new ArrayList<>();
        private long src;
        private long dst;

        /** A table of no frames yet. */
        public Builder() {
        }

        /**
         * Adds the next frame.
         *
         * @param srcSize its compressed bytes
         * @param dstSize the bytes it decompresses to
         * @return this
         */
        public Builder add(int srcSize, int dstSize) {
            frames.add(new Frame(src, srcSize, dst, dstSize));
            src += srcSize;
            dst += dstSize;
            return this;
        }

        /**
         * @return the table of the frames added
         * @throws IllegalArgumentException if none was, or one is empty
         */
        public ZstdSeekTable build() {
            return new ZstdSeekTable(frames);
        }
    }

    /**
     * The seek table that ends an archived .zst segment's bytes, or empty when they do not end in
     * {@link Layout#ARCHIVE_ZSTD_SEEKABLE_MAGIC} (one frame, as the archivers of sessions 17-18 wrote). Reads only
     * within {@code src}'s limit, with absolute reads (its position and order are left as they were).
     *
     * @param src      the file's bytes, index 0 to its limit
     * @param expected the segment's size ({@code mapped_size(segment_size)})
     * @param path     the file, for messages
     * @return the table, or empty
     * @throws CorruptBusException naming {@code path} and the rule of layout.py's "ZSTD SEEKABLE" broken when the
     *                             bytes end in the seekable magic but are not a table of a segment of
     *                             {@code expected} bytes
     */
    public static Optional<ZstdSeekTable> read(ByteBuffer src, long expected, Path path) throws CorruptBusException {
        ByteBuffer b = src.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        long end = b.limit();
        int footer = Layout.ARCHIVE_ZSTD_SEEK_FOOTER_SIZE;
        if (end < footer || Integer.toUnsignedLong(b.getInt((int) end - 4)) != Layout.ARCHIVE_ZSTD_SEEKABLE_MAGIC) {
            return Optional.empty();
        }
        int descriptor = b.get((int) end - 5) & 0xFF;
        if (descriptor != Layout.ARCHIVE_ZSTD_SEEK_DESCRIPTOR) {
            throw bad(path, "has descriptor 0x" + Integer.toHexString(descriptor) + ", not "
                    + Layout.ARCHIVE_ZSTD_SEEK_DESCRIPTOR + " (no checksums)");
        }
        long n = Integer.toUnsignedLong(b.getInt((int) end - footer));
        if (n < 1 || n > Layout.ARCHIVE_ZSTD_MAX_FRAMES) {
            throw bad(path, "lists " + n + " frames, not 1 to " + Layout.ARCHIVE_ZSTD_MAX_FRAMES);
        }
        long size = n * Layout.ARCHIVE_ZSTD_SEEK_ENTRY_SIZE + footer;
        long start = end - size - SKIPPABLE_HEADER;
        if (start < 0) {
            throw bad(path, "of " + n + " frames needs " + (size + SKIPPABLE_HEADER) + " bytes, the file has " + end);
        }
        int magic = b.getInt((int) start);
        if (magic != Layout.ARCHIVE_ZSTD_SKIPPABLE_MAGIC) {
            throw bad(path, "starts with " + hex(magic) + ", not the skippable magic "
                    + hex(Layout.ARCHIVE_ZSTD_SKIPPABLE_MAGIC));
        }
        long said = Integer.toUnsignedLong(b.getInt((int) start + 4));
        if (said != size) {
            throw bad(path, "says it is " + said + " bytes long, not " + size + " for " + n + " frames");
        }
        int entries = (int) start + SKIPPABLE_HEADER;
        long srcTotal = 0;
        long dstTotal = 0;
        for (int i = 0; i < n; i++) {
            long c = Integer.toUnsignedLong(b.getInt(entries + i * Layout.ARCHIVE_ZSTD_SEEK_ENTRY_SIZE));
            long d = Integer.toUnsignedLong(b.getInt(entries + i * Layout.ARCHIVE_ZSTD_SEEK_ENTRY_SIZE + 4));
            if (c == 0 || d == 0) {
                throw bad(path, "gives frame " + i + " a size of 0 (" + c + " compressed, " + d + " decompressed)");
            }
            srcTotal += c;
            dstTotal += d;
        }
        if (srcTotal != start) {
            throw bad(path, "lists " + srcTotal + " bytes of frames, the file has " + start + " before the table");
        }
        if (dstTotal != expected) {
            throw bad(path, "decompresses to " + dstTotal + " bytes, not a segment's " + expected
                    + " (mapped_size(segment_size))");
        }
        // Every size is at most its sum, which is at most the buffer's (int) limit or the expected size (checked
        // above): each fits an int. The expected size is a direct buffer's capacity (an int) where it matters.
        if (expected > Integer.MAX_VALUE) {
            throw bad(path, "decompresses to " + dstTotal + " bytes, more than a compressed segment holds ("
                    + Integer.MAX_VALUE + ")");
        }
        Builder frames = new Builder();
        for (int i = 0; i < n; i++) {
            frames.add(b.getInt(entries + i * Layout.ARCHIVE_ZSTD_SEEK_ENTRY_SIZE),
                    b.getInt(entries + i * Layout.ARCHIVE_ZSTD_SEEK_ENTRY_SIZE + 4));
        }
        return Optional.of(frames.build());
    }

    private static String hex(int v) {
        return String.format("0x%08x", v);
    }

    private static CorruptBusException bad(Path path, String why) {
        return new CorruptBusException(path + ": its zstd seek table " + why + " (truncated, corrupt, or not a "
                + "segment's; layout.py, ZSTD SEEKABLE)");
    }
}
