package io.mappedbuspy;

import io.mappedbuspy.internal.ArchiveFiles;

/**
 * How a rolling bus's archive stores the segments it moves ({@link RollingBusWriter#setCompress}; Python:
 * {@code compress=None|"zstd"|"lz4"}; bus.meta's {@code archive_compress}). Compression goes through the libraries the
 * readers decompress with (zstd-jni, lz4-java: {@code interop/codec-libs.sh}).
 */
public enum ArchiveCompression {
    /** The segment's bytes as they were (the Java original reads such a file as a single-file bus). */
    NONE(ArchiveFiles.Compression.NONE),
    /** One zstd frame (level {@link Layout#ARCHIVE_ZSTD_LEVEL}, content size in its header). */
    ZSTD(ArchiveFiles.Compression.ZSTD),
    /** One LZ4 frame (independent blocks, content size in its header). */
    LZ4(ArchiveFiles.Compression.LZ4);

    private final ArchiveFiles.Compression files;

    ArchiveCompression(ArchiveFiles.Compression files) {
        this.files = files;
    }

    /** @return the name bus.meta stores: none, zstd or lz4 */
    public String text() {
        return files.text();
    }

    ArchiveFiles.Compression files() {
        return files;
    }

    /**
     * The compression of a name.
     *
     * @param text none, zstd or lz4
     * @return it
     * @throws IllegalArgumentException for another name
     */
    public static ArchiveCompression of(String text) {
        ArchiveFiles.Compression c = ArchiveFiles.Compression.of(text);
        for (ArchiveCompression a : values()) {
            if (a.files == c) {
                return a;
            }
        }
        throw new IllegalArgumentException(text);
    }
}
