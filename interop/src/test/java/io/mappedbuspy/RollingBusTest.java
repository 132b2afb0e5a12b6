package io.mappedbuspy;

import io.mappedbuspy.testing.Test;
import io.mappedbuspy.testing.TestFiles;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;

import static io.mappedbuspy.testing.Assert.assertContains;
import static io.mappedbuspy.testing.Assert.assertEquals;
import static io.mappedbuspy.testing.Assert.assertFalse;
import static io.mappedbuspy.testing.Assert.assertThrows;
import static io.mappedbuspy.testing.Assert.assertTrue;
import static io.mappedbuspy.testing.Assert.fail;

/** The rolling bus: rolling, following, retention, gaps, identity and size checks. */
public final class RollingBusTest {
    // 8-byte records (slot 16): 255 per 4096-byte segment.
    private static final int REC = 8;
    private static final long SEG = 4096;
    private static final long PER_SEG = (SEG - 8) / 16;

    private static byte[] rec(int writer, int i) {
        return ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putInt(writer).putInt(i).array();
    }

    private static void writeN(RollingBusWriter w, int writer, int from, int to) throws IOException {
        for (int i = from; i < to; i++) {
            assertTrue("committed", w.write(rec(writer, i), 0, 8));
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
        assertEquals("length", 8, r.readBuffer(b, 0));
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
        String dir = TestFiles.newPath("roll");
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).open();
             RollingBusReader r = new RollingBusReader(dir, SEG, REC).open()) {
            assertFalse("empty bus", r.next());
            int n = (int) (3 * PER_SEG + 10);
            writeN(w, 1, 0, n);
            assertEquals("writer's segment", 3, w.segment());
            assertEquals("segments", "[0, 1, 2, 3]", Arrays.toString(segments(dir)));
            for (int i = 0; i < n; i++) {
                assertTrue("record " + i, await(r, 5000));
                assertEquals("position of " + i, pos(i / PER_SEG, i % PER_SEG), r.recordPosition());
                assertEquals("payload of " + i, i, readRec(r)[1]);
            }
            assertFalse("caught up", r.next());
            assertEquals("position after the last", pos(3, 10), r.position());
            // Following live across a boundary the writer crosses after the reader caught up.
            writeN(w, 1, n, (int) (4 * PER_SEG + 1));
            for (int i = n; i < 4 * PER_SEG + 1; i++) {
                assertTrue("live record " + i, await(r, 5000));
                assertEquals("live payload", i, readRec(r)[1]);
            }
            assertEquals("reader's segment", 4, r.segment());
            assertEquals("same id", w.busId(), r.busId());
            assertEquals("no loss", 0, r.lost());
        }
    }

    /** The directory is 0700, bus.meta describes the bus, segments are complete 0600 files, no temporaries left. */
    @Test
    public void busLayoutOnDiskFollowsTheContract() throws Exception {
        String dir = TestFiles.newPath("layout");
        try (RollingBusWriter w = new RollingBusWriter(dir, 5000, REC).setRetention(7, 0, 0).open()) {
            writeN(w, 1, 0, 400); // 312 per segment: two segments
            Path d = Path.of(dir);
            assertEquals("dir mode", "rwx------",
                    PosixFilePermissions.toString(Files.getPosixFilePermissions(d, LinkOption.NOFOLLOW_LINKS)));
            BusMeta m = BusMeta.read(d.resolve("bus.meta"), false);
            assertEquals("kind", "rolling", m.kind());
            assertEquals("segment size", 5000, m.segmentSize());
            assertEquals("record size", REC, m.recordSize());
            assertEquals("retention", 7, m.retainSegments());
            assertEquals("id", w.busId(), m.id());
            Path s1 = d.resolve("00000000000000000001.bus");
            assertEquals("segment mode", "rw-------",
                    PosixFilePermissions.toString(Files.getPosixFilePermissions(s1, LinkOption.NOFOLLOW_LINKS)));
            assertEquals("segment length: the mapped size", 8192, Files.size(s1));
            try (var s = Files.list(d)) {
                assertEquals("no temporaries", 0, s.filter(p -> p.getFileName().toString().startsWith(".tmp-")).count());
            }
            // Segment 0 is full: its limit ran past the last record that fits.
            try (MemoryMappedFile mem = new MemoryMappedFile(d.resolve("00000000000000000000.bus").toString(), 5000)) {
                assertTrue("segment 0 full", mem.getLongAcquire(0) + 16 > 5000);
            }
        }
    }

    /** A second writer opens at the newest segment and continues the same order. */
    @Test
    public void secondWriterJoinsAtTheNewestSegment() throws Exception {
        String dir = TestFiles.newPath("join");
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).open()) {
            writeN(w, 1, 0, (int) (2 * PER_SEG + 5));
        }
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).open();
             RollingBusReader r = new RollingBusReader(dir, SEG, REC).open()) {
            assertEquals("opened at the newest", 2, w.segment());
            writeN(w, 2, 0, 3);
            r.seek(pos(2, 5));
            assertTrue("a record", r.next());
            assertEquals("after the first writer's", 2, readRec(r)[0]);
            assertEquals("position", pos(2, 5), r.recordPosition());
        }
    }

    /**
     * Several writer threads race across many segment boundaries (a few records per segment): every record
     * arrives once, each writer's in its own order, positions strictly increasing, none spanning segments.
     */
    @Test
    public void racingWritersAtBoundariesLoseAndDuplicateNothing() throws Exception {
        racingWriters(8 + 10 * 16, 4, 250);  // 10 records per segment: a boundary every few writes
        racingWriters(SEG, 4, (int) PER_SEG); // one segment's worth each
    }

    private void racingWriters(long seg, int writers, int each) throws Exception {
        String dir = TestFiles.newPath("race");
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
                assertTrue("positions increase", p > last);
                assertTrue("record inside its segment", p % seg + 16 <= seg);
                last = p;
                int[] x = readRec(r);
                assertEquals("writer " + x[0] + " in order", next[x[0]], x[1]);
                next[x[0]]++;
            }
            for (Thread th : threads) {
                th.join(30_000);
            }
            assertEquals("failure", null, failure.get());
            assertFalse("nothing more", r.next());
            assertEquals("no rollbacks", 0, r.rolledBackSkipped());
        }
    }

    /** Retention by count keeps the newest N segments; the creator of a segment applies it. */
    @Test
    public void retentionBySegmentCountKeepsTheNewest() throws Exception {
        String dir = TestFiles.newPath("keep3");
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).setRetention(3, 0, 0).open()) {
            writeN(w, 1, 0, (int) (2 * PER_SEG + 1));
            assertEquals("up to 3 kept", "[0, 1, 2]", Arrays.toString(segments(dir)));
            writeN(w, 1, 0, (int) (4 * PER_SEG));
            assertEquals("the newest 3", "[4, 5, 6]", Arrays.toString(segments(dir)));
        }
    }

    /** Retention by bytes counts every segment as segmentSize bytes. */
    @Test
    public void retentionByBytesCountsSegmentSizes() throws Exception {
        String dir = TestFiles.newPath("bytes");
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).setRetention(0, 2 * SEG + 1, 0).open()) {
            writeN(w, 1, 0, (int) (5 * PER_SEG + 1));
            assertEquals("two segments fit in 2*SEG+1 bytes", "[4, 5]", Arrays.toString(segments(dir)));
        }
        String small = TestFiles.newPath("bytes-small");
        try (RollingBusWriter w = new RollingBusWriter(small, SEG, REC).setRetention(0, 100, 0).open()) {
            writeN(w, 1, 0, (int) (2 * PER_SEG + 1));
            // Segment 2 was made ahead while 1 was being written: neither is ever removed.
            assertEquals("never the new segment nor the one being written", "[1, 2]",
                    Arrays.toString(segments(small)));
        }
    }

    /** Retention by age removes segment k once it was full (rolled out of) longer ago than the age. */
    @Test
    public void retentionByAgeRemovesSegmentsWhoseSuccessorIsOld() throws Exception {
        String dir = TestFiles.newPath("age");
        Path d = Path.of(dir);
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).setRetention(0, 0, 60_000).open()) {
            writeN(w, 1, 0, (int) (3 * PER_SEG + 1));
            assertEquals("all young: all kept", "[0, 1, 2, 3]", Arrays.toString(segments(dir)));
            // Segments 0 and 1 as if full two minutes ago.
            FileTime old = FileTime.fromMillis(System.currentTimeMillis() - 120_000);
            Files.setLastModifiedTime(d.resolve(Layout.segmentName(0)), old);
            Files.setLastModifiedTime(d.resolve(Layout.segmentName(1)), old);
            writeN(w, 1, 0, (int) PER_SEG); // makes segment 4
            assertEquals("0 and 1 removed, 2 kept (full just now)", "[2, 3, 4]",
                    Arrays.toString(segments(dir)));
        }
    }

    /** A reader left behind gets BusGapException with the exact lost range; nothing is delivered twice. */
    @Test
    public void slowReaderGetsTheExactGap() throws Exception {
        String dir = TestFiles.newPath("gap");
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).setRetention(2, 0, 0).open();
             RollingBusReader r = new RollingBusReader(dir, SEG, REC).open()) {
            writeN(w, 1, 0, 3);
            assertTrue("first", r.next());
            writeN(w, 1, 3, (int) (4 * PER_SEG + 7)); // segments 0..4, retained: 3, 4
            assertEquals("retained", "[3, 4]", Arrays.toString(segments(dir)));
            // The rest of segment 0 is still mapped by the reader and readable.
            for (int i = 1; i < PER_SEG; i++) {
                assertTrue("mapped record " + i, r.next());
                assertEquals("payload", i, readRec(r)[1]);
            }
            BusGapException e = assertThrows(BusGapException.class, () -> await(r, 5000));
            assertEquals("lost from", pos(1, 0), e.lostFrom());
            assertEquals("lost to", pos(3, 0), e.lostTo());
            assertEquals("lost slots", 2 * PER_SEG, e.lost());
            assertContains(e.getMessage(), dir);
        }
    }

    /** With failOnGap false the reader continues at the oldest retained record and lost() counts the slots. */
    @Test
    public void gapSkippedCountsLostSlotsAndContinues() throws Exception {
        String dir = TestFiles.newPath("skip");
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).setRetention(2, 0, 0).open();
             RollingBusReader r = new RollingBusReader(dir, SEG, REC).setFailOnGap(false).open()) {
            writeN(w, 1, 0, (int) PER_SEG); // all of segment 0
            for (int i = 0; i < PER_SEG; i++) {
                assertTrue("segment 0 record", r.next());
            }
            writeN(w, 1, (int) PER_SEG, (int) (4 * PER_SEG + 7));
            assertTrue("continues", await(r, 5000));
            assertEquals("lost", 2 * PER_SEG, r.lost());
            assertEquals("at the oldest retained", pos(3, 0), r.recordPosition());
            assertEquals("its payload", 3 * PER_SEG, readRec(r)[1]);
            int n = 1;
            while (r.next()) {
                assertEquals("in order", 3 * PER_SEG + n, readRec(r)[1]);
                n++;
            }
            assertEquals("the rest", PER_SEG + 7, n);
        }
    }

    /** Seeking before the oldest retained record is a gap from the position sought; read ranges work. */
    @Test
    public void seekBeforeTheOldestRetainedIsAGap() throws Exception {
        String dir = TestFiles.newPath("seekgap");
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).setRetention(2, 0, 0).open()) {
            writeN(w, 1, 0, (int) (3 * PER_SEG + 2)); // segments 0..3, retained 2, 3
            try (RollingBusReader r = new RollingBusReader(dir, SEG, REC).open()) {
                assertEquals("opens at the oldest retained", pos(2, 0), r.position());
                BusGapException e = assertThrows(BusGapException.class, () -> r.seek(pos(1, 5)));
                assertEquals("from", pos(1, 5), e.lostFrom());
                assertEquals("to", pos(2, 0), e.lostTo());
                assertEquals("slots", PER_SEG - 5, e.lost());
                assertEquals("did not move", pos(2, 0), r.position());
                r.seek(pos(3, 1));
                assertTrue("record", r.next());
                assertEquals("payload", 3 * PER_SEG + 1, readRec(r)[1]);
                r.seekToEnd();
                assertEquals("end", pos(3, 2), r.position());
                assertFalse("nothing past the end", r.next());
                assertThrows(IllegalArgumentException.class, () -> r.seek(pos(3, 0) + 3));
            }
            try (RollingBusReader r = new RollingBusReader(dir, SEG, REC).setFailOnGap(false).open()) {
                r.seek(pos(0, 0));
                assertEquals("lost", 2 * PER_SEG, r.lost());
                assertTrue("record", r.next());
                assertEquals("oldest retained", pos(2, 0), r.recordPosition());
            }
        }
    }

    /** A reader waiting at the end notices that the bus was deleted and recreated under the same path. */
    @Test
    public void waitingReaderNoticesTheBusWasReplaced() throws Exception {
        String dir = TestFiles.newPath("replace");
        String id;
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).open()) {
            writeN(w, 1, 0, (int) PER_SEG); // fills segment 0 exactly: the reader will wait for segment 1
            id = w.busId();
        }
        try (RollingBusReader r = new RollingBusReader(dir, SEG, REC).open()) {
            while (r.next()) {
                // drain
            }
            assertFalse("waiting", r.next());
            try (var s = Files.list(Path.of(dir))) {
                for (Path p : (Iterable<Path>) s::iterator) {
                    Files.delete(p);
                }
            }
            Files.delete(Path.of(dir));
            try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).open()) {
                assertFalse("new id", id.equals(w.busId()));
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

    /** Other sizes than the bus's are refused before anything is written; so is another retention. */
    @Test
    public void otherSizesAreAMismatch() throws Exception {
        String dir = TestFiles.newPath("mismatch");
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
            assertEquals("only the 3 records", 3, n);
        }
    }

    /** A reader never creates a bus; a missing one is NoSuchFileException and stays missing. */
    @Test
    public void readerNeverCreatesTheBus() throws Exception {
        String dir = TestFiles.newPath("absent");
        assertThrows(NoSuchFileException.class, () -> new RollingBusReader(dir, SEG, REC).open());
        assertFalse("not created", Files.exists(Path.of(dir)));
        Files.createDirectory(Path.of(dir), PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        NoSuchFileException e = assertThrows(NoSuchFileException.class, () -> new RollingBusReader(dir, SEG, REC).open());
        assertContains(e.getMessage(), "bus.meta");
        try (var s = Files.list(Path.of(dir))) {
            assertEquals("still empty", 0, s.count());
        }
    }

    /** A group-writable directory or a link to one is refused unless allowForeign is set. */
    @Test
    public void untrustedDirectoryIsRefused() throws Exception {
        String dir = TestFiles.newPath("shared");
        new RollingBusWriter(dir, SEG, REC).open().close();
        Files.setPosixFilePermissions(Path.of(dir), PosixFilePermissions.fromString("rwxrwx---"));
        UnsafeBusFileException e = assertThrows(UnsafeBusFileException.class,
                () -> new RollingBusWriter(dir, SEG, REC).open());
        assertContains(e.getMessage(), "writable by group");
        assertThrows(UnsafeBusFileException.class, () -> new RollingBusReader(dir, SEG, REC).open());
        new RollingBusReader(dir, SEG, REC).setAllowForeign(true).open().close();
        Files.setPosixFilePermissions(Path.of(dir), PosixFilePermissions.fromString("rwx------"));
        String link = TestFiles.newPath("link");
        Files.createSymbolicLink(Path.of(link), Path.of(dir));
        assertContains(assertThrows(UnsafeBusFileException.class,
                () -> new RollingBusReader(link, SEG, REC).open()).getMessage(), "symbolic link");
    }

    /** The creator of a segment removes temporary files older than 60 s, not younger ones. */
    @Test
    public void staleTemporariesAreRemovedBySegmentCreators() throws Exception {
        String dir = TestFiles.newPath("tmp");
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).open()) {
            Path stale = Path.of(dir, ".tmp-00000000000000000001.bus-999-dead");
            Path fresh = Path.of(dir, ".tmp-00000000000000000001.bus-998-live");
            Files.write(stale, new byte[10]);
            Files.write(fresh, new byte[10]);
            Files.setLastModifiedTime(stale, FileTime.fromMillis(System.currentTimeMillis() - 61_000));
            writeN(w, 1, 0, (int) PER_SEG + 1);
            assertFalse("stale removed", Files.exists(stale));
            assertTrue("fresh kept", Files.exists(fresh));
        }
    }

    /** hasRecovered turns true once the reader reaches what was allocated when it opened. */
    @Test
    public void hasRecoveredAcrossSegments() throws Exception {
        String dir = TestFiles.newPath("recover");
        try (RollingBusWriter w = new RollingBusWriter(dir, SEG, REC).open()) {
            writeN(w, 1, 0, (int) (PER_SEG + 4));
            try (RollingBusReader r = new RollingBusReader(dir, SEG, REC).open()) {
                writeN(w, 1, 0, 10);
                for (int i = 0; i < PER_SEG + 3; i++) {
                    assertTrue("record", r.next());
                    assertFalse("not yet at " + i, r.hasRecovered());
                }
                assertTrue("record", r.next());
                assertTrue("recovered", r.hasRecovered());
            }
        }
    }
}
