package io.mappedbuspy.internal;

import io.mappedbuspy.*;

import java.io.IOException;
import java.io.InputStream;
import java.net.URISyntaxException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.CodeSource;

/**
 * The decompression of archived segments (docs/design/journal.md): one zstd frame or one LZ4 frame of a segment's
 * bytes, as the Python archiver writes them with the zstandard and lz4 libraries. The only class that touches the
 * compression libraries, zstd-jni ({@code com.github.luben.zstd}) and lz4-java ({@code net.jpountz.lz4}): the system's
 * packages (Debian: libzstd-jni-java, liblz4-java), which {@code interop/codec-libs.sh} copies beside the library jar
 * and the wheel carries. Without them on the class path, reading a compressed archive fails naming what to install;
 * everything else works.
 *
 * <p>zstd-jni needs its JNI library: when no zstd-jni is loaded yet and {@code libzstd-jni.so} lies beside the
 * zstd-jni jar in use (the wheel's and build/jvm's layout), it is loaded from there (zstd-jni's own
 * {@code ZstdNativePath}); another zstd-jni (Spark's, which carries its own) is left to load itself.
 */
final class ArchiveCodec {
    /** zstd-jni's JNI library, beside its jar. */
    static final String ZSTD_LIBRARY = "libzstd-jni.so";

    private ArchiveCodec() {
    }

    /**
     * Decompresses one frame into {@code dst} (a direct buffer, little-endian, position 0): fills it exactly.
     *
     * @param in          the compressed bytes (read to their end)
     * @param compression how they were compressed (not {@link ArchiveFiles.Compression#NONE})
     * @param dst         the segment's bytes, {@code dst.capacity()} long
     * @param path        the file, for messages
     * @throws CorruptBusException if the bytes are not one frame of exactly {@code dst.capacity()} bytes
     * @throws IllegalStateException naming the package to install if the library is not on the class path
     */
    static void decompress(InputStream in, ArchiveFiles.Compression compression, ByteBuffer dst, Path path)
            throws IOException {
        try {
            switch (compression) {
                case ZSTD -> Zstd.decompress(in, dst, path);
                case LZ4 -> Lz4.decompress(in, dst, path);
                default -> throw new IllegalArgumentException("not compressed: " + compression);
            }
        } catch (NoClassDefFoundError e) {
            throw missing(compression, e);
        }
    }

    /**
     * Loads what a compression's library needs before the archiver compresses with it (zstd-jni's JNI library from
     * beside its jar, as for decompressing).
     */
    static void ready(ArchiveFiles.Compression compression) {
        if (compression == ArchiveFiles.Compression.ZSTD) {
            Zstd.ready();
        }
    }

    // The library of a compression is absent (its class could not be loaded, or its JNI part not linked).
    private static IllegalStateException missing(ArchiveFiles.Compression compression, Throwable e) {
        String what = compression == ArchiveFiles.Compression.ZSTD ? "zstd-jni (Debian: libzstd-jni-java)"
                : "lz4-java (Debian: liblz4-java)";
        return new IllegalStateException("mappedbus: reading a " + compression.text() + "-compressed archive needs "
                + what + " on the class path (build/jvm or the wheel's jars directory has it beside mappedbuspy.jar: "
                + "scripts/setup.sh installs it): " + e, e);
    }

    // Fills dst from a stream, or CorruptBusException when the stream ends early or has bytes left.
    private static void fill(InputStream s, ByteBuffer dst, Path path, String what) throws IOException {
        byte[] chunk = new byte[1 << 16];
        long total = 0;
        for (;;) {
            int n;
            try {
                n = s.read(chunk, 0, Math.min(chunk.length, Math.max(1, dst.remaining())));
            } catch (IOException | RuntimeException e) {
                throw new CorruptBusException(path + " is not a " + what + " frame of a segment (truncated, or "
                        + "corrupt): " + e.getMessage());
            }
            if (n < 0) {
                break;
            }
            if (n > dst.remaining()) {
                throw new CorruptBusException(path + " holds more than " + dst.capacity() + " bytes of segment "
                        + "(mapped_size(segment_size)): another bus's, or not a segment");
            }
            dst.put(chunk, 0, n);
            total += n;
        }
        if (dst.hasRemaining()) {
            throw new CorruptBusException(path + " holds " + total + " bytes of segment, not " + dst.capacity()
                    + " (mapped_size(segment_size)): truncated, or another bus's");
        }
        dst.flip();
        dst.order(ByteOrder.LITTLE_ENDIAN);
    }

    /** zstd through zstd-jni (a class of its own: loaded only for a zstd archive). */
    private static final class Zstd {
        static {
            loadBesideJar();
        }

        static void ready() {
            // the static initializer did it
        }

        static void decompress(InputStream in, ByteBuffer dst, Path path) throws IOException {
            com.github.luben.zstd.ZstdInputStream z;
            try {
                z = new com.github.luben.zstd.ZstdInputStream(in);
            } catch (UnsatisfiedLinkError | ExceptionInInitializerError e) {
                throw missing(ArchiveFiles.Compression.ZSTD, e);
            } catch (IOException e) {
                throw new CorruptBusException(path + " is not a zstd frame of a segment: " + e.getMessage());
            }
            try (z) {
                fill(z, dst, path, "zstd");
            }
        }

        // zstd-jni's JNI library from beside the zstd-jni jar, unless one is loaded or named already.
        private static void loadBesideJar() {
            try {
                if (com.github.luben.zstd.util.Native.isLoaded() || System.getProperty("ZstdNativePath") != null) {
                    return;
                }
                CodeSource cs = com.github.luben.zstd.Zstd.class.getProtectionDomain().getCodeSource();
                if (cs == null || cs.getLocation() == null || !"file".equals(cs.getLocation().getProtocol())) {
                    return;
                }
                Path jar = Path.of(cs.getLocation().toURI());
                Path lib = jar.getParent() == null ? null : jar.getParent().resolve(ZSTD_LIBRARY);
                if (lib != null && Files.isRegularFile(jar) && Files.isRegularFile(lib)) {
                    System.setProperty("ZstdNativePath", lib.toAbsolutePath().toString());
                }
            } catch (URISyntaxException | RuntimeException e) {
                // zstd-jni finds its library itself (the system's), or says why not at the first use
            }
        }
    }

    /** LZ4 frames through lz4-java (a class of its own: loaded only for an lz4 archive; pure Java without JNI). */
    private static final class Lz4 {
        static void decompress(InputStream in, ByteBuffer dst, Path path) throws IOException {
            net.jpountz.lz4.LZ4FrameInputStream z;
            try {
                z = new net.jpountz.lz4.LZ4FrameInputStream(in);
            } catch (IOException | RuntimeException e) {
                throw new CorruptBusException(path + " is not an LZ4 frame of a segment: " + e.getMessage());
            }
            try (z) {
                fill(z, dst, path, "LZ4");
            }
        }
    }
}
