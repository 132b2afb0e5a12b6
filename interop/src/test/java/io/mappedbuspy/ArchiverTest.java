package io.mappedbuspy;

import io.mappedbuspy.internal.ArchiveFiles;
import io.mappedbuspy.internal.ArchiveListing;
import io.mappedbuspy.internal.Archiver;
import io.mappedbuspy.internal.TimeIndex;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The Java archiver's pieces (docs/journal.md "From Java"; the move in docs/design/journal.md): a writer that archives
 * with each compression and a reader that reads both tiers, what settles a segment, what completing a killed move
 * does, the archive's retention, and the settings refused. Kills at each move state: tests/jvm/test_archive_java.py.
 */
public final class ArchiverTest {
    private static final long SEGMENT = 4096;
    private static final int RECORD = 24;
    private static final int PER_SEGMENT = (int) ((SEGMENT - Layout.FIRST_RECORD_OFFSET) / Layout.slotSize(RECORD));

    @TempDir
    Path tmp;

    private static void write(RollingBusWriter w, int from, int to) throws Exception {
        for (int i = from; i < to; i++) {
            byte[] p = ("rec-" + i).getBytes(StandardCharsets.UTF_8);
            assertTrue(w.write(p, 0, p.length));
        }
    }

    private static List<String> readAll(Path hot) throws Exception {
        List<String> out = new ArrayList<>();
        try (RollingBusReader r = new RollingBusReader(hot.toString(), SEGMENT, RECORD).open()) {
            byte[] buf = new byte[RECORD];
            while (r.next()) {
                int len = r.readBuffer(buf, 0);
                out.add(new String(buf, 0, len, StandardCharsets.UTF_8));
            }
        }
        return out;
    }

    private static List<String> expected(int n) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            out.add("rec-" + i);
        }
        return out;
    }

    @ParameterizedTest
    @EnumSource(ArchiveCompression.class)
    void aWriterArchivesFullSegmentsThatReadersReadOn(ArchiveCompression c) throws Exception {
        Path hot = tmp.resolve("hot");
        Path arch = tmp.resolve("archive");
        int n = PER_SEGMENT * 4 + 3;
        try (RollingBusWriter w = new RollingBusWriter(hot.toString(), SEGMENT, RECORD).setArchive(arch.toString())
                .setArchiveAfter(1).setCompress(c).open()) {
            write(w, 0, n);
            assertTrue(w.awaitArchived(30, TimeUnit.SECONDS));
            assertEquals(3, w.archivedSegments());
        }
        assertArrayEquals(new long[] {3, 4}, Archiver.hotSegments(hot));
        var archived = ArchiveFiles.list(arch);
        assertEquals(List.of(0L, 1L, 2L), new ArrayList<>(archived.keySet()));
        for (ArchiveFiles.Archived a : archived.values()) {
            assertEquals(c.files(), a.compression());
        }
        assertEquals(expected(n), readAll(hot));
        // The settings are in bus.meta; a writer that asks for none archives on with them.
        try (RollingBusWriter w = new RollingBusWriter(hot.toString()).open()) {
            write(w, n, n + PER_SEGMENT);
            assertTrue(w.awaitArchived(30, TimeUnit.SECONDS));
        }
        assertEquals(4, ArchiveFiles.list(arch).size());
    }

    // Records that leave the current segment's limit at most ARCHIVER_EARLY_FILL_PERCENT % of the segment.
    private static final int BELOW_EARLY = (int) ((SEGMENT * Layout.ARCHIVER_EARLY_FILL_PERCENT / 100
            - Layout.FIRST_RECORD_OFFSET) / Layout.slotSize(RECORD));

    private static long limitOf(Path segment) throws java.io.IOException {
        java.nio.ByteBuffer b = java.nio.ByteBuffer.allocate(8).order(java.nio.ByteOrder.LITTLE_ENDIAN);
        try (var ch = java.nio.channels.FileChannel.open(segment, java.nio.file.StandardOpenOption.READ)) {
            ch.read(b, Layout.LIMIT_OFFSET);
        }
        return b.getLong(0);
    }

    // The hot segments with records (a spare made ahead has none); a segment moved meanwhile is not counted.
    private static List<Long> withRecords(Path hot) throws java.io.IOException {
        List<Long> out = new ArrayList<>();
        for (long k : Archiver.hotSegments(hot)) {
            try {
                if (limitOf(Archiver.segmentPath(hot, k)) > Layout.FIRST_RECORD_OFFSET) {
                    out.add(k);
                }
            } catch (java.nio.file.NoSuchFileException e) {
                // archived between the listing and the read
            }
        }
        return out;
    }

    @Test
    void theOldestFullSegmentMovesOnceTheCurrentOneIsPastTheEarlyFill() throws Exception {
        Path hot = tmp.resolve("hot");
        Path arch = tmp.resolve("archive");
        assertTrue(Archiver.pastEarlyFill(Layout.FIRST_RECORD_OFFSET + (BELOW_EARLY + 1) * Layout.slotSize(RECORD),
                SEGMENT));
        assertFalse(Archiver.pastEarlyFill(Layout.FIRST_RECORD_OFFSET + BELOW_EARLY * Layout.slotSize(RECORD),
                SEGMENT));
        int n = PER_SEGMENT * 3 + BELOW_EARLY;
        try (RollingBusWriter w = new RollingBusWriter(hot.toString(), SEGMENT, RECORD).setArchive(arch.toString())
                .setArchiveAfter(2).open()) {
            write(w, 0, n);
            assertTrue(w.awaitArchived(30, TimeUnit.SECONDS));
            // not past the early fill: archive_after full ones stay hot beside the current one
            assertEquals(List.of(0L), new ArrayList<>(ArchiveFiles.list(arch).keySet()));
            assertEquals(List.of(1L, 2L, 3L), withRecords(hot));
            write(w, n, n + 1);
            assertTrue(w.awaitArchived(30, TimeUnit.SECONDS));
            // past it (the writer made its spare ahead too): the oldest full one moved, one full one is hot
            assertEquals(List.of(0L, 1L), new ArrayList<>(ArchiveFiles.list(arch).keySet()));
            assertEquals(List.of(2L, 3L), withRecords(hot));
            // the roll: archive_after full ones beside the next current one
            write(w, n + 1, PER_SEGMENT * 4 + 1);
            assertTrue(w.awaitArchived(30, TimeUnit.SECONDS));
            assertEquals(List.of(0L, 1L), new ArrayList<>(ArchiveFiles.list(arch).keySet()));
            assertEquals(List.of(2L, 3L, 4L), withRecords(hot));
        }
        assertEquals(expected(PER_SEGMENT * 4 + 1), readAll(hot));
    }

    // The temporary files of the archive named for segment k (a copy ahead, or a move's copy).
    private static List<Path> tmpsOf(Path arch, long k) throws java.io.IOException {
        String prefix = Layout.TMP_PREFIX + ArchiveFiles.name(k, ArchiveFiles.Compression.ZSTD) + "-";
        try (var s = Files.list(arch)) {
            return s.filter(p -> p.getFileName().toString().startsWith(prefix)).toList();
        }
    }

    // Waits (30 s at most) until `want` holds of segment k's temporary files; returns them.
    private static List<Path> awaitTmps(Path arch, long k, java.util.function.Predicate<List<Path>> want)
            throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        List<Path> t = tmpsOf(arch, k);
        while (!want.test(t) && System.nanoTime() < deadline) {
            Thread.sleep(5);
            t = tmpsOf(arch, k);
        }
        return t;
    }

    private static Object fileKey(Path p) throws java.io.IOException {
        return Files.readAttributes(p, java.nio.file.attribute.BasicFileAttributes.class).fileKey();
    }

    @Test
    void theNextDueSegmentIsCopiedAheadWhileHotAndItsMoveUsesThatCopy() throws Exception {
        Path hot = tmp.resolve("hot");
        Path arch = tmp.resolve("archive");
        int n = PER_SEGMENT * 2 + 1;
        try (RollingBusWriter w = new RollingBusWriter(hot.toString(), SEGMENT, RECORD).setArchive(arch.toString())
                .setArchiveAfter(1).setCompress(ArchiveCompression.ZSTD).setTimeIndex(true).open()) {
            write(w, 0, n);
            assertTrue(w.awaitArchived(30, TimeUnit.SECONDS));
            // segment 0 moved; segment 1, the next due, is copied ahead: hot, not due, nothing named in the archive
            List<Path> ahead = awaitTmps(arch, 1, t -> !t.isEmpty());
            assertEquals(1, ahead.size(), ahead.toString());
            assertEquals(List.of(0L), new ArrayList<>(ArchiveFiles.list(arch).keySet()));
            assertEquals(List.of(1L, 2L), withRecords(hot));
            Object copied = fileKey(ahead.get(0));
            write(w, n, n + BELOW_EARLY); // past the early fill: segment 1 is due, moved with the copy made ahead
            assertTrue(w.awaitArchived(30, TimeUnit.SECONDS));
            var archived = ArchiveFiles.list(arch);
            assertEquals(List.of(0L, 1L), new ArrayList<>(archived.keySet()));
            assertEquals(copied, fileKey(archived.get(1L).path()));
            assertTrue(Files.exists(arch.resolve(Layout.TIME_INDEX_DIR).resolve(TimeIndex.name(1))));
            assertEquals(List.of(2L), withRecords(hot));
        }
        try (var s = Files.list(arch)) {
            assertTrue(s.noneMatch(p -> p.getFileName().toString().startsWith(Layout.TMP_PREFIX)));
        }
        assertEquals(expected(n + BELOW_EARLY), readAll(hot));
    }

    /**
     * With archive_after=2 both full hot segments are copied ahead (oldest first), the newer one from the roll that
     * filled it; each move takes its copy over.
     */
    @Test
    void everyFullSegmentNotDueIsCopiedAheadAndEachMoveTakesItsCopy() throws Exception {
        Path hot = tmp.resolve("hot");
        Path arch = tmp.resolve("archive");
        int n = PER_SEGMENT * 2 + 1; // segments 0 and 1 full, 2 below the early fill: nothing due
        try (RollingBusWriter w = new RollingBusWriter(hot.toString(), SEGMENT, RECORD).setArchive(arch.toString())
                .setArchiveAfter(2).setCompress(ArchiveCompression.ZSTD).open()) {
            write(w, 0, n);
            List<Path> first = awaitTmps(arch, 0, t -> !t.isEmpty());
            List<Path> second = awaitTmps(arch, 1, t -> !t.isEmpty());
            assertEquals(1, first.size(), first.toString());
            assertEquals(1, second.size(), second.toString());
            assertEquals(List.of(), new ArrayList<>(ArchiveFiles.list(arch).keySet()));
            Object copied0 = fileKey(first.get(0));
            Object copied1 = fileKey(second.get(0));
            write(w, n, PER_SEGMENT * 3 + BELOW_EARLY + 1); // 0 and 1 due (3 current, past the early fill)
            assertTrue(w.awaitArchived(30, TimeUnit.SECONDS));
            var archived = ArchiveFiles.list(arch);
            assertEquals(List.of(0L, 1L), new ArrayList<>(archived.keySet()));
            assertEquals(copied0, fileKey(archived.get(0L).path()));
            assertEquals(copied1, fileKey(archived.get(1L).path()));
        }
        assertEquals(expected(PER_SEGMENT * 3 + BELOW_EARLY + 1), readAll(hot));
    }

    /**
     * The copy ahead checks the statuses through the mapping it then copies: a full segment with a slot reserved and
     * not committed (its writer alive) gets no copy ahead until that slot is committed.
     */
    @Test
    void aFullSegmentWithASlotNotCommittedIsNotCopiedAheadUntilItIs() throws Exception {
        Path hot = tmp.resolve("hot");
        Path arch = tmp.resolve("archive");
        try (RollingBusWriter w = new RollingBusWriter(hot.toString(), SEGMENT, RECORD).setArchive(arch.toString())
                .setArchiveAfter(1).setCompress(ArchiveCompression.ZSTD).open()) {
            write(w, 0, PER_SEGMENT + 3);
            Reservation r = w.reserve(1); // a slot of segment 1, the caller's to commit
            assertEquals(1, r.count());
            long offset = r.first() - Layout.joinPosition(1, 0, SEGMENT);
            write(w, PER_SEGMENT + 3, PER_SEGMENT * 2 + 1); // segment 1 full, segment 2 below the early fill
            assertTrue(w.awaitArchived(30, TimeUnit.SECONDS)); // segment 0 moved
            Thread.sleep(300); // looks enough to copy ahead a settled segment
            assertEquals(List.of(), tmpsOf(arch, 1));
            assertEquals(List.of(1L, 2L), withRecords(hot));
            try (var ch = java.nio.channels.FileChannel.open(Archiver.segmentPath(hot, 1),
                    java.nio.file.StandardOpenOption.WRITE)) {
                ch.write(java.nio.ByteBuffer.allocate(4).order(java.nio.ByteOrder.LITTLE_ENDIAN)
                        .putInt(0, Layout.STATUS_COMMITTED), offset);
            }
            assertEquals(1, awaitTmps(arch, 1, t -> !t.isEmpty()).size());
        }
    }

    @Test
    void aCopyAheadIsDroppedWhenItsWriterClosesOrItsSegmentIsGone() throws Exception {
        Path hot = tmp.resolve("hot");
        Path arch = tmp.resolve("archive");
        try (RollingBusWriter w = new RollingBusWriter(hot.toString(), SEGMENT, RECORD).setArchive(arch.toString())
                .setArchiveAfter(1).setCompress(ArchiveCompression.ZSTD).open()) {
            write(w, 0, PER_SEGMENT * 2 + 1);
            assertEquals(1, awaitTmps(arch, 1, t -> !t.isEmpty()).size());
        }
        assertEquals(List.of(), tmpsOf(arch, 1)); // the close removed it; segment 1 stays hot
        assertEquals(List.of(1L, 2L), withRecords(hot));
        // The next writer's archiver copies it ahead again; gone from the hot directory (as hot retention or a
        // tool would remove it), the copy is dropped at the next look.
        try (RollingBusWriter w = new RollingBusWriter(hot.toString()).open()) {
            assertEquals(1, awaitTmps(arch, 1, t -> !t.isEmpty()).size());
            Files.delete(Archiver.segmentPath(hot, 1));
            assertEquals(List.of(), awaitTmps(arch, 1, List::isEmpty));
            assertEquals(List.of(0L), new ArrayList<>(ArchiveFiles.list(arch).keySet()));
            assertEquals(0, w.archivedSegments());
        }
    }

    @Test
    void withArchiveAfterZeroEveryFullSegmentMovesAndTheCurrentOneStays() throws Exception {
        Path hot = tmp.resolve("hot");
        Path arch = tmp.resolve("archive");
        int n = PER_SEGMENT * 2 + BELOW_EARLY + 1; // past the early fill: it changes nothing here
        try (RollingBusWriter w = new RollingBusWriter(hot.toString(), SEGMENT, RECORD).setArchive(arch.toString())
                .setArchiveAfter(0).open()) {
            write(w, 0, n);
            assertTrue(w.awaitArchived(30, TimeUnit.SECONDS));
            assertEquals(List.of(0L, 1L), new ArrayList<>(ArchiveFiles.list(arch).keySet()));
            assertEquals(List.of(2L), withRecords(hot));
            write(w, n, PER_SEGMENT * 3 - 1); // the current one full but one record: still hot
            assertTrue(w.awaitArchived(30, TimeUnit.SECONDS));
            assertEquals(List.of(0L, 1L), new ArrayList<>(ArchiveFiles.list(arch).keySet()));
            assertEquals(List.of(2L), withRecords(hot));
        }
        assertEquals(expected(PER_SEGMENT * 3 - 1), readAll(hot));
    }

    @Test
    void aPacedWriterNeverHasMoreThanArchiveAfterPlusOneHotSegmentsWithRecords() throws Exception {
        // Paced (a segment in 200 ms, no wake-up of the archiver but its own writer's rolls):
        // the bound holds at every roll; a watcher samples the hot directory all along. Only the bound is asserted.
        Path hot = tmp.resolve("hot");
        Path arch = tmp.resolve("archive");
        int after = 2;
        int segments = 4;
        long perRecordNs = TimeUnit.MILLISECONDS.toNanos(200) / PER_SEGMENT;
        java.util.concurrent.atomic.AtomicInteger most = new java.util.concurrent.atomic.AtomicInteger();
        java.util.concurrent.atomic.AtomicReference<Throwable> failed = new java.util.concurrent.atomic.AtomicReference<>();
        java.util.concurrent.atomic.AtomicBoolean done = new java.util.concurrent.atomic.AtomicBoolean();
        int n = PER_SEGMENT * segments + 1;
        try (RollingBusWriter w = new RollingBusWriter(hot.toString(), SEGMENT, RECORD).setArchive(arch.toString())
                .setArchiveAfter(after).open()) {
            Thread watcher = new Thread(() -> {
                try {
                    while (!done.get()) {
                        most.accumulateAndGet(withRecords(hot).size(), Math::max);
                        java.util.concurrent.locks.LockSupport.parkNanos(200_000);
                    }
                } catch (Throwable t) {
                    failed.set(t);
                }
            });
            watcher.start();
            long next = System.nanoTime();
            for (int i = 0; i < n; i++) {
                write(w, i, i + 1);
                next += perRecordNs;
                java.util.concurrent.locks.LockSupport.parkNanos(next - System.nanoTime());
            }
            done.set(true);
            watcher.join();
            assertTrue(w.awaitArchived(30, TimeUnit.SECONDS));
        }
        if (failed.get() != null) {
            throw new AssertionError(failed.get());
        }
        assertEquals(segments - after, ArchiveFiles.list(arch).size());
        assertTrue(most.get() >= after + 1, "the watcher saw " + most.get()); // it saw the directory at work
        assertTrue(most.get() <= after + 1, "at most " + (after + 1) + " hot segments with records, saw " + most.get());
        assertEquals(expected(n), readAll(hot));
    }

    @Test
    void aFramedBusIsArchivedWhateverItsContinuationSlotsHold() throws Exception {
        // Messages of several slots whose payload is zeros: their continuation slots read as status NOT_SET, which
        // a slot-by-slot scan would take for uncommitted slots (the segment never settled, never moved).
        Path hot = tmp.resolve("hot");
        Path arch = tmp.resolve("archive");
        byte[] zeros = new byte[200];
        int n = 60;
        try (RollingBusWriter w = new RollingBusWriter(hot.toString(), SEGMENT, RECORD).setFrames(true)
                .setArchive(arch.toString()).setArchiveAfter(1).open()) {
            for (int i = 0; i < n; i++) {
                assertTrue(w.write(zeros, "t"));
            }
            assertTrue(w.awaitArchived(30, TimeUnit.SECONDS));
            assertTrue(w.archivedSegments() >= 2, "archived " + w.archivedSegments());
        }
        assertTrue(Archiver.settled(Archiver.segmentPath(arch, 0), SEGMENT, RECORD, true));
        assertFalse(Archiver.settled(Archiver.segmentPath(arch, 0), SEGMENT, RECORD, false)); // what it was
        int read = 0;
        try (RollingBusReader r = new RollingBusReader(hot.toString(), SEGMENT, RECORD).setFrames(true).open()) {
            while (r.next()) {
                read++;
            }
        }
        assertEquals(n, read);
    }

    @Test
    void aSegmentIsSettledOnceFullAndEverySlotDecided() throws Exception {
        Path hot = tmp.resolve("hot");
        try (RollingBusWriter w = new RollingBusWriter(hot.toString(), SEGMENT, RECORD).open()) {
            write(w, 0, PER_SEGMENT + 1);
            assertTrue(Archiver.settled(Archiver.segmentPath(hot, 0), SEGMENT, RECORD));
            assertFalse(Archiver.settled(Archiver.segmentPath(hot, 1), SEGMENT, RECORD)); // the current one
        }
        // A full segment with a slot never committed (its writer died) is not settled.
        Path s0 = Archiver.segmentPath(hot, 0);
        try (var ch = java.nio.channels.FileChannel.open(s0, java.nio.file.StandardOpenOption.WRITE)) {
            ch.write(java.nio.ByteBuffer.allocate(4), Layout.FIRST_RECORD_OFFSET + Layout.slotSize(RECORD));
        }
        assertFalse(Archiver.settled(s0, SEGMENT, RECORD));
    }

    @Test
    void completingMovesMergesAHotIndexALateAppendMadeIntoTheArchivedOne() throws Exception {
        // Segment 0 moved (its index with it); then a writer that had stalled between its write and its append made
        // segment 0's hot index again with its late entry. The next archiver merges it into the archive's index.
        Path hot = tmp.resolve("hot");
        Path arch = tmp.resolve("archive");
        String id;
        try (RollingBusWriter w = new RollingBusWriter(hot.toString(), SEGMENT, RECORD).setArchive(arch.toString())
                .setArchiveAfter(100).setTimeIndex(true).open()) {
            write(w, 0, PER_SEGMENT * 2 + 1);
            id = w.busId();
        }
        var cfg = new ArchiveFiles.Config(arch, 100, 0, ArchiveFiles.Compression.NONE, 0, 0, 0);
        Files.copy(Archiver.segmentPath(hot, 0), arch.resolve(ArchiveFiles.name(0, ArchiveFiles.Compression.NONE)));
        Files.createDirectories(arch.resolve(Layout.TIME_INDEX_DIR));
        Files.move(TimeIndex.path(hot, 0), TimeIndex.path(arch, 0));
        Files.delete(Archiver.segmentPath(hot, 0));
        long[] before = TimeIndex.read(TimeIndex.path(arch, 0), id, 0, SEGMENT, RECORD, false).times();
        long late = before[0] - 5_000_000L;
        long at = Layout.joinPosition(0, Layout.FIRST_RECORD_OFFSET + Layout.slotSize(RECORD), SEGMENT);
        try (TimeIndex.Appender a = TimeIndex.Appender.open(hot, id, 0, SEGMENT, RECORD, false)) {
            a.append(late, at);
            a.append(before[0], TimeIndex.read(TimeIndex.path(arch, 0), id, 0, SEGMENT, RECORD, false)
                    .positions()[0]); // one the archive has already: not twice
        }
        assertArrayEquals(new long[0], Archiver.completeMoves(hot, cfg));
        assertFalse(Files.exists(TimeIndex.path(hot, 0)), "merged, then removed");
        TimeIndex merged = TimeIndex.read(TimeIndex.path(arch, 0), id, 0, SEGMENT, RECORD, false);
        assertEquals(before.length + 1, merged.times().length);
        assertEquals(late, merged.firstTime());
        assertEquals(at, merged.positions()[0]);
        // Nothing new: the archive's index is left as it is.
        try (TimeIndex.Appender a = TimeIndex.Appender.open(hot, id, 0, SEGMENT, RECORD, false)) {
            a.append(late, at);
        }
        Object key = fileKey(TimeIndex.path(arch, 0));
        Archiver.completeMoves(hot, cfg);
        assertEquals(key, fileKey(TimeIndex.path(arch, 0)));
        assertFalse(Files.exists(TimeIndex.path(hot, 0)));
    }

    @Test
    void completingAMoveRemovesTemporariesAndTheHotCopyOfAnArchivedSegment() throws Exception {
        Path hot = tmp.resolve("hot");
        Path arch = tmp.resolve("archive");
        try (RollingBusWriter w = new RollingBusWriter(hot.toString(), SEGMENT, RECORD).setArchive(arch.toString())
                .setArchiveAfter(100).setTimeIndex(true).open()) {
            write(w, 0, PER_SEGMENT * 2 + 1);
        }
        var cfg = new ArchiveFiles.Config(arch, 100, 0, ArchiveFiles.Compression.NONE, 0, 0, 0);
        // What an archiver killed after MOVE_RENAMED of segment 0 and during MOVE_COPIED of segment 1 leaves.
        Files.copy(Archiver.segmentPath(hot, 0), arch.resolve(ArchiveFiles.name(0, ArchiveFiles.Compression.NONE)));
        Files.write(arch.resolve(Layout.TMP_PREFIX + "00000000000000000001.bus-1-abc"), new byte[10]);
        Files.write(arch.resolve(Layout.TIME_INDEX_DIR).resolve(Layout.TMP_PREFIX + "x"), new byte[10]);
        assertArrayEquals(new long[] {0}, Archiver.completeMoves(hot, cfg));
        assertArrayEquals(new long[] {1, 2}, Archiver.hotSegments(hot));
        assertFalse(Files.exists(TimeIndex.path(hot, 0)));
        try (var s = Files.list(arch)) {
            assertTrue(s.noneMatch(p -> p.getFileName().toString().startsWith(Layout.TMP_PREFIX)));
        }
        assertEquals(expected(PER_SEGMENT * 2 + 1), readAll(hot));
    }

    @Test
    void theArchivesRetentionRemovesTheOldestArchivedSegments() throws Exception {
        Path hot = tmp.resolve("hot");
        Path arch = tmp.resolve("archive");
        try (RollingBusWriter w = new RollingBusWriter(hot.toString(), SEGMENT, RECORD).setArchive(arch.toString())
                .setArchiveAfter(0).setArchiveRetention(2, 0, 0).open()) {
            write(w, 0, PER_SEGMENT * 5 + 1);
            assertTrue(w.awaitArchived(30, TimeUnit.SECONDS));
            // retention runs after each look; wait for the one after the last move
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (ArchiveFiles.list(arch).size() > 2 && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
        }
        assertEquals(List.of(3L, 4L), new ArrayList<>(ArchiveFiles.list(arch).keySet()));
    }

    /**
     * An archiver's view of its archive, for the archive's retention: listed at the first look, then its own moves and
     * removals applied without a listing until the next full listing, which sees what was changed by hand.
     */
    @Test
    void theArchiveListingListsAtMostOnceAPeriodAndKeepsTheArchiversChangesBetween() throws Exception {
        Path arch = Files.createDirectory(tmp.resolve("archive"));
        ArchiveFiles.Compression c = ArchiveFiles.Compression.LZ4;
        for (long k : new long[] {0, 1}) {
            Files.createFile(arch.resolve(ArchiveFiles.name(k, c)));
        }
        ArchiveFiles.Config cfg = new ArchiveFiles.Config(arch, 0, 0, c, 2, 0, 0);
        ArchiveListing l = new ArchiveListing(cfg, 1_000);
        long t0 = 5_000;
        assertEquals(List.of(0L, 1L), new ArrayList<>(l.current(new long[0], t0).keySet()));
        // by hand: 0 removed, 2 added; the archiver moved 3 (named only in its view here)
        Files.delete(arch.resolve(ArchiveFiles.name(0, c)));
        Files.createFile(arch.resolve(ArchiveFiles.name(2, c)));
        var view = l.current(new long[] {3}, t0 + 999);
        assertEquals(List.of(0L, 1L, 3L), new ArrayList<>(view.keySet()));
        assertEquals(arch.resolve(ArchiveFiles.name(3, c)), view.get(3L).path());
        l.removed(new long[] {0});
        assertEquals(List.of(1L, 3L), new ArrayList<>(l.current(new long[0], t0 + 999).keySet()));
        // a period after the listing: listed again, what is there
        assertEquals(List.of(1L, 2L), new ArrayList<>(l.current(new long[0], t0 + 1_000).keySet()));
    }

    @Test
    void archiveSettingsAreCheckedAndFixedOnceSet() throws Exception {
        Path hot = tmp.resolve("hot");
        String arch = tmp.resolve("archive").toString();
        assertThrows(IllegalArgumentException.class,
                () -> new RollingBusWriter(hot.toString(), SEGMENT, RECORD).setArchiveAfter(2).open());
        assertThrows(IllegalArgumentException.class,
                () -> new RollingBusWriter(hot.toString(), SEGMENT, RECORD).setArchive(arch).setRetention(2, 0, 0)
                        .open());
        assertThrows(IllegalArgumentException.class, () -> new RollingBusWriter(hot.toString(), SEGMENT, RECORD)
                .setArchiveAfter(-1));
        assertThrows(IllegalArgumentException.class, () -> new RollingBusWriter(hot.toString(), SEGMENT, RECORD)
                .setCompress("gzip"));
        new RollingBusWriter(hot.toString(), SEGMENT, RECORD).setArchive(arch).setCompress(ArchiveCompression.LZ4)
                .open().close();
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> new RollingBusWriter(hot.toString(), SEGMENT, RECORD).setArchive(arch)
                        .setCompress(ArchiveCompression.ZSTD).open());
        assertTrue(e.getMessage().contains("fixed once set"), e.getMessage());
        // Another bus's archive directory is refused.
        Path other = tmp.resolve("other");
        assertThrows(BusMismatchException.class,
                () -> new RollingBusWriter(other.toString(), SEGMENT, RECORD).setArchive(arch).open());
        assertEquals(Arrays.asList(MoveState.values()).toString(),
                "[MOVE_SETTLED, MOVE_INDEX, MOVE_COPIED, MOVE_RENAMED, MOVE_UNLINKED]");
    }
}
