package io.mappedbuspy;

import io.mappedbuspy.internal.ArchiveFiles;
import io.mappedbuspy.internal.Archiver;
import io.mappedbuspy.internal.MemoryMappedFile;
import io.mappedbuspy.internal.ZstdSeekTable;

import java.io.InterruptedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ClosedByInterruptException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;
import java.util.stream.Collectors;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Archived zstd segments in zstd's seekable format (layout.py, "ZSTD SEEKABLE"; {@link ZstdSeekTable}): what the Java
 * archiver writes (a frame per {@link Layout#ARCHIVE_ZSTD_FRAME_BYTES} and their seek table) reads back through
 * {@link ArchiveFiles} and through the zstd command; a file of one frame (the first archivers') still reads; each rule
 * of the table, a truncated file and a corrupt frame are refused as CorruptBusException naming the file and what is
 * wrong, never an IndexOutOfBoundsException or a hang.
 */
public final class ZstdSeekTableTest {
    private static final int RECORD = 24;
    private static final Path ZSTD_CLI = Path.of("/usr/bin/zstd");
    private static final ArchiveFiles.Compression ZSTD = ArchiveFiles.Compression.ZSTD;
    // The segment the corruption cases start from: three frames (two full, one of 4 KiB).
    private static final long THREE_FRAMES = 2L * Layout.ARCHIVE_ZSTD_FRAME_BYTES + 4096;

    @TempDir
    Path tmp;

    // A segment's bytes: limit 0 (on every grid), noise in its first eighth (frames stored as they are, in part), then
    // record-like text (compressed frames: a flip in one makes zstd fail, not decode other bytes).
    private static byte[] segmentBytes(long segmentSize) {
        byte[] b = new byte[(int) Layout.mappedSize(segmentSize)];
        Random r = new Random(37);
        int noiseEnd = b.length / 8;
        byte[] noise = new byte[noiseEnd - Layout.FIRST_RECORD_OFFSET];
        r.nextBytes(noise);
        System.arraycopy(noise, 0, b, Layout.FIRST_RECORD_OFFSET, noise.length);
        StringBuilder text = new StringBuilder();
        for (int i = 0; text.length() < b.length - noiseEnd; i++) {
            text.append("rec-").append(i).append(" px=").append(100_000 + r.nextInt(5000)).append(" qty=")
                    .append(r.nextInt(1000)).append(i % 3 == 0 ? " side=BUY;" : " side=SELL;");
        }
        byte[] t = text.toString().getBytes(StandardCharsets.US_ASCII);
        System.arraycopy(t, 0, b, noiseEnd, b.length - noiseEnd);
        return b;
    }

    // Segment 0 of `segmentSize`-byte segments, of bytes `seg`, moved by the Java archiver (its ArchiveCompressor)
    // into a zstd archive of its own: the archived file.
    private Path archived(byte[] seg, long segmentSize) throws Exception {
        Path hot = Files.createDirectories(tmp.resolve("hot-" + segmentSize));
        Path arch = Files.createDirectories(tmp.resolve("archive-" + segmentSize));
        Path segment = hot.resolve(Layout.segmentName(0));
        Files.write(segment, seg);
        Files.setPosixFilePermissions(segment, PosixFilePermissions.fromString("rw-------"));
        ArchiveFiles.Config cfg = new ArchiveFiles.Config(arch.toAbsolutePath(), 1, 0, ZSTD, 0, 0, 0);
        Archiver.moveSegments(hot, cfg, new long[] {0}, segmentSize, false);
        Path file = arch.resolve(ArchiveFiles.name(0, ZSTD));
        assertTrue(Files.isRegularFile(file), file + " was not written");
        return file;
    }

    // ArchiveFiles.open of `file` as archived segment 0 of `segmentSize`-byte segments: its bytes.
    private static byte[] open(Path file, long segmentSize) throws Exception {
        try (MemoryMappedFile m = ArchiveFiles.open(new ArchiveFiles.Archived(0, file, ZSTD), segmentSize, RECORD,
                false)) {
            byte[] got = new byte[(int) m.size()];
            m.getBytes(0, got, 0, got.length);
            m.closeAndUnmap();
            return got;
        }
    }

    private static Optional<ZstdSeekTable> table(byte[] stored, long expected, Path path) throws Exception {
        return ZstdSeekTable.read(ByteBuffer.wrap(stored), expected, path);
    }

    @ParameterizedTest
    @ValueSource(longs = {4096, 1 << 20, THREE_FRAMES, 16 << 20})
    void theArchiverWritesFramesAndASeekTableThatReadBack(long segmentSize) throws Exception {
        byte[] seg = segmentBytes(segmentSize);
        Path file = archived(seg, segmentSize);
        byte[] stored = Files.readAllBytes(file);
        ZstdSeekTable t = table(stored, seg.length, file).orElseThrow();
        int piece = Layout.ARCHIVE_ZSTD_FRAME_BYTES;
        int n = (seg.length + piece - 1) / piece;
        assertEquals(segmentSize == 4096 ? 1 : segmentSize == 1 << 20 ? 8 : segmentSize == THREE_FRAMES ? 3 : 128, n);
        assertEquals(n, t.frames().size());
        long src = 0;
        for (int i = 0; i < n; i++) {
            ZstdSeekTable.Frame f = t.frames().get(i);
            assertEquals((long) i * piece, f.dstOffset(), "frame " + i);
            assertEquals(Math.min(piece, seg.length - i * piece), f.dstSize(), "frame " + i);
            assertEquals(src, f.srcOffset(), "frame " + i);
            assertTrue(f.srcSize() > 0, "frame " + i);
            src += f.srcSize();
        }
        assertEquals(src, t.compressedSize());
        assertEquals(seg.length, t.decompressedSize());
        assertEquals(stored.length, src + ZstdSeekTable.encodedSize(n));
        // Each frame alone is one zstd frame of its piece (with its content size: zstd-jni's one-shot call).
        for (ZstdSeekTable.Frame f : t.frames()) {
            byte[] one = Arrays.copyOfRange(stored, (int) f.srcOffset(), (int) f.srcOffset() + f.srcSize());
            assertEquals(f.dstSize(), com.github.luben.zstd.Zstd.decompressedSize(one));
            assertArrayEquals(Arrays.copyOfRange(seg, (int) f.dstOffset(), (int) f.dstOffset() + f.dstSize()),
                    com.github.luben.zstd.Zstd.decompress(one, f.dstSize()));
        }
        assertArrayEquals(seg, open(file, segmentSize));
        // The table the reader parses is the one a writer of the same frames writes.
        ZstdSeekTable.Builder again = new ZstdSeekTable.Builder();
        t.frames().forEach(f -> again.add(f.srcSize(), f.dstSize()));
        ByteBuffer encoded = ByteBuffer.allocate(ZstdSeekTable.encodedSize(n));
        again.build().write(encoded);
        assertFalse(encoded.hasRemaining());
        assertArrayEquals(Arrays.copyOfRange(stored, (int) src, stored.length), encoded.array());
    }

    @Test
    void theZstdCommandDecompressesTheSeekableFile() throws Exception {
        Assumptions.assumeTrue(Files.isExecutable(ZSTD_CLI), "needs the zstd command at " + ZSTD_CLI);
        byte[] seg = segmentBytes(THREE_FRAMES);
        Path file = archived(seg, THREE_FRAMES);
        Path out = tmp.resolve("cli.out");
        Process p = new ProcessBuilder(ZSTD_CLI.toString(), "-d", "-c", file.toString())
                .redirectOutput(out.toFile()).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        assertTrue(p.waitFor(30, TimeUnit.SECONDS), "zstd -d did not end");
        assertEquals(0, p.exitValue());
        assertArrayEquals(seg, Files.readAllBytes(out));
    }

    @Test
    void aFileOfOneFrameAsTheFirstArchiversWroteStillReads() throws Exception {
        for (long size : new long[] {4096, THREE_FRAMES}) {
            byte[] seg = segmentBytes(size);
            Path file = tmp.resolve(ArchiveFiles.name(0, ZSTD));
            byte[] one = com.github.luben.zstd.Zstd.compress(seg, Layout.ARCHIVE_ZSTD_LEVEL);
            Files.write(file, one);
            assertEquals(Optional.empty(), table(one, seg.length, file));
            assertArrayEquals(seg, open(file, size), "segment of " + size);
        }
    }

    @Test
    void framesAreDecompressedWithTheSharedDaemonPool() throws Exception {
        int cpus = Runtime.getRuntime().availableProcessors();
        Assumptions.assumeTrue(cpus > 1, "one CPU: no pool");
        long size = 16 << 20;
        byte[] seg = segmentBytes(size);
        Path file = archived(seg, size);
        for (int round = 0; round < 3; round++) {
            assertArrayEquals(seg, open(file, size));
        }
        List<Thread> pool = Thread.getAllStackTraces().keySet().stream()
                .filter(t -> t.getName().startsWith("mappedbus-archive-zstd-")).collect(Collectors.toList());
        assertTrue(!pool.isEmpty() && pool.size() <= Math.min(3, cpus - 1), pool.toString());
        assertTrue(pool.stream().allMatch(Thread::isDaemon), pool.toString());
    }

    @Test
    @Timeout(120)
    void anInterruptedReaderKeepsItsFlagAndItsBufferIsNotWrittenAfter() throws Exception {
        long size = 16 << 20;
        byte[] seg = segmentBytes(size);
        Path file = archived(seg, size);
        ArchiveFiles.Archived a = new ArchiveFiles.Archived(0, file, ZSTD);
        AtomicReference<Throwable> wrong = new AtomicReference<>();
        AtomicInteger interruptedWaits = new AtomicInteger();
        AtomicBoolean done = new AtomicBoolean();
        // The reader opens the segment again and again while it is interrupted at random times: each open succeeds,
        // or fails as an interrupted read (NIO's ClosedByInterruptException, or the wait for the pool's frames),
        // with the interrupt flag set; the buffer freed on a failure is never written after (the JVM would crash).
        Thread reader = new Thread(() -> {
            for (int i = 0; i < 300 && wrong.get() == null; i++) {
                try {
                    ArchiveFiles.open(a, size, RECORD, false).closeAndUnmap();
                } catch (InterruptedIOException | ClosedByInterruptException e) {
                    if (e instanceof InterruptedIOException && e.getMessage().contains("zstd frames")) {
                        interruptedWaits.incrementAndGet();
                    }
                    if (!Thread.currentThread().isInterrupted()) {
                        wrong.set(new AssertionError("interrupt flag cleared", e));
                    }
                } catch (Throwable e) {
                    wrong.set(e);
                }
                Thread.interrupted();
            }
            done.set(true);
        });
        reader.start();
        Random r = new Random(7);
        while (!done.get()) {
            LockSupport.parkNanos(r.nextInt(8_000_000));
            reader.interrupt();
        }
        reader.join();
        if (wrong.get() != null) {
            throw new AssertionError("an open failed otherwise (" + interruptedWaits + " interrupted waits)",
                    wrong.get());
        }
        // An interrupt during the reader's share is seen by its wait for the pool's (none on one CPU: no wait).
        assertTrue(Runtime.getRuntime().availableProcessors() == 1 || interruptedWaits.get() > 0,
                "no open was interrupted while it waited for the pool's frames");
        assertArrayEquals(seg, open(file, size));
    }

    // `stored` as archived segment 0 of THREE_FRAMES-byte segments: refused, the message naming the file and `what`.
    private String refused(byte[] stored, long segmentSize, String what) throws Exception {
        Path file = tmp.resolve("refused").resolve(ArchiveFiles.name(0, ZSTD));
        Files.createDirectories(file.getParent());
        Files.write(file, stored);
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-------"));
        CorruptBusException e = assertThrows(CorruptBusException.class, () -> open(file, segmentSize));
        assertTrue(e.getMessage().contains(file.toString()) && e.getMessage().contains(what), e.getMessage());
        return e.getMessage();
    }

    // A copy of `stored` changed by `change` (a little-endian buffer over the copy).
    private static byte[] changed(byte[] stored, Consumer<ByteBuffer> change) {
        byte[] c = stored.clone();
        change.accept(ByteBuffer.wrap(c).order(ByteOrder.LITTLE_ENDIAN));
        return c;
    }

    @Test
    @Timeout(60)
    void eachRuleOfTheSeekTableIsRefusedByName() throws Exception {
        byte[] stored = Files.readAllBytes(archived(segmentBytes(THREE_FRAMES), THREE_FRAMES));
        int len = stored.length;
        int start = len - ZstdSeekTable.encodedSize(3);  // the table's skippable frame
        int entries = start + 8;                          // frame i: +8 i compressed, +8 i + 4 decompressed
        int count = len - Layout.ARCHIVE_ZSTD_SEEK_FOOTER_SIZE;
        int descriptor = count + 4;
        String table = "seek table";
        assertTrue(refused(changed(stored, b -> b.putInt(start, 0x184D2A50)), THREE_FRAMES, "skippable magic")
                .contains(table));
        assertTrue(refused(changed(stored, b -> b.putInt(start + 4, 3 * 8 + 9 + 8)), THREE_FRAMES, "says it is 41")
                .contains(table));
        assertTrue(refused(changed(stored, b -> b.put(descriptor, (byte) 0x80)), THREE_FRAMES, "descriptor 0x80")
                .contains(table));
        assertTrue(refused(changed(stored, b -> b.putInt(count, 0)), THREE_FRAMES, "lists 0 frames")
                .contains(table));
        assertTrue(refused(changed(stored, b -> b.putInt(count, Layout.ARCHIVE_ZSTD_MAX_FRAMES + 1)), THREE_FRAMES,
                "lists " + (Layout.ARCHIVE_ZSTD_MAX_FRAMES + 1) + " frames").contains(table));
        assertTrue(refused(changed(stored, b -> b.putInt(count, -1)), THREE_FRAMES, "lists 4294967295 frames")
                .contains(table));
        assertTrue(refused(changed(stored, b -> b.putInt(entries + 8, 0)), THREE_FRAMES, "frame 1 a size of 0")
                .contains(table));
        assertTrue(refused(changed(stored, b -> b.putInt(entries + 12, 0)), THREE_FRAMES, "frame 1 a size of 0")
                .contains(table));
        assertTrue(refused(changed(stored, b -> b.putInt(entries, b.getInt(entries) + 1)), THREE_FRAMES,
                "bytes of frames").contains(table));
        assertTrue(refused(changed(stored, b -> b.putInt(entries + 20, b.getInt(entries + 20) + 1)), THREE_FRAMES,
                "decompresses to " + (THREE_FRAMES + 1)).contains(table));
        // Sizes 4 GiB - 1 (unsigned): no overflow, no negative size.
        assertTrue(refused(changed(stored, b -> b.putInt(entries + 4, -1)), THREE_FRAMES, "decompresses to")
                .contains(table));
        // Sums right, one frame's share wrong: its header's content size names it before it is decompressed.
        refused(changed(stored, b -> {
            b.putInt(entries + 4, b.getInt(entries + 4) - 1);
            b.putInt(entries + 12, b.getInt(entries + 12) + 1);
        }), THREE_FRAMES, "zstd frame 0 of 3 holds " + Layout.ARCHIVE_ZSTD_FRAME_BYTES + " bytes, its seek table says "
                + (Layout.ARCHIVE_ZSTD_FRAME_BYTES - 1));
        // A segment of another size (another bus's): the table's sum says so.
        refused(stored, THREE_FRAMES + 4096, "not a segment's " + (THREE_FRAMES + 4096));
    }

    @Test
    @Timeout(60)
    void aTableClaimingMoreBytesThanTheFileIsRefusedNotReadOutside() throws Exception {
        byte[] small = Files.readAllBytes(archived(segmentBytes(4096), 4096));
        int count = small.length - Layout.ARCHIVE_ZSTD_SEEK_FOOTER_SIZE;
        assertTrue(refused(changed(small, b -> b.putInt(count, Layout.ARCHIVE_ZSTD_MAX_FRAMES)), 4096,
                "of " + Layout.ARCHIVE_ZSTD_MAX_FRAMES + " frames needs").contains("seek table"));
        // The table alone, its frames gone.
        byte[] tableOnly = Arrays.copyOfRange(small, small.length - ZstdSeekTable.encodedSize(1), small.length);
        refused(tableOnly, 4096, "the file has 0 before the table");
        // The seekable magic alone, and fewer bytes than a footer: not a table, and not a zstd frame either.
        refused(Arrays.copyOfRange(small, small.length - 4, small.length), 4096, "zstd");
        refused(Arrays.copyOfRange(small, small.length - 8, small.length), 4096, "zstd");
    }

    @Test
    @Timeout(60)
    void aTruncatedFileIsRefused() throws Exception {
        byte[] stored = Files.readAllBytes(archived(segmentBytes(THREE_FRAMES), THREE_FRAMES));
        for (int cut : new int[] {1, 3, 4, 9, ZstdSeekTable.encodedSize(3), ZstdSeekTable.encodedSize(3) + 100}) {
            refused(Arrays.copyOf(stored, stored.length - cut), THREE_FRAMES, "truncated");
        }
    }

    @Test
    @Timeout(60)
    void aCorruptFrameIsRefusedNamingTheFirstByFrameOrder() throws Exception {
        byte[] seg = segmentBytes(THREE_FRAMES);
        byte[] stored = Files.readAllBytes(archived(seg, THREE_FRAMES));
        ZstdSeekTable t = table(stored, THREE_FRAMES, null).orElseThrow();
        ZstdSeekTable.Frame one = t.frames().get(1);
        ZstdSeekTable.Frame two = t.frames().get(2);
        // The block in the middle of frame 1 made one of zstd's reserved type: zstd refuses it, whatever its bytes.
        byte[] bad = stored.clone();
        breakMiddleBlock(bad, one);
        refused(bad, THREE_FRAMES, "zstd frame 1 of 3");
        // Frames 1 and 2 both corrupt: frame 1 is named, whichever thread failed first (rounds: the pool races).
        breakMiddleBlock(bad, two);
        for (int round = 0; round < 20; round++) {
            refused(bad, THREE_FRAMES, "zstd frame 1 of 3");
        }
        // Its header's descriptor changed (a reserved bit set): named before anything is decompressed.
        byte[] header = stored.clone();
        header[(int) one.srcOffset() + 4] ^= 0x7F;
        refused(header, THREE_FRAMES, "zstd frame 1 of 3");
        // 16 bytes flipped in the middle of frame 1: refused naming it (each frame carries its content checksum,
        // layout.py: a flip in a block's literals that decodes to other bytes of the same length is caught too).
        byte[] flipped = stored.clone();
        int mid = (int) (one.srcOffset() + one.srcSize() / 2);
        for (int i = mid; i < mid + 16; i++) {
            flipped[i] ^= (byte) 0xFF;
        }
        refused(flipped, THREE_FRAMES, "zstd frame 1 of 3");
        // One bit flipped anywhere in frame 1's blocks, 40 places: each refused naming frame 1.
        java.util.Random rnd = new java.util.Random(5);
        for (int round = 0; round < 40; round++) {
            byte[] bit = stored.clone();
            int at = (int) one.srcOffset() + 16 + rnd.nextInt(one.srcSize() - 16);
            bit[at] ^= (byte) (1 << rnd.nextInt(8));
            refused(bit, THREE_FRAMES, "zstd frame 1 of 3");
        }
    }

    // Makes the block of frame `f` that holds the frame's middle byte a block of zstd's reserved type (3), walking the
    // frame's header and block headers (RFC 8878: a 3-byte little-endian block header, bit 0 last, bits 1-2 type, the
    // rest its size).
    private static void breakMiddleBlock(byte[] b, ZstdSeekTable.Frame f) {
        int pos = (int) f.srcOffset();
        assertEquals(0xFD2FB528, ByteBuffer.wrap(b, pos, 4).order(ByteOrder.LITTLE_ENDIAN).getInt(pos));
        int fhd = b[pos + 4] & 0xFF;
        boolean single = (fhd & 0x20) != 0;
        int fcs = new int[] {single ? 1 : 0, 2, 4, 8}[fhd >>> 6];
        int dictId = new int[] {0, 1, 2, 4}[fhd & 3];
        pos += 5 + (single ? 0 : 1) + dictId + fcs;
        long mid = f.srcOffset() + f.srcSize() / 2;
        for (;;) {
            int h = (b[pos] & 0xFF) | (b[pos + 1] & 0xFF) << 8 | (b[pos + 2] & 0xFF) << 16;
            int type = (h >>> 1) & 3;
            int size = type == 1 ? 1 : h >>> 3;
            if (pos + 3 + size > mid || (h & 1) != 0) {
                b[pos] |= 0b110;
                return;
            }
            pos += 3 + size;
        }
    }
}
