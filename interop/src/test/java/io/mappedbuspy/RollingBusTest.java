package io.mappedbuspy;

import java.io.IOException;
import java.lang.reflect.Field;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.api.io.TempDir;

import static io.mappedbuspy.Buses.assertContains;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import io.mappedbuspy.internal.BusMeta;
import io.mappedbuspy.internal.MemoryMappedFile;
import io.mappedbuspy.internal.RollingDir;

/** The rolling bus: rolling, following, retention, gaps, identity and size checks. */
public final class RollingBusTest {
    /** Scratch directory, new for each test and deleted after it. */
    @TempDir
    Path tmp;

    // 8-byte records (slot 16): 255 per 4096-byte segment.
    private static final int REC = 8;
    private static final long SEG = 4096;
    private static final long PER_SEG = (SEG - 8) / 16;
    // A quarter of a segment's records: past the writer's first look after a roll (every PER_SEG / 8
    // writes), which applies retention, and before the middle, where it makes the spare.
    private static final long QUARTER = PER_SEG / 4;

    private static byte[] rec(int writer, int i) {
        return ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putInt(writer).putInt(i).array();
    }

    private static void writeN(RollingBusWriter w, int writer, int from, int to) throws IOException {
        for (int i = from; i < to; i++) {
            assertTrue(w.write(rec(writer, i), 0, 8), "committed");
        }
    }

    /** Polls next() until it returns true, for at most timeoutMs. */
    private static boolean await(RollingBusReader r, long timeoutMs) throws IOException {
        long end = System.nanoTime() + timeoutMs * 1_000_000L;
        while (System.nanoTime() < end) {
            if (r.next()) {
                return true;
            }
            Thread.onSpinWait();
        }
        return false;
    }

    private static int[] readRec(RollingBusReader r) throws IOException {
        byte[] b = new byte[8];
        assertEquals(8, r.readBuffer(b, 0), "length");
        ByteBuffer bb = ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
        return new int[] {bb.getInt(), bb.getInt()};
    }

    private static long[] segments(String dir) throws IOException {
        try (var s = Files.list(Path.of(dir))) {
            return s.map(p -> Layout.segmentIndex(p.getFileName().toString())).filter(i -> i >= 0).sorted()
                    .mapToLong(Long::longValue).toArray();
        }
    }

    private static long pos(long seg, long k) {
        return seg * SEG + 8 + k * 16;
    }

    /** Records fill segment 0, then go to segment 1...; the reader follows in order with global positions. */
    @Test
    public void writerRollsAndReaderFollowsWithGlobalPositions() throws Exception {
        String dir = tmp.resolve("roll").toString();
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).open();
             RollingBusReader r = new RollingBusReader(dir, SEG, REC).open()) {
            assertFalse(r.next(), "empty bus");
            int n = (int) (3 * PER_SEG + 10);
            writeN(w, 1, 0, n);
            assertEquals(3, w.segment(), "writer's segment");
            assertEquals("[0, 1, 2, 3]", Arrays.toString(segments(dir)), "segments");
            for (int i = 0; i < n; i++) {
                assertTrue(await(r, 5000), "record " + i);
                assertEquals(pos(i / PER_SEG, i % PER_SEG), r.recordPosition(), "position of " + i);
                assertEquals(i, readRec(r)[1], "payload of " + i);
            }
            assertFalse(r.next(), "caught up");
            assertEquals(pos(3, 10), r.position(), "position after the last");
            // Following live across a boundary the writer crosses after the reader caught up.
            writeN(w, 1, n, (int) (4 * PER_SEG + 1));
            for (int i = n; i < 4 * PER_SEG + 1; i++) {
                assertTrue(await(r, 5000), "live record " + i);
                assertEquals(i, readRec(r)[1], "live payload");
            }
            assertEquals(4, r.segment(), "reader's segment");
            assertEquals(w.busId(), r.busId(), "same id");
            assertEquals(0, r.lost(), "no loss");
        }
    }

    /**
     * A roll whose next segment the helper thread has not started making (busy, or not scheduled: writers and readers
     * spinning on every core) makes it on the writing thread instead of waiting for the helper; here the helper is
     * held by a step of the test's until the end.
     */
    @Test
    public void aRollMakesTheSegmentItselfWhenTheHelperHasNotStartedIt() throws Exception {
        String dir = tmp.resolve("held").toString();
        CountDownLatch hold = new CountDownLatch(1);
        RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).open();
        try (RollingBusReader r = new RollingBusReader(dir, SEG, REC).open()) {
            writeN(w, 1, 0, (int) PER_SEG + 1); // into segment 1, made as the spare: the helper exists
            helperOf(w).execute(() -> {
                try {
                    hold.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            assertTimeoutPreemptively(Duration.ofSeconds(20),
                    () -> writeN(w, 1, (int) PER_SEG + 1, (int) (3 * PER_SEG + 1)), "rolls with the helper held");
            assertEquals(3, w.segment(), "rolled twice");
            for (int i = 0; i < 3 * PER_SEG + 1; i++) {
                assertTrue(await(r, 5000), "record " + i);
                assertEquals(i, readRec(r)[1], "payload of " + i);
            }
        } finally {
            hold.countDown();
            w.close(); // waits for the helper's queued steps
        }
    }

    private static ExecutorService helperOf(RollingBusWriter w) throws ReflectiveOperationException {
        Field segments = RollingBusWriter.class.getDeclaredField("segments");
        segments.setAccessible(true);
        Field helper = SegmentRoller.class.getDeclaredField("helper");
        helper.setAccessible(true);
        return (ExecutorService) helper.get(segments.get(w));
    }

    /**
     * The reader's calls say what state it is in: not open, no record current (before the first next(), and while
     * it waits for a segment not made yet), closed; a record read at a segment's end stays readable until next().
     */
    @Test
    public void aReadersCallsNameItsStateAcrossSegmentsAndAfterClose() throws Exception {
        String dir = tmp.resolve("state").toString();
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).open()) {
            RollingBusReader r = new RollingBusReader(dir, SEG, REC);
            assertContains(assertThrows(IllegalStateException.class, r::next).getMessage(),
                    "rolling reader for " + dir + " is not open");
            r.open();
            assertContains(assertThrows(IllegalStateException.class, () -> readRec(r)).getMessage(),
                    "no current record");
            writeN(w, 1, 0, (int) PER_SEG);
            for (int i = 0; i < PER_SEG; i++) {
                assertTrue(await(r, 5000), "record " + i);
            }
            assertEquals(PER_SEG - 1, readRec(r)[1], "the segment's last record, current");
            assertFalse(r.next(), "segment 1 not made yet: the reader waits for it");
            assertContains(assertThrows(IllegalStateException.class, () -> readRec(r)).getMessage(),
                    "no current record");
            writeN(w, 1, (int) PER_SEG, (int) PER_SEG + 1);
            assertTrue(await(r, 5000), "the first record of segment 1");
            assertEquals(PER_SEG, readRec(r)[1], "its payload");
            r.close();
            String closed = "rolling reader for " + dir + " is closed"; // the bus's state, not its segment's
            assertContains(assertThrows(IllegalStateException.class, r::next).getMessage(), closed);
            assertContains(assertThrows(IllegalStateException.class, () -> readRec(r)).getMessage(), closed);
        }
    }

    /**
     * Segments that records fill to their last byte (8 + 256 slots of 16): the end of segment 0 is position 4104, which
     * is also (1, 0) by plain division; seek and commit take it as segment 0's end (RollingLayout.locate), as Python
     * gives it, and go on at the first record of segment 1.
     */
    @Test
    public void theEndOfAnExactlyFilledSegmentIsAPosition() throws Exception {
        String dir = tmp.resolve("exact").toString();
        long seg = 8 + 256 * 16;
        try (RollingBusWriter w = new RollingBusWriter(dir, seg, REC).open();
             RollingBusReader r = new RollingBusReader(dir, seg, REC).setConsumer("c").open()) {
            writeN(w, 1, 0, 256 + 3);
            r.seek(seg);
            assertTrue(await(r, 5000), "a record after the end of segment 0");
            assertEquals(seg + 8, r.recordPosition(), "the first record of segment 1");
            assertEquals(256, readRec(r)[1], "its payload");
            r.commit(seg);
            assertEquals(seg + 8, Consumers.consumers(dir).get(0).position(), "committed as the next one's first");
            assertEquals(3, Consumers.consumers(dir).get(0).lag(), "3 records behind");
            assertThrows(IllegalArgumentException.class, () -> r.seek(seg + 1), "off the grid");
        }
    }

    /**
     * A reader and a writer that pass through many segments keep only a few mapped: each segment left behind is
     * unmapped at once, not when a garbage collection happens (which a process allocating little may never see),
     * so their memory and the tmpfs pages of segments retention removed stay bounded.
     */
    @Test
    public void segmentsLeftBehindAreUnmappedAtOnce() throws Exception {
        String dir = tmp.resolve("unmap").toString();
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).setRetention(2, 0, 0).open();
             RollingBusReader r = new RollingBusReader(dir, SEG, REC).open()) {
            int n = (int) (20 * PER_SEG);
            for (int i = 0; i < n; i++) {
                assertTrue(w.write(rec(1, i), 0, 8), "committed");
                assertTrue(await(r, 5000), "record " + i);
            }
            assertTrue(w.segment() >= 19, "the writer went through 20 segments");
            // The writer unmaps a segment it left on its helper thread (SegmentRoller.retire): at once, but not
            // synchronously, so on a loaded machine the last ones may take a moment; the collector never runs here.
            List<String> mapped = mappedSegments(dir);
            long deadline = System.nanoTime() + 5_000_000_000L;
            while (mapped.size() > 3 && System.nanoTime() < deadline) {
                Thread.sleep(10);
                mapped = mappedSegments(dir);
            }
            // The writer's current and spare segments, the reader's current one.
            assertTrue(mapped.size() <= 3, mapped.size() + " segment files of " + dir + " still mapped: " + mapped);
        }
    }

    // The segment files of `dir` this process maps (" (deleted)" marks one retention removed): /proc/self/maps's
    // path column, one entry per file.
    private static List<String> mappedSegments(String dir) throws IOException {
        try (var lines = Files.lines(Path.of("/proc/self/maps"))) {
            return lines.map(l -> l.split("\\s+", 6)).filter(f -> f.length == 6 && f[5].startsWith(dir + "/"))
                    .map(f -> f[5]).filter(p -> p.matches(".*/\\d{20}\\.bus( \\(deleted\\))?")).distinct().toList();
        }
    }

    /** The directory is 0700, bus.meta describes the bus, segments are complete 0600 files, no temporaries left. */
    @Test
    public void busLayoutOnDiskFollowsTheContract() throws Exception {
        String dir = tmp.resolve("layout").toString();
        try (RollingBusWriter w = new RollingBusWriter(dir, 5000, REC).setRetention(7, 0, 0).open()) {
            writeN(w, 1, 0, 400); // 312 per segment: two segments
            Path d = Path.of(dir);
            assertEquals("rwx------",
                    PosixFilePermissions.toString(Files.getPosixFilePermissions(d, LinkOption.NOFOLLOW_LINKS)), "dir mode");
            BusMeta m = BusMeta.read(d.resolve("bus.meta"), false);
            assertEquals(BusKind.ROLLING, m.kind(), "kind");
            assertEquals(5000, m.segmentSize(), "segment size");
            assertEquals(REC, m.recordSize(), "record size");
            assertEquals(7, m.retainSegments(), "retention");
            assertEquals(w.busId(), m.id(), "id");
            Path s1 = d.resolve("00000000000000000001.bus");
            assertEquals("rw-------",
                    PosixFilePermissions.toString(Files.getPosixFilePermissions(s1, LinkOption.NOFOLLOW_LINKS)), "segment mode");
            assertEquals(8192, Files.size(s1), "segment length: the mapped size");
            try (var s = Files.list(d)) {
                assertEquals(0, s.filter(p -> p.getFileName().toString().startsWith(".tmp-")).count(), "no temporaries");
            }
            // Segment 0 is full: its limit ran past the last record that fits.
            try (MemoryMappedFile mem = new MemoryMappedFile(d.resolve("00000000000000000000.bus").toString(), 5000)) {
                assertTrue(mem.getLongAcquire(0) + 16 > 5000, "segment 0 full");
            }
        }
    }

    /** A second writer opens at the newest segment and continues the same order. */
    @Test
    public void secondWriterJoinsAtTheNewestSegment() throws Exception {
        String dir = tmp.resolve("join").toString();
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).open()) {
            writeN(w, 1, 0, (int) (2 * PER_SEG + 5));
        }
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).open();
             RollingBusReader r = new RollingBusReader(dir, SEG, REC).open()) {
            assertEquals(2, w.segment(), "opened at the newest");
            writeN(w, 2, 0, 3);
            r.seek(pos(2, 5));
            assertTrue(r.next(), "a record");
            assertEquals(2, readRec(r)[0], "after the first writer's");
            assertEquals(pos(2, 5), r.recordPosition(), "position");
        }
    }

    /**
     * Several writer threads race across many segment boundaries (a few records per segment): every record
     * arrives once, each writer's in its own order, positions strictly increasing, none spanning segments.
     */
    @ParameterizedTest(name = "segment {0} bytes, {1} writers x {2}")
    @CsvSource({
        "168, 4, 250",  // 10 records per segment: a boundary every few writes
        "4096, 4, 255", // one segment's worth each
    })
    public void racingWritersAtBoundariesLoseAndDuplicateNothing(long seg, int writers, int each) throws Exception {
        String dir = tmp.resolve("race").toString();
        new RollingBusWriter(dir, seg, REC).open().close();
        CountDownLatch start = new CountDownLatch(1);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < writers; t++) {
            int id = t;
            Thread th = new Thread(() -> {
                try (RollingBusWriter w = new RollingBusWriter(dir, seg, REC).open()) {
                    start.await();
                    for (int i = 0; i < each; i++) {
                        if (!w.write(rec(id, i), 0, 8)) {
                            throw new AssertionError("writer " + id + " record " + i + " rolled back");
                        }
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            });
            th.start();
            threads.add(th);
        }
        int[] next = new int[writers];
        long total = (long) writers * each;
        try (RollingBusReader r = new RollingBusReader(dir, seg, REC).setTimeout(30_000).open()) {
            start.countDown();
            long last = -1;
            for (long n = 0; n < total; n++) {
                if (!await(r, 30_000)) {
                    fail("record " + n + " of " + total + " never came; failure: " + failure.get());
                }
                long p = r.recordPosition();
                assertTrue(p > last, "positions increase");
                assertTrue(p % seg + 16 <= seg, "record inside its segment");
                last = p;
                int[] x = readRec(r);
                assertEquals(next[x[0]], x[1], "writer " + x[0] + " in order");
                next[x[0]]++;
            }
            for (Thread th : threads) {
                th.join(30_000);
            }
            assertEquals(null, failure.get(), "failure");
            assertFalse(r.next(), "nothing more");
            assertEquals(0, r.rolledBackSkipped(), "no rollbacks");
        }
    }

    /** Retention by count keeps N complete segments of history besides the current one; the creator of a
     * segment applies it. */
    @Test
    public void retentionBySegmentCountKeepsTheNewest() throws Exception {
        String dir = tmp.resolve("keep3").toString();
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).setRetention(3, 0, 0).open()) {
            writeN(w, 1, 0, (int) (2 * PER_SEG + 1));
            assertEquals("[0, 1, 2]", Arrays.toString(segments(dir)), "up to 3 kept");
            // A quarter of segment 6: the writer's look after the roll applied retention, no spare yet.
            writeN(w, 1, 0, (int) (4 * PER_SEG + QUARTER));
            assertEquals("[3, 4, 5, 6]", Arrays.toString(segments(dir)), "3 of history and the current");
        }
    }

    /** Retention by bytes counts every segment of history as segmentSize bytes. */
    @Test
    public void retentionByBytesCountsSegmentSizes() throws Exception {
        String dir = tmp.resolve("bytes").toString();
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).setRetention(0, 2 * SEG + 1, 0).open()) {
            writeN(w, 1, 0, (int) (5 * PER_SEG + QUARTER));
            assertEquals("[3, 4, 5]", Arrays.toString(segments(dir)), "two segments of history fit in 2*SEG+1 bytes");
        }
        String small = tmp.resolve("bytes-small").toString();
        try (RollingBusWriter w = new RollingBusWriter(small, SEG, REC).setRetention(0, 100, 0).open()) {
            // Past the middle of segment 2 (a look every PER_SEG / 8 writes): its spare 3 is being made (off the
            // writing thread), then linked by a later look.
            int n = (int) (2 * PER_SEG + PER_SEG / 2 + 40);
            writeN(w, 1, 0, n);
            for (long end = System.nanoTime() + 5_000_000_000L; !Files.exists(Path.of(small, Layout.segmentName(3)))
                    && System.nanoTime() < end; n++) {
                Thread.sleep(1);
                writeN(w, 1, n, n + 1);
            }
            assertEquals("[2, 3]",
                    Arrays.toString(segments(small)), "no history fits: never the current segment nor the spare");
        }
    }

    /** Retention by age removes segment k once it was full (rolled out of) longer ago than the age. */
    @Test
    public void retentionByAgeRemovesSegmentsWhoseSuccessorIsOld() throws Exception {
        String dir = tmp.resolve("age").toString();
        Path d = Path.of(dir);
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).setRetention(0, 0, 60_000).open()) {
            writeN(w, 1, 0, (int) (3 * PER_SEG + 1));
            assertEquals("[0, 1, 2, 3]", Arrays.toString(segments(dir)), "all young: all kept");
            // Segments 0 and 1 as if full two minutes ago.
            FileTime old = FileTime.fromMillis(System.currentTimeMillis() - 120_000);
            Files.setLastModifiedTime(d.resolve(Layout.segmentName(0)), old);
            Files.setLastModifiedTime(d.resolve(Layout.segmentName(1)), old);
            writeN(w, 1, 0, (int) PER_SEG); // makes segment 4
            assertEquals("[2, 3, 4]",
                    Arrays.toString(segments(dir)), "0 and 1 removed, 2 kept (full just now)");
        }
    }

    /** A reader left behind gets BusGapException with the exact lost range; nothing is delivered twice. */
    @Test
    public void slowReaderGetsTheExactGap() throws Exception {
        String dir = tmp.resolve("gap").toString();
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).setRetention(2, 0, 0).open();
             RollingBusReader r = new RollingBusReader(dir, SEG, REC).open()) {
            writeN(w, 1, 0, 3);
            assertTrue(r.next(), "first");
            writeN(w, 1, 3, (int) (4 * PER_SEG + QUARTER)); // segments 0..4: history 2, 3 and the current 4
            assertEquals("[2, 3, 4]", Arrays.toString(segments(dir)), "retained");
            // The rest of segment 0 is still mapped by the reader and readable.
            for (int i = 1; i < PER_SEG; i++) {
                assertTrue(r.next(), "mapped record " + i);
                assertEquals(i, readRec(r)[1], "payload");
            }
            BusGapException e = assertThrows(BusGapException.class, () -> await(r, 5000));
            assertEquals(pos(1, 0), e.lostFrom(), "lost from");
            assertEquals(pos(2, 0), e.lostTo(), "lost to");
            assertEquals(PER_SEG, e.lost(), "lost slots");
            assertContains(e.getMessage(), dir);
        }
    }

    /** With failOnGap false the reader continues at the oldest retained record and lost() counts the slots. */
    @Test
    public void gapSkippedCountsLostSlotsAndContinues() throws Exception {
        String dir = tmp.resolve("skip").toString();
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).setRetention(2, 0, 0).open();
             RollingBusReader r = new RollingBusReader(dir, SEG, REC).setFailOnGap(false).open()) {
            writeN(w, 1, 0, (int) PER_SEG); // all of segment 0
            for (int i = 0; i < PER_SEG; i++) {
                assertTrue(r.next(), "segment 0 record");
            }
            writeN(w, 1, (int) PER_SEG, (int) (4 * PER_SEG + QUARTER)); // history 2, 3 and the current 4
            assertTrue(await(r, 5000), "continues");
            assertEquals(PER_SEG, r.lost(), "lost, segments " + Arrays.toString(segments(dir)));
            assertEquals(pos(2, 0), r.recordPosition(), "at the oldest retained");
            assertEquals(2 * PER_SEG, readRec(r)[1], "its payload");
            int n = 1;
            while (r.next()) {
                assertEquals(2 * PER_SEG + n, readRec(r)[1], "in order");
                n++;
            }
            assertEquals(2 * PER_SEG + QUARTER, n, "the rest");
        }
    }

    /** Seeking before the oldest retained record is a gap from the position sought; read ranges work. */
    @Test
    public void seekBeforeTheOldestRetainedIsAGap() throws Exception {
        String dir = tmp.resolve("seekgap").toString();
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).setRetention(2, 0, 0).open()) {
            writeN(w, 1, 0, (int) (3 * PER_SEG + QUARTER)); // segments 0..3: history 1, 2 and the current 3
            try (RollingBusReader r = new RollingBusReader(dir, SEG, REC).open()) {
                assertEquals(pos(1, 0), r.position(), "opens at the oldest retained");
                BusGapException e = assertThrows(BusGapException.class, () -> r.seek(pos(0, 5)));
                assertEquals(pos(0, 5), e.lostFrom(), "from");
                assertEquals(pos(1, 0), e.lostTo(), "to");
                assertEquals(PER_SEG - 5, e.lost(), "slots");
                assertEquals(pos(1, 0), r.position(), "did not move");
                r.seek(pos(3, 1));
                assertTrue(r.next(), "record");
                assertEquals(3 * PER_SEG + 1, readRec(r)[1], "payload");
                r.seekToEnd();
                assertEquals(pos(3, QUARTER), r.position(), "end");
                assertFalse(r.next(), "nothing past the end");
                assertThrows(IllegalArgumentException.class, () -> r.seek(pos(3, 0) + 3));
            }
            try (RollingBusReader r = new RollingBusReader(dir, SEG, REC).setFailOnGap(false).open()) {
                r.seek(pos(0, 0));
                assertEquals(PER_SEG, r.lost(), "lost");
                assertTrue(r.next(), "record");
                assertEquals(pos(1, 0), r.recordPosition(), "oldest retained");
            }
        }
    }

    /** A reader waiting at the end notices that the bus was deleted and recreated under the same path. */
    @Test
    public void waitingReaderNoticesTheBusWasReplaced() throws Exception {
        String dir = tmp.resolve("replace").toString();
        String id;
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).open()) {
            writeN(w, 1, 0, (int) PER_SEG); // fills segment 0 exactly: the reader will wait for segment 1
            id = w.busId();
        }
        try (RollingBusReader r = new RollingBusReader(dir, SEG, REC).open()) {
            while (r.next()) {
                // drain
            }
            assertFalse(r.next(), "waiting");
            try (var s = Files.list(Path.of(dir))) {
                for (Path p : (Iterable<Path>) s::iterator) {
                    Files.delete(p);
                }
            }
            Files.delete(Path.of(dir));
            try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).open()) {
                assertFalse(id.equals(w.busId()), "new id");
                BusReplacedException e = assertThrows(BusReplacedException.class, () -> {
                    long end = System.nanoTime() + 10_000_000_000L;
                    while (System.nanoTime() < end) {
                        r.next();
                    }
                });
                assertContains(e.getMessage(), dir);
            }
        }
    }

    /**
     * The directory of an open bus gone when its segments are listed (a reader between its identity check and the
     * listing while another process recreates the bus, as CI caught the Python reader doing): the bus was replaced,
     * not a NoSuchFileException out of next().
     */
    @Test
    public void theDirectoryGoneUnderAListingIsAReplacedBus() throws Exception {
        String dir = tmp.resolve("gone").toString();
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).open()) {
            writeN(w, 1, 0, 3);
        }
        RollingDir d = RollingDir.open(dir, SEG, REC, false);
        assertEquals(1, d.segments().length);
        try (var s = Files.list(Path.of(dir))) {
            for (Path p : (Iterable<Path>) s::iterator) {
                Files.delete(p);
            }
        }
        Files.delete(Path.of(dir));
        BusReplacedException e = assertThrows(BusReplacedException.class, d::segments);
        assertContains(e.getMessage(), "directory is gone");
        assertContains(e.getMessage(), d.meta.id());
    }

    /** Other sizes than the bus's are refused before anything is written; so is another retention. */
    @Test
    public void otherSizesAreAMismatch() throws Exception {
        String dir = tmp.resolve("mismatch").toString();
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).setRetention(5, 0, 0).open()) {
            writeN(w, 1, 0, 3);
        }
        assertThrows(BusMismatchException.class, () -> new RollingBusWriter(dir, 2 * SEG, REC).open());
        assertThrows(BusMismatchException.class, () -> new RollingBusWriter(dir, SEG, 16).open());
        assertThrows(BusMismatchException.class, () -> new RollingBusReader(dir, SEG, 12).open());
        assertThrows(BusMismatchException.class, () -> new RollingBusReader(dir, 8192, REC).open());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> new RollingBusWriter(dir, SEG, REC).setRetention(6, 0, 0).open());
        assertContains(e.getMessage(), "retention");
        new RollingBusWriter(dir, SEG, REC).setRetention(5, 0, 0).open().close(); // the same: accepted
        new RollingBusWriter(dir, SEG, REC).open().close(); // none given: the bus's
        try (RollingBusReader r = new RollingBusReader(dir, SEG, REC).open()) {
            int n = 0;
            while (r.next()) {
                n++;
            }
            assertEquals(3, n, "only the 3 records");
        }
    }

    /** A reader never creates a bus; a missing one is NoSuchFileException and stays missing. */
    @Test
    public void readerNeverCreatesTheBus() throws Exception {
        String dir = tmp.resolve("absent").toString();
        assertThrows(NoSuchFileException.class, () -> new RollingBusReader(dir, SEG, REC).open());
        assertFalse(Files.exists(Path.of(dir)), "not created");
        Files.createDirectory(Path.of(dir), PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        NoSuchFileException e = assertThrows(NoSuchFileException.class, () -> new RollingBusReader(dir, SEG, REC).open());
        assertContains(e.getMessage(), "bus.meta");
        try (var s = Files.list(Path.of(dir))) {
            assertEquals(0, s.count(), "still empty");
        }
    }

    /** A group-writable directory or a link to one is refused unless allowForeign is set. */
    @Test
    public void untrustedDirectoryIsRefused() throws Exception {
        String dir = tmp.resolve("shared").toString();
        new RollingBusWriter(dir, SEG, REC).open().close();
        Files.setPosixFilePermissions(Path.of(dir), PosixFilePermissions.fromString("rwxrwx---"));
        UnsafeBusFileException e = assertThrows(UnsafeBusFileException.class,
                () -> new RollingBusWriter(dir, SEG, REC).open());
        assertContains(e.getMessage(), "writable by group");
        assertThrows(UnsafeBusFileException.class, () -> new RollingBusReader(dir, SEG, REC).open());
        new RollingBusReader(dir, SEG, REC).setAllowForeign(true).open().close();
        Files.setPosixFilePermissions(Path.of(dir), PosixFilePermissions.fromString("rwx------"));
        String link = tmp.resolve("link").toString();
        Files.createSymbolicLink(Path.of(link), Path.of(dir));
        assertContains(assertThrows(UnsafeBusFileException.class,
                () -> new RollingBusReader(link, SEG, REC).open()).getMessage(), "symbolic link");
    }

    /** The creator of a segment removes temporary files older than 60 s, not younger ones. */
    @Test
    public void staleTemporariesAreRemovedBySegmentCreators() throws Exception {
        String dir = tmp.resolve("tmp").toString();
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).open()) {
            Path stale = Path.of(dir, ".tmp-00000000000000000001.bus-999-dead");
            Path fresh = Path.of(dir, ".tmp-00000000000000000001.bus-998-live");
            Files.write(stale, new byte[10]);
            Files.write(fresh, new byte[10]);
            Files.setLastModifiedTime(stale, FileTime.fromMillis(System.currentTimeMillis() - 61_000));
            writeN(w, 1, 0, (int) PER_SEG + 1);
            assertFalse(Files.exists(stale), "stale removed");
            assertTrue(Files.exists(fresh), "fresh kept");
        }
    }

    /**
     * A slow creator of segment 1 while the others filled it, made 2 and retention removed 1 does not link it:
     * an empty segment below 2 would take records after ones readers have read past.
     */
    @Test
    public void aSegmentRemovedWhileACreatorMadeItAgainIsNotLinkedBelowNewerOnes() throws Exception {
        String dir = tmp.resolve("slow").toString();
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).open()) {
            writeN(w, 1, 0, (int) (2 * PER_SEG + 10));
        }
        Files.delete(Path.of(dir, Layout.segmentName(1)));
        RollingDir d = RollingDir.forWriter(dir, SEG, REC, Retention.NONE, false);
        try {
            assertFalse(d.makeSegment(1), "not linked");
            assertEquals("[0, 2]", Arrays.toString(segments(dir)));
            try (var s = Files.list(Path.of(dir))) {
                assertEquals(0, s.filter(p -> p.getFileName().toString().startsWith(".tmp-")).count(), "no temporary");
            }
            assertTrue(d.makeSegment(3), "the next one is made as ever");
        } finally {
            d.close();
        }
    }

    /** hasRecovered turns true once the reader reaches what was allocated when it opened. */
    @Test
    public void hasRecoveredAcrossSegments() throws Exception {
        String dir = tmp.resolve("recover").toString();
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).open()) {
            writeN(w, 1, 0, (int) (PER_SEG + 4));
            try (RollingBusReader r = new RollingBusReader(dir, SEG, REC).open()) {
                writeN(w, 1, 0, 10);
                for (int i = 0; i < PER_SEG + 3; i++) {
                    assertTrue(r.next(), "record");
                    assertFalse(r.hasRecovered(), "not yet at " + i);
                }
                assertTrue(r.next(), "record");
                assertTrue(r.hasRecovered(), "recovered");
            }
        }
    }
}
