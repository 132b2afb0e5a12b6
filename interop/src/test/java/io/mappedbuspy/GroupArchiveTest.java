package io.mappedbuspy;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import io.mappedbuspy.internal.ArchiveFiles;
import io.mappedbuspy.internal.Archiver;
import io.mappedbuspy.internal.BusMeta;
import io.mappedbuspy.internal.WakeLibrary;

/**
 * Java work-group members read on from a rolling bus's archive (issue 37; docs/groups.md, "Java members"): segments
 * moved there (as they were, zstd, LZ4) are read transparently, acks, releases and rejects settle records there (the
 * group's state is in its file), framed messages too, and segments the archive's retention removed are one
 * BusGapException naming them, after which reading goes on. Members of both languages crossing the tier boundary while
 * segments move: tests/groups/test_groups_archive_java.py.
 */
public final class GroupArchiveTest {
    private static final long SEGMENT = 16 * 1024;
    private static final int RECORD = 24;
    private static final long PER_SEGMENT = (SEGMENT - Layout.FIRST_RECORD_OFFSET) / (Layout.HEADER_SIZE + RECORD);

    @TempDir
    Path tmp;

    @BeforeEach
    void needsTheLibrary() {
        Assumptions.assumeTrue(WakeLibrary.LOADED, "needs the JNI library (interop/build_native.sh)");
    }

    private static byte[] value(long v) {
        return ByteBuffer.allocate(RECORD).order(ByteOrder.LITTLE_ENDIAN).putLong(0, v).array();
    }

    private static long read(GroupReader m) throws Exception {
        byte[] b = new byte[RECORD];
        assertEquals(RECORD, m.readBuffer(b, 0));
        return ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).getLong(0);
    }

    private RollingBusWriter writer(Path hot, ArchiveCompression c) {
        return new RollingBusWriter(hot.toString(), SEGMENT, RECORD).setArchive(tmp.resolve("archive").toString())
                .setArchiveAfter(0).setCompress(c);
    }

    private boolean hot(Path dir, long segment) {
        return Files.exists(dir.resolve(Layout.segmentName(segment)));
    }

    @ParameterizedTest
    @EnumSource(ArchiveCompression.class)
    public void aMemberReadsArchivedSegmentsAndSettlesThere(ArchiveCompression c) throws Exception {
        Path hot = tmp.resolve("bus");
        long n = PER_SEGMENT * 5 + 7;
        try (RollingBusWriter w = writer(hot, c).open()) {
            for (long i = 0; i < n; i++) {
                w.write(value(i), 0, RECORD);
            }
            assertTrue(w.awaitArchived(30, TimeUnit.SECONDS));
        }
        assertFalse(hot(hot, 0) || hot(hot, 3), "segments 0..3 were moved");
        List<Long> got = new ArrayList<>();
        // a new group starts at the oldest record of either tier: the archive's
        try (GroupReader m = new GroupReader(hot.toString(), "g").open()) {
            assertTrue(m.next());
            assertEquals(0, read(m));
            assertEquals(Layout.FIRST_RECORD_OFFSET, m.position());
            assertTrue(m.release(), "released in an archived segment");
            assertTrue(m.next());
            assertEquals(0, read(m));
            assertEquals(2, m.deliveries(), "the release came back with one more delivery");
            assertTrue(m.next());
            assertEquals(1, read(m));
            assertTrue(m.reject(), "rejected in an archived segment");
            got.add(0L);
            assertTrue(m.ack(m.position() - (Layout.HEADER_SIZE + RECORD)), "acked by position");
            while (m.next()) {
                got.add(read(m));
                assertEquals(1, m.deliveries());
                assertTrue(m.ack());
            }
            assertEquals(0, m.inFlight());
        }
        List<Long> want = new ArrayList<>();
        for (long i = 0; i < n; i++) {
            if (i != 1) {
                want.add(i);
            }
        }
        assertEquals(want, got);
        // the rejected record is on the dead-letter bus, whole
        try (RollingBusReader d = new RollingBusReader(hot.resolve(Layout.GROUP_DIR).resolve("g"
                + Layout.GROUP_DEAD_SUFFIX).toString()).open()) {
            assertTrue(d.next());
            byte[] b = new byte[Layout.GROUP_DEAD_HEADER_SIZE + RECORD];
            d.readBuffer(b, 0);
            ByteBuffer bb = ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
            assertEquals(Layout.FIRST_RECORD_OFFSET + Layout.HEADER_SIZE + RECORD,
                    bb.getLong(Layout.GROUP_DEAD_POSITION_OFFSET));
            assertEquals(1, bb.getLong(Layout.GROUP_DEAD_HEADER_SIZE));
        }
    }

    @Test
    public void twoMembersCrossTheTierBoundaryWhileAJavaArchiverMovesSegments() throws Exception {
        Path hot = tmp.resolve("bus");
        long n = PER_SEGMENT * 12;
        try (RollingBusWriter w = writer(hot, ArchiveCompression.LZ4).open();
             GroupReader a = new GroupReader(hot.toString(), "g").open();
             GroupReader b = new GroupReader(hot.toString(), "g").open()) {
            Thread writing = new Thread(() -> {
                try {
                    for (long i = 0; i < n; i++) {
                        w.write(value(i), 0, RECORD);
                        if (i % 400 == 0) {
                            Thread.sleep(2);
                        }
                    }
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            writing.start();
            long[] seen = new long[(int) n];
            long got = 0;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (got < n && System.nanoTime() < deadline) {
                for (GroupReader m : new GroupReader[] {a, b}) {
                    if (m.waitNext(1, TimeUnit.MILLISECONDS)) {
                        seen[(int) read(m)]++;
                        assertTrue(m.ack());
                        got++;
                    }
                }
            }
            writing.join(10_000);
            assertTrue(w.awaitArchived(30, TimeUnit.SECONDS));
            assertFalse(a.next() || b.next());
            for (int i = 0; i < n; i++) {
                assertEquals(1, seen[i], "record " + i);
            }
            assertTrue(w.archivedSegments() >= 10, "segments moved meanwhile: " + w.archivedSegments());
        }
    }

    @Test
    public void aMemberOfAFramedBusReadsWholeMessagesFromTheArchive() throws Exception {
        Path hot = tmp.resolve("bus");
        Random rnd = new Random(7);
        List<byte[]> sent = new ArrayList<>();
        try (RollingBusWriter w = new RollingBusWriter(hot.toString(), 1 << 16, 248)
                .setArchive(tmp.resolve("archive").toString()).setArchiveAfter(1000)
                .setCompress(ArchiveCompression.ZSTD).setFrames(true).open()) {
            for (int i = 0; i < 60; i++) {
                byte[] p = new byte[i % 5 == 0 ? 20_000 + rnd.nextInt(20_000) : rnd.nextInt(600)];
                rnd.nextBytes(p);
                sent.add(p);
                w.write(p, i % 2 == 0 ? "jobs" : null);
            }
        }
        // moved by the archiver's own step (its check that a segment is settled does not read frames yet)
        long[] segs = Archiver.hotSegments(hot);
        assertTrue(segs.length >= 4, Arrays.toString(segs));
        Archiver.moveSegments(hot, ArchiveFiles.config(BusMeta.read(hot.resolve(Layout.META_FILE), false), "bus.meta"),
                Arrays.copyOf(segs, segs.length - 1), 1 << 16, false);
        assertFalse(hot(hot, 0), "segment 0 was moved");
        try (GroupReader m = new GroupReader(hot.toString(), "g").open()) {
            for (int i = 0; i < sent.size(); i++) {
                assertTrue(m.next(), "message " + i);
                FrameMessage msg = m.message();
                assertArrayEquals(sent.get(i), msg.payload(), "message " + i);
                assertEquals(i % 2 == 0 ? "jobs" : null, msg.topic());
                if (i == 0) {
                    assertTrue(m.release());
                    assertTrue(m.next());
                    assertArrayEquals(sent.get(0), m.readPayload());
                    assertEquals(2, m.deliveries());
                }
                assertTrue(m.ack());
            }
            assertFalse(m.next());
        }
        // a rolling reader of the framed bus reads the archived messages as frames too
        try (RollingBusReader r = new RollingBusReader(hot.toString()).setFrames(true).open()) {
            for (byte[] p : sent) {
                assertTrue(r.next());
                assertArrayEquals(p, r.readPayload());
            }
        }
    }

    @Test
    public void segmentsTheArchivesRetentionRemovedAreOneGapThenReadingGoesOn() throws Exception {
        Path hot = tmp.resolve("bus");
        long n = PER_SEGMENT * 6 + 3;
        try (RollingBusWriter w = writer(hot, ArchiveCompression.LZ4).setArchiveRetention(2, 0, 0).open()) {
            w.write(value(0), 0, RECORD);
            try (GroupReader m = new GroupReader(hot.toString(), "g").open()) {
                assertTrue(m.next()); // the group starts at segment 0; record 0 stays in flight, held by no one
            }
            for (long i = 1; i < n; i++) {
                w.write(value(i), 0, RECORD);
            }
            assertTrue(w.awaitArchived(30, TimeUnit.SECONDS));
        }
        long[] archived = ArchiveFiles.list(tmp.resolve("archive")).keySet().stream()
                .mapToLong(Long::longValue).toArray();
        assertArrayEquals(new long[] {4, 5}, archived, Arrays.toString(archived));
        long firstKept = 4 * PER_SEGMENT;
        try (GroupReader m = new GroupReader(hot.toString(), "g").open()) {
            BusGapException gap = assertThrows(BusGapException.class, m::next);
            // record 0 (taken back from the member gone: its payload is gone with its segment)
            assertEquals(Layout.FIRST_RECORD_OFFSET, gap.lostFrom());
            assertEquals(1, gap.lost());
            gap = assertThrows(BusGapException.class, m::next);
            assertEquals(Layout.FIRST_RECORD_OFFSET + Layout.HEADER_SIZE + RECORD, gap.lostFrom());
            assertEquals(4 * SEGMENT + Layout.FIRST_RECORD_OFFSET, gap.lostTo());
            assertEquals(firstKept - 1, gap.lost());
            assertTrue(gap.getMessage().contains("group g lost records"), gap.getMessage());
            List<Long> got = new ArrayList<>();
            while (m.next()) {
                got.add(read(m));
                assertTrue(m.ack());
            }
            assertEquals(n - firstKept, got.size());
            assertEquals(firstKept, got.get(0));
            assertEquals(n - 1, got.get(got.size() - 1));
        }
    }
}
