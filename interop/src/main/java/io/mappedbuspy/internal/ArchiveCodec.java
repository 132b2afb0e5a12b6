package io.mappedbuspy.internal;

import io.mappedbuspy.*;

import java.io.IOException;
import java.io.InputStream;
import java.io.InterruptedIOException;
import java.net.URISyntaxException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.CodeSource;
import java.util.Optional;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The decompression of archived segments (docs/design/journal.md): zstd frames of a segment's bytes with their seek
 * table (zstd's seekable format, layout.py "ZSTD SEEKABLE"; {@link ZstdSeekTable}), one zstd frame (what the first
 * archivers wrote) or one LZ4 frame, as the archivers write them (Python's with the zstandard and lz4 libraries). The
 * only class that touches the compression libraries, zstd-jni ({@code com.github.luben.zstd}) and lz4-java
 * ({@code net.jpountz.lz4}): the system's packages (Debian: libzstd-jni-java, liblz4-java), which
 * {@code interop/codec-libs.sh} copies beside the library jar and the wheel carries. Without them on the class path,
 * reading a compressed archive fails naming what to install; everything else works.
 *
 * <p>The frames of a seekable zstd segment are decompressed by the reader's thread and a small shared pool of daemon
 * threads ({@code mappedbus-archive-zstd-N}: {@code min(3, CPUs - 1)}, none on one CPU; made at the first segment
 * of several frames, each thread ending after {@link #ZSTD_POOL_IDLE_SECONDS} idle), each frame straight into its
 * place of the segment: zstd decompresses about 1.3 ms a MiB on one core of the bench machine, which a reader of the
 * archive pays at each segment it opens.
 *
 * <p>zstd-jni needs its JNI library: when no zstd-jni is loaded yet and {@code libzstd-jni.so} lies beside the
 * zstd-jni jar in use (the wheel's and build/jvm's layout), it is loaded from there (zstd-jni's own
 * {@code ZstdNativePath}); another zstd-jni (Spark's, which carries its own) is left to load itself.
 */
final class ArchiveCodec {
    /** zstd-jni's JNI library, beside its jar. */
    static final String ZSTD_LIBRARY = "libzstd-jni.so";
    /** The most threads of the zstd pool (fewer on fewer CPUs: one less than the CPUs). */
    static final int ZSTD_POOL_MAX_THREADS = 3;
    /** How long a thread of the zstd pool waits for work before it ends. */
    static final int ZSTD_POOL_IDLE_SECONDS = 5;
    /** The zstd pool's thread names: this and a number from 1. */
    static final String ZSTD_THREAD_PREFIX = "mappedbus-archive-zstd-";

    private ArchiveCodec() {
    }

    /**
     * Decompresses an archived segment's file into {@code dst} (a direct buffer, position 0): fills it exactly,
     * straight from the compressed bytes into {@code dst} through the libraries' direct-buffer calls (zstd-jni's
     * {@code decompressDirectByteBuffer}, frame by frame into each frame's place for a seekable zstd segment, on the
     * calling thread and the pool; lz4-java's block decompressor, block by block, for the frames the archivers write:
     * independent blocks), without streams or copies. {@code dst} is left little-endian, position 0.
     *
     * @param src         the compressed bytes (a direct buffer, position 0 to its limit)
     * @param compression how they were compressed (not {@link ArchiveFiles.Compression#NONE})
     * @param dst         the segment's bytes, {@code dst.capacity()} long
     * @param path        the file, for messages
     * @throws CorruptBusException if the bytes are not frames of exactly {@code dst.capacity()} bytes (with a seek
     *                             table: one that breaks a rule of it, or the first frame, by frame order, that does
     *                             not decompress to its size)
     * @throws java.io.InterruptedIOException if the thread is interrupted while it waits for the pool's frames (its
     *                                        interrupt flag set again; no frame is written into {@code dst} after)
     * @throws IllegalStateException naming the package to install if the library is not on the class path
     */
    static void decompress(ByteBuffer src, ArchiveFiles.Compression compression, ByteBuffer dst, Path path)
            throws IOException {
        try {
            switch (compression) {
                case ZSTD -> Zstd.decompress(src, dst, path);
                case LZ4 -> Lz4.decompress(src, dst, path);
                default -> throw new IllegalArgumentException("not compressed: " + compression);
            }
        } catch (NoClassDefFoundError e) {
            throw missing(compression, e);
        }
        dst.clear();
        dst.order(ByteOrder.LITTLE_ENDIAN);
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

        /**
         * Each thread's decompression context, kept from frame to frame: a one-shot call makes and frees one per frame,
         * which costs 15 % of a 1 MiB segment's decompression in 128 KiB frames and nothing with a kept one (the
         * session-19 measurement, perf/results/history.md). zstd-jni frees it when the thread is gone and it is
         * collected.
         */
        private static final ThreadLocal<com.github.luben.zstd.ZstdDecompressCtx> CONTEXT =
                ThreadLocal.withInitial(com.github.luben.zstd.ZstdDecompressCtx::new);

        static void ready() {
            // the static initializer did it
        }

        static void decompress(ByteBuffer src, ByteBuffer dst, Path path) throws IOException {
            Optional<ZstdSeekTable> table = ZstdSeekTable.read(src, dst.capacity(), path);
            if (table.isPresent()) {
                frames(table.get(), src, dst, path);
            } else {
                oneFrame(src, dst, path);
            }
        }

        // A .zst file without a seek table: one frame of the whole segment (what the first archivers wrote).
        private static void oneFrame(ByteBuffer src, ByteBuffer dst, Path path) throws IOException {
            int want = dst.capacity();
            long n;
            try {
                // The frame's content size when it has one (the archivers write it): a segment of another size is
                // named before any byte is decompressed (0: unknown or not a frame; zstd says which below).
                long said = com.github.luben.zstd.Zstd.decompressedDirectByteBufferSize(src, 0, src.limit());
                if (said > 0 && said != want) {
                    throw new CorruptBusException(path + " holds a zstd frame of " + said + " bytes, not a segment's "
                            + want + " (mapped_size(segment_size)): " + (said < want ? "the first frame of a "
                            + "seekable segment whose seek table is cut off (truncated), " : "") + "another bus's, "
                            + "or not a segment");
                }
                n = com.github.luben.zstd.Zstd.decompressDirectByteBuffer(dst, 0, want, src, 0, src.limit());
            } catch (UnsatisfiedLinkError | ExceptionInInitializerError e) {
                throw missing(ArchiveFiles.Compression.ZSTD, e);
            } catch (RuntimeException e) {
                throw new CorruptBusException(path + " is not a zstd frame of a segment of " + want + " bytes "
                        + "(truncated, corrupt, or another bus's): " + e.getMessage());
            }
            if (n != want) {
                throw new CorruptBusException(path + " holds " + n + " bytes of segment, not " + want
                        + " (mapped_size(segment_size)): truncated, or another bus's");
            }
        }

        // The frames of a seekable segment, each into its place of dst: the pool's threads help the caller's.
        private static void frames(ZstdSeekTable table, ByteBuffer src, ByteBuffer dst, Path path)
                throws IOException {
            FrameJob job = new FrameJob(table, src, dst, path);
            int frames = table.frames().size();
            ThreadPoolExecutor pool = frames > 1 ? ZstdPool.POOL : null;
            int helpers = pool == null ? 0 : Math.min(pool.getMaximumPoolSize(), frames - 1);
            for (int h = 0; h < helpers; h++) {
                pool.execute(job::help);
            }
            job.work();
            job.await();
        }

        // Frame i of the job's table into its place of dst, or why not.
        static void frame(FrameJob job, int i) throws CorruptBusException {
            ZstdSeekTable.Frame f = job.table.frames().get(i);
            int frames = job.table.frames().size();
            int srcOff = (int) f.srcOffset();
            int dstOff = (int) f.dstOffset();
            long n;
            try {
                long said = com.github.luben.zstd.Zstd.decompressedDirectByteBufferSize(job.src, srcOff, f.srcSize());
                if (said > 0 && said != f.dstSize()) {
                    throw new CorruptBusException(job.path + ": zstd frame " + i + " of " + frames + " holds " + said
                            + " bytes, its seek table says " + f.dstSize() + " (corrupt, or not a segment's)");
                }
                n = CONTEXT.get().decompressDirectByteBuffer(job.dst, dstOff, f.dstSize(), job.src, srcOff,
                        f.srcSize());
            } catch (UnsatisfiedLinkError | ExceptionInInitializerError | NoClassDefFoundError e) {
                throw missing(ArchiveFiles.Compression.ZSTD, e);
            } catch (RuntimeException e) {
                throw new CorruptBusException(job.path + ": zstd frame " + i + " of " + frames + " is not a frame of "
                        + f.dstSize() + " bytes (truncated or corrupt): " + e.getMessage());
            }
            if (n != f.dstSize()) {
                throw new CorruptBusException(job.path + ": zstd frame " + i + " of " + frames + " decompresses to "
                        + n + " bytes, its seek table says " + f.dstSize() + " (corrupt)");
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

    /**
     * The frames of one seekable zstd segment being decompressed: claimed one at a time, in order, by the reader's
     * thread ({@link #work}) and the pool's helpers ({@link #help}); after a failure no frame is claimed, and the first
     * failure by frame order is what the reader throws ({@link #await}). The buffers are the reader's: no helper
     * touches them once {@link #await} returned.
     */
    private static final class FrameJob {
        final ZstdSeekTable table;
        final ByteBuffer src;
        final ByteBuffer dst;
        final Path path;
        private final AtomicInteger next = new AtomicInteger();            // the next frame to claim
        private final AtomicReference<FrameFailure> failure = new AtomicReference<>();
        private volatile boolean stopped;  // a failure, or the reader interrupted: no frame is claimed after
        private int running;               // helpers in work() (guarded by this)
        private boolean closed;            // the reader waits or returned: no helper starts (guarded by this)

        FrameJob(ZstdSeekTable table, ByteBuffer src, ByteBuffer dst, Path path) {
            this.table = table;
            this.src = src;
            this.dst = dst;
            this.path = path;
        }

        /** Decompresses frames until none is left to claim (or one failed). */
        void work() {
            int frames = table.frames().size();
            while (!stopped) {
                int i = next.getAndIncrement();
                if (i >= frames) {
                    return;
                }
                try {
                    Zstd.frame(this, i);
                } catch (CorruptBusException | RuntimeException | Error e) {
                    failure.accumulateAndGet(new FrameFailure(i, e),
                            (had, now) -> had == null || now.frame() < had.frame() ? now : had);
                    stopped = true;
                }
            }
        }

        /** A pool thread's share: {@link #work}, unless the reader has stopped waiting for helpers. */
        void help() {
            synchronized (this) {
                if (closed) {
                    return;
                }
                running++;
            }
            try {
                work();
            } finally {
                synchronized (this) {
                    if (--running == 0) {
                        notifyAll();
                    }
                }
            }
        }

        /**
         * Stops the claims and waits, without a limit, for the helpers under way (a dropped read-ahead: the buffers are
         * freed next); an interrupt meanwhile is kept in the flag.
         */
        void stop() {
            stopped = true;
            if (closeAndWait()) {
                Thread.currentThread().interrupt();
            }
        }

        // No helper starts from now on; waits for those under way, an interrupt stopping the claims (a frame under way
        // writes into the reader's buffer: the wait goes on). Whether the thread was interrupted meanwhile.
        private boolean closeAndWait() {
            boolean interrupted = false;
            synchronized (this) {
                closed = true;
                while (running > 0) {
                    try {
                        wait();
                    } catch (InterruptedException e) {
                        interrupted = true;
                        stopped = true;
                    }
                }
            }
            return interrupted;
        }

        /**
         * The reader's wait, after its own {@link #work} (every frame is claimed then): until the helpers that started
         * are done (a helper that starts later does nothing); then the first failure by frame order is thrown. An
         * interrupt stops the claims and the wait goes on (a frame under way writes into the reader's buffer), then
         * the interrupt flag is set again and {@link InterruptedIOException} thrown.
         */
        void await() throws IOException {
            if (closeAndWait()) {
                Thread.currentThread().interrupt();
                throw new InterruptedIOException(path + ": interrupted while its zstd frames were decompressed");
            }
            FrameFailure f = failure.get();
            if (f == null) {
                return;
            }
            Throwable e = f.error();
            if (e instanceof CorruptBusException c) {
                throw c;
            }
            if (e instanceof RuntimeException r) {
                throw r;
            }
            throw (Error) e;
        }
    }

    /**
     * A seekable zstd segment being decompressed ahead of its reader by the pool's threads alone
     * ({@link ArchiveFiles.ReadAhead}): the reader later takes it ({@link #finish}), doing the frames no pool thread
     * has claimed yet itself, or drops it ({@link #drop}). Never slower than decompressing when needed: a pool thread
     * that got no CPU meanwhile leaves every frame to the reader.
     */
    static final class Ahead {
        private final FrameJob job;

        private Ahead(FrameJob job) {
            this.job = job;
        }

        /**
         * The segment in the buffer given to {@link #startAhead}, or why not (as {@link #decompress}): the frames not
         * claimed yet decompressed by the calling thread, then a wait for those under way.
         */
        void finish() throws IOException {
            job.work();
            job.await();
            job.dst.clear();
            job.dst.order(ByteOrder.LITTLE_ENDIAN);
        }

        /** Stops the claims and waits for the frames under way (they write into the buffer the caller frees next). */
        void drop() {
            job.stop();
        }
    }

    /** @return whether there is a pool to decompress ahead on (more than one CPU) */
    static boolean canDecompressAhead() {
        return ZstdPool.POOL != null;
    }

    /**
     * Starts decompressing a seekable zstd segment ahead of its reader, on the pool's threads alone.
     *
     * @param src  the compressed bytes (a direct buffer, position 0 to its limit), kept until finished or dropped
     * @param dst  the segment's bytes, {@code dst.capacity()} long, kept likewise
     * @param path the file, for messages
     * @return the job, or empty when the bytes have no seek table (one frame: nothing to share) or there is no pool
     *         (one CPU: nothing gained by starting early)
     * @throws CorruptBusException   if the seek table breaks a rule of it
     * @throws IllegalStateException naming the package to install if zstd-jni is not on the class path
     */
    static Optional<Ahead> startAhead(ByteBuffer src, ByteBuffer dst, Path path) throws IOException {
        if (!canDecompressAhead()) {
            return Optional.empty();
        }
        Optional<ZstdSeekTable> table = ZstdSeekTable.read(src, dst.capacity(), path);
        ThreadPoolExecutor pool;
        try {
            pool = table.isEmpty() ? null : ZstdPool.POOL;
            if (pool != null) {
                Zstd.ready(); // zstd-jni's JNI library, loaded here rather than named missing on a pool thread
            }
        } catch (NoClassDefFoundError | UnsatisfiedLinkError | ExceptionInInitializerError e) {
            throw missing(ArchiveFiles.Compression.ZSTD, e);
        }
        if (pool == null) {
            return Optional.empty();
        }
        FrameJob job = new FrameJob(table.get(), src, dst, path);
        int helpers = Math.min(pool.getMaximumPoolSize(), table.get().frames().size());
        for (int h = 0; h < helpers; h++) {
            pool.execute(job::help);
        }
        return Optional.of(new Ahead(job));
    }

    /**
     * A frame that did not decompress.
     *
     * @param frame its index in the seek table
     * @param error why: a CorruptBusException, the missing library's IllegalStateException, or what else was thrown
     */
    private record FrameFailure(int frame, Throwable error) { }

    /** The zstd pool, made at the first segment of several frames (a class of its own: lazily, once). */
    private static final class ZstdPool {
        private static final AtomicInteger THREADS = new AtomicInteger();
        /** The pool, or null on one CPU. */
        static final ThreadPoolExecutor POOL = make();

        private static ThreadPoolExecutor make() {
            int n = Math.min(ZSTD_POOL_MAX_THREADS, Runtime.getRuntime().availableProcessors() - 1);
            if (n < 1) {
                return null;
            }
            ThreadPoolExecutor p = new ThreadPoolExecutor(n, n, ZSTD_POOL_IDLE_SECONDS, TimeUnit.SECONDS,
                    new LinkedBlockingQueue<>(), r -> {
                        Thread t = new Thread(r, ZSTD_THREAD_PREFIX + THREADS.incrementAndGet());
                        t.setDaemon(true);
                        return t;
                    });
            p.allowCoreThreadTimeOut(true);
            return p;
        }
    }

    /**
     * LZ4 frames through lz4-java (a class of its own: loaded only for an lz4 archive). The frame format (lz4's
     * doc/lz4_Frame_format.md): magic, FLG, BD, [content size], [dictionary id], header checksum; blocks (a 4-byte
     * size, its high bit set for a block stored as it was; the data; [its checksum]); a 0 end mark; [the content's
     * checksum]. The checksums are xxHash32 with seed 0.
     */
    private static final class Lz4 {
        private static final int MAGIC = 0x184D2204;
        private static final net.jpountz.lz4.LZ4SafeDecompressor BLOCKS =
                net.jpountz.lz4.LZ4Factory.fastestInstance().safeDecompressor();
        private static final net.jpountz.xxhash.XXHash32 XXH32 =
                net.jpountz.xxhash.XXHashFactory.fastestInstance().hash32();

        static void decompress(ByteBuffer src, ByteBuffer dst, Path path) throws IOException {
            ByteBuffer s = src.duplicate().order(ByteOrder.LITTLE_ENDIAN);
            if (!blocks(s, dst, path)) {
                // Another shape of frame: lz4-java's stream, as before.
                dst.clear();
                viaStream(new ByteBufferInput(src.duplicate()), dst, path);
            }
        }

        // One frame of independent blocks, without a dictionary id, and nothing after it: decompressed block by
        // block into dst; false (nothing said) for a frame of another shape.
        private static boolean blocks(ByteBuffer s, ByteBuffer dst, Path path) throws CorruptBusException {
            int end = s.limit();
            int want = dst.capacity();
            if (end < 7 || s.getInt(0) != MAGIC) {
                return false;
            }
            int flg = s.get(4) & 0xFF;
            int bd = s.get(5) & 0xFF;
            boolean independent = (flg & 0x20) != 0;
            boolean blockSums = (flg & 0x10) != 0;
            boolean hasSize = (flg & 0x08) != 0;
            boolean contentSum = (flg & 0x04) != 0;
            if ((flg >>> 6) != 1 || !independent || (flg & 0x01) != 0 || (flg & 0x02) != 0 || (bd & 0x8F) != 0
                    || ((bd >>> 4) & 7) < 4) {
                return false;
            }
            int blockMax = 1 << (8 + 2 * ((bd >>> 4) & 7));
            int pos = 6;
            if (hasSize) {
                if (end < pos + 9) {
                    throw truncated(path, 0, want);
                }
                long said = s.getLong(pos);
                if (said != want) {
                    throw new CorruptBusException(path + " holds an LZ4 frame of " + said + " bytes, not a segment's "
                            + want + " (mapped_size(segment_size)): another bus's, or not a segment");
                }
                pos += 8;
            }
            if (((XXH32.hash(s, 4, pos - 4, 0) >>> 8) & 0xFF) != (s.get(pos) & 0xFF)) {
                throw new CorruptBusException(path + " is not an LZ4 frame of a segment: its header checksum is wrong "
                        + "(corrupt)");
            }
            pos++;
            int out = 0;
            for (;;) {
                if (end - pos < 4) {
                    throw truncated(path, out, want);
                }
                int word = s.getInt(pos);
                pos += 4;
                if (word == 0) {
                    break;
                }
                boolean stored = word < 0;
                int len = word & 0x7FFFFFFF;
                if (len > blockMax || end - pos < len + (blockSums ? 4 : 0)) {
                    throw len > blockMax ? corrupt(path, "a block of " + len + " bytes, more than its "
                            + blockMax) : truncated(path, out, want);
                }
                if (blockSums && XXH32.hash(s, pos, len, 0) != s.getInt(pos + len)) {
                    throw corrupt(path, "a block's checksum is wrong");
                }
                int n;
                if (stored) {
                    if (len > want - out) {
                        throw more(path, want);
                    }
                    dst.put(out, s, pos, len);
                    n = len;
                } else {
                    try {
                        n = BLOCKS.decompress(s, pos, len, dst, out, Math.min(blockMax, want - out));
                    } catch (net.jpountz.lz4.LZ4Exception e) {
                        throw corrupt(path, "a block does not decompress into at most " + Math.min(blockMax,
                                want - out) + " bytes: " + e.getMessage());
                    }
                }
                out += n;
                pos += len + (blockSums ? 4 : 0);
            }
            if (contentSum) {
                if (end - pos < 4) {
                    throw truncated(path, out, want);
                }
                pos += 4;
            }
            if (pos != end) {
                return false; // another frame follows (lz4-java's stream reads on)
            }
            if (out != want) {
                throw truncated(path, out, want);
            }
            if (contentSum && XXH32.hash(dst, 0, want, 0) != s.getInt(pos - 4)) {
                throw corrupt(path, "the content's checksum is wrong");
            }
            return true;
        }

        private static CorruptBusException truncated(Path path, long got, int want) {
            return new CorruptBusException(path + " holds " + got + " bytes of segment, not " + want
                    + " (mapped_size(segment_size)): truncated, or another bus's");
        }

        private static CorruptBusException more(Path path, int want) {
            return new CorruptBusException(path + " holds more than " + want + " bytes of segment "
                    + "(mapped_size(segment_size)): another bus's, or not a segment");
        }

        private static CorruptBusException corrupt(Path path, String what) {
            return new CorruptBusException(path + " is not an LZ4 frame of a segment (truncated, or corrupt): " + what);
        }

        private static void viaStream(InputStream in, ByteBuffer dst, Path path) throws IOException {
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

    /** A buffer's bytes as a stream (for lz4-java's frame stream). */
    private static final class ByteBufferInput extends InputStream {
        private final ByteBuffer b;

        ByteBufferInput(ByteBuffer b) {
            this.b = b;
        }

        @Override
        public int read() {
            return b.hasRemaining() ? b.get() & 0xFF : -1;
        }

        @Override
        public int read(byte[] out, int off, int len) {
            if (len == 0) {
                return 0;
            }
            if (!b.hasRemaining()) {
                return -1;
            }
            int n = Math.min(len, b.remaining());
            b.get(out, off, n);
            return n;
        }
    }
}
