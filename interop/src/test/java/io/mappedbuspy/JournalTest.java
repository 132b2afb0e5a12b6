package io.mappedbuspy;

import io.mappedbuspy.internal.*;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;

import net.jpountz.lz4.LZ4FrameOutputStream.FLG.Bits;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The journal on the JVM side (docs/journal.md): a rolling writer's time index and {@link RollingBusReader#seekTime},
 * {@link RollingBusWriter#sync()}, and readers that go on from the hot directory into the archive (segments moved
 * there as the Python archiver moves them: the bytes as they were, zstd frames with their seek table, or one LZ4
 * frame of them), the next archived segment decompressed ahead.
 */
public final class JournalTest {
    private static final long SEGMENT = 4096;
    private static final int RECORD = 24;
    // Records in one segment of SEGMENT bytes: (4096 - 8) / 32.
    private static final int PER_SEGMENT = (int) ((SEGMENT - Layout.FIRST_RECORD_OFFSET) / Layout.slotSize(RECORD));

    @TempDir
    Path tmp;

    private static byte[] payload(int i) {
        return ("rec-" + i).getBytes(StandardCharsets.UTF_8);
    }

    // n records numbered from 0, with `pauseEvery` records between 2 ms pauses (entries at millisecond boundaries).
    private static List<Long> writeRecords(Path dir, int n, int pauseEvery) throws Exception {
        List<Long> times = new ArrayList<>();
        try (RollingBusWriter w = new RollingBusWriter(dir.toString(), SEGMENT, RECORD).setTimeIndex(true).open()) {
            for (int i = 0; i < n; i++) {
                if (pauseEvery > 0 && i % pauseEvery == 0) {
                    Thread.sleep(2);
                    times.add(System.currentTimeMillis() * 1_000_000L);
                }
                byte[] p = payload(i);
                assertTrue(w.write(p, 0, p.length));
            }
        }
        return times;
    }

    private static List<String> readAll(RollingBusReader r) throws IOException {
        List<String> out = new ArrayList<>();
        byte[] buf = new byte[RECORD];
        while (r.next()) {
            int len = r.readBuffer(buf, 0);
            out.add(new String(buf, 0, len, StandardCharsets.UTF_8));
        }
        return out;
    }

    private static List<String> expected(int from, int to) {
        List<String> out = new ArrayList<>();
        for (int i = from; i < to; i++) {
            out.add("rec-" + i);
        }
        return out;
    }

    @Test
    void writerAppendsATimeIndexThatSeekTimeUses() throws Exception {
        Path dir = tmp.resolve("bus");
        int n = PER_SEGMENT * 3;
        List<Long> pauses = writeRecords(dir, n, 20);
        // Every segment has an index, each entry on the record grid of its segment.
        RollingDir d = RollingDir.open(dir.toString(), false);
        for (long k : d.segments()) {
            if (d.limitOf(k) == Layout.FIRST_RECORD_OFFSET) {
                continue; // the spare: no record, no index
            }
            TimeIndex ix = d.timeIndex(k);
            assertFalse(ix.empty(), "segment " + k + " has entries");
        }
        try (RollingBusReader r = new RollingBusReader(dir.toString()).open()) {
            for (int j = 0; j < pauses.size(); j++) {
                // After the j-th pause (records from 20*j on were written after the clock read `pauses[j]`): a seek
                // to that time finds no record before 20*j - the records of the millisecond before it at most.
                r.seekTime(pauses.get(j));
                List<String> got = readAll(r);
                assertFalse(got.isEmpty());
                int first = Integer.parseInt(got.get(0).substring(4));
                assertTrue(first <= 20 * j, "seekTime(" + pauses.get(j) + ") starts at " + first + " > " + 20 * j);
                assertEquals(expected(first, n), got);
            }
            r.seekTime(System.currentTimeMillis() * 1_000_000L + 10_000_000_000L);
            assertFalse(r.next(), "a time after every record: at the end");
            r.seekTime(0);
            assertEquals(expected(0, n), readAll(r));
        }
    }

    @Test
    void aBusWithoutATimeIndexRefusesSeekTimeAndAnIndexedOneKeepsIt() throws Exception {
        Path dir = tmp.resolve("bus");
        try (RollingBusWriter w = new RollingBusWriter(dir.toString(), SEGMENT, RECORD).open()) {
            assertFalse(w.timeIndex());
            byte[] p = payload(0);
            w.write(p, 0, p.length);
        }
        assertFalse(Files.exists(dir.resolve(Layout.TIME_INDEX_DIR)), "no index kept: none written");
        try (RollingBusReader r = new RollingBusReader(dir.toString()).open()) {
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> r.seekTime(0));
            assertTrue(e.getMessage().contains("no time index"), e.getMessage());
        }
        try (RollingBusWriter w = new RollingBusWriter(dir.toString()).setTimeIndex(true).open()) {
            assertTrue(w.timeIndex());
        }
        try (RollingBusWriter w = new RollingBusWriter(dir.toString()).open()) {
            assertTrue(w.timeIndex(), "the bus's setting, from bus.meta");
        }
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> new RollingBusWriter(dir.toString()).setTimeIndex(false).open());
        assertTrue(e.getMessage().contains("time_index=1"), e.getMessage());
    }

    @Test
    void syncPoliciesAreChosenByName() throws Exception {
        assertEquals(SyncPolicy.INTERVAL, SyncPolicy.of("interval"));
        assertThrows(IllegalArgumentException.class, () -> SyncPolicy.of("always"));
        Path dir = tmp.resolve("bus");
        try (RollingBusWriter w = new RollingBusWriter(dir.toString(), SEGMENT, RECORD).setSync("segment")
                .open()) {
            for (int i = 0; i < PER_SEGMENT * 2; i++) {
                byte[] p = payload(i);
                w.write(p, 0, p.length);
            }
            w.sync();
            assertEquals(SyncPolicy.SEGMENT, w.syncPolicy());
        }
        assertThrows(IllegalStateException.class, () -> new RollingBusWriter(dir.toString()).sync());
    }

    // Segments 0..moved-1 of a bus moved to an archive as the Python archiver leaves them, bus.meta told.
    // `bytes` in zstd's seekable format (layout.py, "ZSTD SEEKABLE") of `frame`-byte frames with their checksums: what
    // the archivers write, in smaller frames (a 4 KiB segment in four).
    static byte[] seekable(byte[] bytes, int frame) throws IOException {
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        ZstdSeekTable.Builder table = new ZstdSeekTable.Builder();
        try (com.github.luben.zstd.ZstdCompressCtx ctx = new com.github.luben.zstd.ZstdCompressCtx()) {
            ctx.setLevel(Layout.ARCHIVE_ZSTD_LEVEL);
            ctx.setContentSize(true);
            ctx.setChecksum(true);
            for (int at = 0; at < bytes.length; at += frame) {
                byte[] piece = ctx.compress(java.util.Arrays.copyOfRange(bytes, at, Math.min(bytes.length, at + frame)));
                out.write(piece);
                table.add(piece.length, Math.min(frame, bytes.length - at));
            }
        }
        ZstdSeekTable t = table.build();
        java.nio.ByteBuffer tail = java.nio.ByteBuffer.allocate(ZstdSeekTable.encodedSize(t.frames().size()));
        t.write(tail);
        out.write(tail.array());
        return out.toByteArray();
    }

    private static Path archive(Path dir, int moved, ArchiveFiles.Compression how) throws Exception {
        Path arch = dir.resolveSibling("archive");
        Files.createDirectories(arch.resolve(Layout.TIME_INDEX_DIR));
        for (long k = 0; k < moved; k++) {
            Path hot = dir.resolve(Layout.segmentName(k));
            byte[] bytes = Files.readAllBytes(hot);
            Path to = arch.resolve(ArchiveFiles.name(k, how));
            try (OutputStream out = Files.newOutputStream(to)) {
                switch (how) {
                    case NONE -> out.write(bytes);
                    case ZSTD -> out.write(seekable(bytes, 1024));
                    case LZ4 -> {
                        try (net.jpountz.lz4.LZ4FrameOutputStream z = new net.jpountz.lz4.LZ4FrameOutputStream(out)) {
                            z.write(bytes);
                        }
                    }
                    default -> throw new AssertionError(how);
                }
            }
            Files.move(TimeIndex.path(dir, k), TimeIndex.path(arch, k));
            Files.delete(hot);
        }
        String keys = "archive_dir=" + arch.toAbsolutePath() + "\narchive_after=1\narchive_age_ms=0\narchive_compress="
                + how.text() + "\narchive_retain_segments=0\narchive_retain_bytes=0\narchive_retain_age_ms=0\n";
        Files.writeString(dir.resolve(Layout.META_FILE), keys, StandardOpenOption.APPEND);
        return arch;
    }

    @ParameterizedTest
    @ValueSource(strings = {"none", "zstd", "lz4"})
    void readerGoesOnFromTheArchiveIntoTheHotDirectory(String how) throws Exception {
        Path dir = tmp.resolve("bus");
        int n = PER_SEGMENT * 4 + 5;
        List<Long> pauses = writeRecords(dir, n, 40);
        archive(dir, 3, ArchiveFiles.Compression.of(how));
        try (RollingBusReader r = new RollingBusReader(dir.toString()).open()) {
            assertEquals(0, r.segment(), "the oldest segment is the archive's");
            assertEquals(expected(0, n), readAll(r));
        }
        // seekTime finds positions in archived segments through their moved indexes.
        try (RollingBusReader r = new RollingBusReader(dir.toString()).open()) {
            r.seekTime(pauses.get(2));
            List<String> got = readAll(r);
            int first = Integer.parseInt(got.get(0).substring(4));
            assertTrue(first <= 80 && first > 40 - PER_SEGMENT, "starts at " + first);
            assertEquals(expected(first, n), got);
        }
        // A named consumer whose position lies in the archive reads on from there.
        long at = Layout.joinPosition(1, Layout.FIRST_RECORD_OFFSET, SEGMENT);
        try (RollingBusReader r = new RollingBusReader(dir.toString()).setConsumer("c", at).open()) {
            assertEquals(expected(PER_SEGMENT, n), readAll(r));
        }
    }

    @Test
    void aWriterWhoseIndexFileWasUnlinkedAppendsItsEntryAgainByPath() throws Exception {
        // The move unlinks a segment's hot index; a writer that holds it open (it stalled between its write and its
        // append) appended to the unlinked file, and its entry was lost. It appends again by path now.
        Path dir = tmp.resolve("bus");
        try (RollingBusWriter w = new RollingBusWriter(dir.toString(), SEGMENT, RECORD).setTimeIndex(true).open()) {
            byte[] p = payload(0);
            assertTrue(w.write(p, 0, p.length)); // the index of segment 0 opened, its first entry
            Files.delete(TimeIndex.path(dir, 0)); // as a move unlinks it
            Thread.sleep(2); // a new millisecond: an entry
            p = payload(1);
            assertTrue(w.write(p, 0, p.length));
            TimeIndex again = TimeIndex.read(TimeIndex.path(dir, 0), w.busId(), 0, SEGMENT, RECORD, false);
            assertArrayEquals(new long[] {Layout.joinPosition(0, Layout.FIRST_RECORD_OFFSET + Layout.slotSize(RECORD),
                    SEGMENT)}, again.positions());
            Thread.sleep(2);
            p = payload(2);
            assertTrue(w.write(p, 0, p.length)); // to the new file, once
            assertEquals(2, TimeIndex.read(TimeIndex.path(dir, 0), w.busId(), 0, SEGMENT, RECORD, false)
                    .positions().length);
        }
    }

    @Test
    void retentionRemovesEachSegmentWithItsTimeIndex() throws Exception {
        // Retention removed segments and left their indexes: a bus kept one file per segment ever written.
        Path dir = tmp.resolve("bus");
        try (RollingBusWriter w = new RollingBusWriter(dir.toString(), SEGMENT, RECORD).setTimeIndex(true)
                .setRetention(2, 0, 0).open()) {
            for (int i = 0; i < PER_SEGMENT * 6; i++) {
                byte[] p = payload(i);
                assertTrue(w.write(p, 0, p.length));
            }
            RollingDir d = RollingDir.open(dir.toString(), false);
            long oldest = d.segments()[0];
            assertTrue(oldest >= 3, "retention removed segments, the oldest now " + oldest);
            for (long k = 0; k < oldest; k++) {
                assertFalse(Files.exists(TimeIndex.path(dir, k)), "segment " + k + "'s index");
            }
            assertTrue(Files.exists(TimeIndex.path(dir, oldest)));
        }
    }

    @Test
    void seekTimeReadsEntriesAStalledWriterAppendedAfterItsSegmentMoved() throws Exception {
        // A writer that stalled between its write and its index append, while its segment moved to the archive,
        // appends late: it makes the segment's hot index again, holding only its entry (made here as its appender
        // does). seekTime took that file alone, found no entry after it and skipped the whole segment.
        Path dir = tmp.resolve("bus");
        int n = PER_SEGMENT * 3 + 5;
        List<Long> pauses = writeRecords(dir, n, 20);
        archive(dir, 2, ArchiveFiles.Compression.NONE);
        RollingDir d = RollingDir.open(dir.toString(), false);
        long late = pauses.get(0) - 1_000_000L; // before every record: the stalled writer's clock read
        try (TimeIndex.Appender ap = TimeIndex.Appender.open(dir, d.meta().id(), 0, SEGMENT, RECORD, false)) {
            ap.append(late, Layout.joinPosition(0, Layout.FIRST_RECORD_OFFSET, SEGMENT));
        }
        assertTrue(Files.exists(TimeIndex.path(dir, 0)));
        try (RollingBusReader r = new RollingBusReader(dir.toString()).open()) {
            r.seekTime(pauses.get(1)); // records from 20 on were written after it: in segment 0
            List<String> got = readAll(r);
            int first = Integer.parseInt(got.get(0).substring(4));
            assertTrue(first <= 20 && first > 0, "seekTime(" + pauses.get(1) + ") starts at " + first);
            assertEquals(expected(first, n), got);
        }
        TimeIndex both = d.timeIndex(0);
        assertEquals(late, both.firstTime(), "the hot file's entry");
        assertTrue(both.times().length > 1, "and the archived file's");
    }

    @Test
    void aReaderDecompressesTheNextArchivedSegmentAheadAndNamesACorruptOneWhenItGetsThere() throws Exception {
        Path dir = tmp.resolve("bus");
        int n = PER_SEGMENT * 6 + 5;
        writeRecords(dir, n, 0);
        Path arch = archive(dir, 5, ArchiveFiles.Compression.ZSTD);
        // Every record across five archived segments, each but the first read ahead, and on into the hot ones.
        try (RollingBusReader r = new RollingBusReader(dir.toString()).open()) {
            assertEquals(expected(0, n), readAll(r));
        }
        // A read-ahead taken gives what an open gives; one dropped frees its buffers; neither is taken twice.
        ArchiveFiles.Archived two = ArchiveFiles.find(arch, 2);
        byte[] opened = new byte[(int) SEGMENT];
        try (MemoryMappedFile m = ArchiveFiles.open(two, SEGMENT, RECORD, false)) {
            m.getBytes(0, opened, 0, opened.length);
            m.closeAndUnmap();
        }
        boolean pool = Runtime.getRuntime().availableProcessors() > 1;
        java.util.Optional<ArchiveFiles.ReadAhead> ahead = ArchiveFiles.ReadAhead.start(two, SEGMENT, false);
        assertEquals(pool, ahead.isPresent(), "a read-ahead starts where there is a pool (more than one CPU)");
        if (ahead.isPresent()) {
            try (ArchiveFiles.ReadAhead a = ahead.get(); MemoryMappedFile m = a.take(SEGMENT, RECORD)) {
                byte[] got = new byte[(int) SEGMENT];
                m.getBytes(0, got, 0, got.length);
                m.closeAndUnmap();
                assertArrayEquals(opened, got);
                assertThrows(IllegalStateException.class, () -> a.take(SEGMENT, RECORD));
            }
            ArchiveFiles.ReadAhead.start(two, SEGMENT, false).orElseThrow().close();
        }
        // An LZ4 segment, or one zstd frame as the first archivers wrote: opened when needed, nothing ahead.
        Path one = arch.resolve("one").resolve(ArchiveFiles.name(2, ArchiveFiles.Compression.ZSTD));
        Files.createDirectories(one.getParent());
        Files.write(one, com.github.luben.zstd.Zstd.compress(opened, 1));
        assertTrue(ArchiveFiles.ReadAhead.start(new ArchiveFiles.Archived(2, one, ArchiveFiles.Compression.ZSTD),
                SEGMENT, false).isEmpty());
        // Segment 3 corrupt (a bit flipped in its second frame: its checksum): the records before it are read, the
        // error names its file when the reader gets there, not when segment 2 is opened and 3 read ahead.
        Path three = arch.resolve(ArchiveFiles.name(3, ArchiveFiles.Compression.ZSTD));
        byte[] bytes = Files.readAllBytes(three);
        ZstdSeekTable t = ZstdSeekTable.read(java.nio.ByteBuffer.wrap(bytes), SEGMENT, three).orElseThrow();
        ZstdSeekTable.Frame f = t.frames().get(1);
        bytes[(int) (f.srcOffset() + f.srcSize() / 2)] ^= 0x10;
        Files.write(three, bytes);
        try (RollingBusReader r = new RollingBusReader(dir.toString()).open()) {
            List<String> got = new ArrayList<>();
            byte[] buf = new byte[RECORD];
            CorruptBusException e = assertThrows(CorruptBusException.class, () -> {
                while (r.next()) {
                    int len = r.readBuffer(buf, 0);
                    got.add(new String(buf, 0, len, StandardCharsets.UTF_8));
                }
            });
            assertTrue(e.getMessage().contains(three.toString()) && e.getMessage().contains("zstd frame 1"),
                    e.getMessage());
            assertEquals(expected(0, PER_SEGMENT * 3), got);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"zstd", "lz4", "none"})
    void aTruncatedOrCorruptArchiveFileIsAClearError(String how) throws Exception {
        Path dir = tmp.resolve("bus");
        writeRecords(dir, PER_SEGMENT * 2 + 1, 0);
        Path arch = archive(dir, 1, ArchiveFiles.Compression.of(how));
        Path f = arch.resolve(ArchiveFiles.name(0, ArchiveFiles.Compression.of(how)));
        byte[] whole = Files.readAllBytes(f);
        Files.write(f, java.util.Arrays.copyOf(whole, whole.length / 2));
        CorruptBusException e = assertThrows(CorruptBusException.class,
                () -> new RollingBusReader(dir.toString()).open().next());
        assertTrue(e.getMessage().contains(f.toString()), e.getMessage());
        // Garbage of the right name: not a frame.
        byte[] junk = new byte[whole.length];
        java.util.Arrays.fill(junk, (byte) 0x5a);
        Files.write(f, junk);
        e = assertThrows(CorruptBusException.class, () -> new RollingBusReader(dir.toString()).open().next());
        assertTrue(e.getMessage().contains(f.toString()), e.getMessage());
    }

    @Test
    void aSegmentInTwoFormsInTheArchiveIsAnError() throws Exception {
        Path dir = tmp.resolve("bus");
        writeRecords(dir, PER_SEGMENT * 2 + 1, 0);
        Path arch = archive(dir, 1, ArchiveFiles.Compression.NONE);
        Files.copy(arch.resolve(ArchiveFiles.name(0, ArchiveFiles.Compression.NONE)),
                arch.resolve(ArchiveFiles.name(0, ArchiveFiles.Compression.ZSTD)));
        CorruptBusException e = assertThrows(CorruptBusException.class,
                () -> new RollingBusReader(dir.toString()).open());
        assertTrue(e.getMessage().contains("twice"), e.getMessage());
    }

    // A segment's bytes for the codec tests: a header with limit 0, then bytes that compress (a counter) or not
    // (seeded noise), so that frames hold both compressed and stored blocks.
    private static byte[] segmentBytes(long size) {
        byte[] b = new byte[(int) Layout.mappedSize(size)];
        java.util.Random noise = new java.util.Random(37);
        for (int i = Layout.FIRST_RECORD_OFFSET; i < b.length; i++) {
            b[i] = i < b.length / 2 ? (byte) (i / 7) : (byte) noise.nextInt();
        }
        return b;
    }

    // One LZ4 frame of `bytes` as lz4-java writes it: 64 KiB independent blocks, the flags given.
    private static byte[] lz4Frame(byte[] bytes, Bits... flags)
            throws IOException {
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        try (net.jpountz.lz4.LZ4FrameOutputStream z = new net.jpountz.lz4.LZ4FrameOutputStream(out,
                net.jpountz.lz4.LZ4FrameOutputStream.BLOCKSIZE.SIZE_64KB, bytes.length, flags)) {
            z.write(bytes);
        }
        return out.toByteArray();
    }

    // ArchiveFiles.open of `stored` as archived segment 0 of a bus of `size`-byte segments: its bytes.
    private byte[] openArchived(byte[] stored, ArchiveFiles.Compression how, long size) throws IOException {
        Path f = tmp.resolve(ArchiveFiles.name(0, how));
        Files.write(f, stored);
        try (MemoryMappedFile m = ArchiveFiles.open(new ArchiveFiles.Archived(0, f, how), size, RECORD, false)) {
            byte[] got = new byte[(int) Layout.mappedSize(size)];
            m.getBytes(0, got, 0, got.length);
            m.closeAndUnmap();
            return got;
        }
    }

    @Test
    void lz4FramesOfEveryShapeAreDecompressedExactly() throws Exception {
        long size = 256 << 10; // four 64 KiB blocks: compressed ones and stored ones
        byte[] seg = segmentBytes(size);
        for (var flags : List.of(
                new Bits[] {Bits.BLOCK_INDEPENDENCE,
                    Bits.CONTENT_SIZE},                         // the archivers' frames
                new Bits[] {Bits.BLOCK_INDEPENDENCE},
                new Bits[] {Bits.BLOCK_INDEPENDENCE,
                    Bits.BLOCK_CHECKSUM, Bits.CONTENT_CHECKSUM,
                    Bits.CONTENT_SIZE})) {
            assertTrue(java.util.Arrays.equals(seg, openArchived(lz4Frame(seg, flags), ArchiveFiles.Compression.LZ4,
                    size)), java.util.Arrays.toString(flags));
        }
        assertTrue(java.util.Arrays.equals(seg, openArchived(com.github.luben.zstd.Zstd.compress(seg, 3),
                ArchiveFiles.Compression.ZSTD, size)));
    }

    @Test
    void aCorruptOrForeignFrameIsNamed() throws Exception {
        long size = 256 << 10;
        byte[] seg = segmentBytes(size);
        Path lz4 = tmp.resolve(ArchiveFiles.name(0, ArchiveFiles.Compression.LZ4));
        Path zst = tmp.resolve(ArchiveFiles.name(0, ArchiveFiles.Compression.ZSTD));
        byte[] summed = lz4Frame(seg, Bits.BLOCK_INDEPENDENCE, Bits.BLOCK_CHECKSUM,
                Bits.CONTENT_CHECKSUM, Bits.CONTENT_SIZE);
        byte[] bad = summed.clone();
        bad[100] ^= 1; // inside the first block: its checksum no longer holds
        CorruptBusException e = assertThrows(CorruptBusException.class,
                () -> openArchived(bad, ArchiveFiles.Compression.LZ4, size));
        assertTrue(e.getMessage().contains(lz4.toString()) && e.getMessage().contains("checksum"), e.getMessage());
        byte[] badSum = summed.clone();
        badSum[badSum.length - 1] ^= 1; // the content's checksum
        e = assertThrows(CorruptBusException.class, () -> openArchived(badSum, ArchiveFiles.Compression.LZ4, size));
        assertTrue(e.getMessage().contains(lz4.toString()) && e.getMessage().contains("checksum"), e.getMessage());
        // A segment of another size (another bus's): named before decompressing, in both codecs.
        byte[] other = lz4Frame(segmentBytes(size * 2), Bits.BLOCK_INDEPENDENCE,
                Bits.CONTENT_SIZE);
        e = assertThrows(CorruptBusException.class, () -> openArchived(other, ArchiveFiles.Compression.LZ4, size));
        assertTrue(e.getMessage().contains(lz4.toString()) && e.getMessage().contains("another bus"), e.getMessage());
        byte[] otherZ = com.github.luben.zstd.Zstd.compress(segmentBytes(size * 2), 3);
        e = assertThrows(CorruptBusException.class, () -> openArchived(otherZ, ArchiveFiles.Compression.ZSTD, size));
        assertTrue(e.getMessage().contains(zst.toString()) && e.getMessage().contains("another bus"), e.getMessage());
        // Bytes after the frame; a frame cut short.
        byte[] z = com.github.luben.zstd.Zstd.compress(seg, 3);
        byte[] tail = java.util.Arrays.copyOf(z, z.length + 9);
        e = assertThrows(CorruptBusException.class, () -> openArchived(tail, ArchiveFiles.Compression.ZSTD, size));
        assertTrue(e.getMessage().contains(zst.toString()), e.getMessage());
        byte[] cut = java.util.Arrays.copyOf(summed, summed.length - 7);
        e = assertThrows(CorruptBusException.class, () -> openArchived(cut, ArchiveFiles.Compression.LZ4, size));
        assertTrue(e.getMessage().contains(lz4.toString()), e.getMessage());
        // More bytes than any compressed segment of this size: named before it is read.
        byte[] huge = new byte[(int) Layout.mappedSize(size) * 2];
        e = assertThrows(CorruptBusException.class, () -> openArchived(huge, ArchiveFiles.Compression.ZSTD, size));
        assertTrue(e.getMessage().contains(zst.toString()) && e.getMessage().contains("more than"), e.getMessage());
    }
}
