package io.mappedbuspy;

import io.mappedbuspy.internal.*;

import java.io.EOFException;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import static io.mappedbuspy.Buses.assertContains;
import static io.mappedbuspy.Buses.pattern;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Framed buses (issue 36, docs/design/frames.md): messages of any size, topics, paddings, given-up messages. */
@Timeout(60)
public final class FramesTest {
    private static final int REC = 32;
    private static final long SLOT = Layout.slotSize(REC);

    @TempDir
    Path dir;

    private String bus(String name) {
        return dir.resolve(name).toString();
    }

    private static List<FrameMessage> readAll(MappedBusReader r) throws Exception {
        List<FrameMessage> out = new ArrayList<>();
        try {
            while (r.next()) {
                out.add(r.message());
            }
        } catch (EOFException e) {
            // the end of the file
        }
        return out;
    }

    /** Sizes 0, 1, a slot, a slot + 1 and many slots come back whole, in order, each in its slots. */
    @Test
    public void messagesOfAnySizeComeBackWholeInOrder() throws Exception {
        String p = bus("sizes");
        int[] sizes = {0, 1, REC - 16, REC - 15, 1000, 70_000};
        try (MappedBusWriter w = new MappedBusWriter(p, 1 << 20, REC).setFrames(true).open()) {
            for (int i = 0; i < sizes.length; i++) {
                assertTrue(w.write(pattern(sizes[i], i), i % 2 == 0 ? null : "t" + (i % 3)));
            }
            ByteBuffer direct = ByteBuffer.allocateDirect(5000);
            direct.put(pattern(5000, 9)).flip();
            assertTrue(w.write(direct, "direct"));
            assertEquals(0, direct.remaining(), "the buffer's bytes were written");
        }
        try (MappedBusReader r = new MappedBusReader(p).setFrames(true).open()) {
            long pos = Layout.FIRST_RECORD_OFFSET;
            for (int i = 0; i < sizes.length; i++) {
                assertTrue(r.next());
                FrameMessage m = r.message();
                assertEquals(pos, m.position());
                assertArrayEquals(pattern(sizes[i], i), m.payload(), "message " + i);
                assertEquals(i % 2 == 0 ? null : "t" + (i % 3), m.topic());
                pos += Layout.frameSlots(sizes[i], REC) * SLOT;
                assertEquals(pos, r.position(), "the next message's first slot");
            }
            assertTrue(r.next());
            ByteBuffer into = ByteBuffer.allocateDirect(6000);
            assertEquals(5000, r.readPayload(into));
            byte[] got = new byte[5000];
            into.flip().get(got);
            assertArrayEquals(pattern(5000, 9), got);
            assertEquals("direct", r.topic());
            assertThrows(IllegalArgumentException.class, () -> r.readPayload(ByteBuffer.allocate(10)));
            assertFalse(r.next());
        }
    }

    /** A topic filter passes the other topics, and messages without one, over. */
    /**
     * Writers opening a new topics file at once each name their topic with an id of its own: a writer that grew the
     * file after another had named a topic in it used to write zeros over that (it grew from the size it saw before),
     * and a third writer then took the same id for another name (readers delivered one writer's messages as another's).
     * In /dev/shm, as buses are: tmpfs is where files were grown with zeros.
     */
    @Test
    @Timeout(120)
    public void writersOpeningANewTopicsFileAtOnceNameEachTopicOnce() throws Exception {
        Path dir = java.nio.file.Files.createTempDirectory(Path.of("/dev/shm"), "mbtopics-");
        int threads = 4;
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(threads);
        try {
            for (int round = 0; round < 300; round++) {
                Path file = dir.resolve("bus-" + round + Layout.TOPICS_SUFFIX);
                java.util.concurrent.CyclicBarrier go = new java.util.concurrent.CyclicBarrier(threads);
                List<java.util.concurrent.Future<Integer>> ids = new ArrayList<>();
                for (int t = 0; t < threads; t++) {
                    String name = "t" + t;
                    ids.add(pool.submit(() -> {
                        go.await();
                        try (TopicsFile f = TopicsFile.forWriter(file, false)) {
                            return f.idFor(name);
                        }
                    }));
                }
                int[] got = new int[threads];
                for (int t = 0; t < threads; t++) {
                    got[t] = ids.get(t).get(); // every writer done before the file is read
                }
                String[] names = TopicsFile.names(file, false);
                for (int t = 0; t < threads; t++) {
                    assertEquals("t" + t, names[got[t]], "round " + round + ": the name of id " + got[t] + ", which "
                            + "writer " + t + " tags its messages with");
                }
                java.nio.file.Files.delete(file);
            }
        } finally {
            pool.shutdownNow();
            try (var left = java.nio.file.Files.list(dir)) {
                for (Path p : left.toList()) {
                    java.nio.file.Files.delete(p);
                }
            }
            java.nio.file.Files.delete(dir);
        }
    }

    @Test
    public void topicFiltersDeliverOnlyTheirTopics() throws Exception {
        String p = bus("topics");
        try (MappedBusWriter w = new MappedBusWriter(p, 1 << 20, REC).setFrames(true).open()) {
            for (int i = 0; i < 30; i++) {
                w.write(pattern(i * 10, i), i % 3 == 0 ? "orders" : i % 3 == 1 ? "quotes" : null);
            }
        }
        try (MappedBusReader r = new MappedBusReader(p).setFrames(true).open()) {
            r.setTopics("quotes");
            List<FrameMessage> got = readAll(r);
            assertEquals(10, got.size());
            for (int k = 0; k < got.size(); k++) {
                assertEquals("quotes", got.get(k).topic());
                assertArrayEquals(pattern((3 * k + 1) * 10, 3 * k + 1), got.get(k).payload());
            }
            assertEquals(20, r.filtered(), "the orders and those without a topic");
        }
        try (MappedBusReader r = new MappedBusReader(p).setFrames(true).open()) {
            r.setTopics("orders", "quotes", "absent");
            assertEquals(20, readAll(r).size());
        }
    }

    /** A framed bus is opened framed, an unframed one unframed; a framed bus's record size is a multiple of 8. */
    @Test
    public void framingIsRecordedAndMismatchesAreRefused() throws Exception {
        String framed = bus("framed");
        String plain = bus("plain");
        new MappedBusWriter(framed, 1 << 16, REC).setFrames(true).open().close();
        new MappedBusWriter(plain, 1 << 16, REC).open().close();
        assertTrue(BusMeta.read(BusMeta.metaPath(framed), false).frames());
        assertFalse(BusMeta.read(BusMeta.metaPath(plain), false).frames());
        assertContains(new String(Buses.bytes(framed + Layout.META_SUFFIX)), "\nframes=1\n");
        BusMismatchException e = assertThrows(BusMismatchException.class,
                () -> new MappedBusReader(framed).open());
        assertContains(e.getMessage(), "framed");
        assertThrows(BusMismatchException.class, () -> new MappedBusWriter(plain).setFrames(true).open());
        assertThrows(BusMismatchException.class, () -> new MappedBusReader(plain).setFrames(true).open());
        assertThrows(IllegalArgumentException.class, () -> new MappedBusWriter(bus("odd"), 1 << 16, 12).setFrames(true));
        try (MappedBusWriter w = new MappedBusWriter(framed).setFrames(true).open()) {
            assertThrows(IllegalStateException.class, () -> w.write(new byte[4], 0, 4), "records are not frames");
            assertThrows(IllegalArgumentException.class, () -> w.write(new byte[1 << 16], null), "longer than the file");
            assertThrows(IllegalArgumentException.class, () -> w.write(new byte[1], "bad\nname"));
        }
    }

    /** A message that meets the end of the file leaves a padding (a rolled-back frame) and reports the bus full. */
    @Test
    public void aMessageAtTheEndOfTheFileLeavesAPadding() throws Exception {
        String p = bus("padding");
        long size = Layout.FIRST_RECORD_OFFSET + 25 * SLOT;
        try (MappedBusWriter w = new MappedBusWriter(p, size, REC).setFrames(true).open()) {
            assertTrue(w.write(pattern(500, 1), null));   // 14 slots
            assertTrue(w.write(pattern(200, 2), null));   // 6 slots: 20 of 25
            assertThrows(EOFException.class, () -> w.write(pattern(300, 3), null)); // 9 slots, 5 left
            assertThrows(EOFException.class, () -> w.write(new byte[0], null));     // nothing left
        }
        try (MappedBusReader r = new MappedBusReader(p).setFrames(true).open()) {
            List<FrameMessage> got = readAll(r);
            assertEquals(2, got.size());
            assertEquals(1, r.rolledBackSkipped(), "the padding");
            assertEquals(0, r.rollbacks());
        }
    }

    /** A message whose writer reserved it and stopped is given up whole after the timeout, the same by every reader. */
    @Test
    public void aStalledMessageIsGivenUpWholeByItsFirstSlot() throws Exception {
        String p = bus("stalled");
        try (MappedBusWriter w = new MappedBusWriter(p, 1 << 16, REC).setFrames(true).open()) {
            w.write(pattern(10, 1), null);
            // A writer (without a writers-file claim) that reserved 5 slots and wrote its count, then stopped.
            try (MemoryMappedFile m = new MemoryMappedFile(p, 1 << 16)) {
                long pos = m.getAndAddLong(Layout.LIMIT_OFFSET, 5 * SLOT);
                assertTrue(m.compareAndSetInt(pos + Layout.METADATA_OFFSET, 0, Layout.frameMeta(5)));
                m.putBytes(pos + Layout.FRAME_PAYLOAD_OFFSET, pattern(100, 7), 0, 100);
            }
            w.write(pattern(20, 2), null);
        }
        try (MappedBusReader r = new MappedBusReader(p).setFrames(true).open();
             MappedBusReader ro = new MappedBusReader(p, true).setFrames(true).open()) {
            r.setTimeout(Layout.MIN_ROLLBACK_TIMEOUT_MS);
            assertTrue(r.next());
            long t0 = System.nanoTime();
            while (!r.next()) {
                assertTrue(System.nanoTime() - t0 < 10_000_000_000L, "given up within the timeout");
            }
            assertArrayEquals(pattern(20, 2), r.message().payload());
            assertEquals(1, r.rollbacks());
            // Another reader now finds it rolled back: skipped by its count, to the same message.
            assertTrue(ro.next());
            assertTrue(ro.next());
            assertArrayEquals(pattern(20, 2), ro.message().payload());
            assertEquals(0, ro.rollbacks());
        }
    }

    /** A message without a topic has none; records' reads are refused on a framed bus. */
    @Test
    public void framedReadersReadMessagesNotRecords() throws Exception {
        String p = bus("records");
        try (MappedBusWriter w = new MappedBusWriter(p, 1 << 16, REC).setFrames(true).open()) {
            w.write(new byte[] {1, 2, 3}, null);
        }
        try (MappedBusReader r = new MappedBusReader(p).setFrames(true).open()) {
            assertTrue(r.next());
            assertNull(r.topic());
            assertEquals(3, r.payloadLength());
            assertEquals(Layout.FRAME_ENCODING_BYTES, r.message().encoding());
            assertThrows(IllegalStateException.class, () -> r.readBuffer(new byte[64], 0));
        }
    }

    /** On a rolling bus a message that does not fit in the segment's rest goes whole to the next segment. */
    @Test
    public void rollingMessagesMoveWholeToTheNextSegment() throws Exception {
        String d = bus("rolling");
        long seg = Layout.FIRST_RECORD_OFFSET + 100 * SLOT;
        List<byte[]> sent = new ArrayList<>();
        try (RollingBusWriter w = new RollingBusWriter(d, seg, REC).setFrames(true).open()) {
            for (int i = 0; i < 40; i++) {
                byte[] b = pattern(50 + 97 * (i % 7), i);
                sent.add(b);
                assertTrue(w.write(b, i % 2 == 0 ? "even" : "odd"));
            }
            assertThrows(IllegalArgumentException.class, () -> w.write(new byte[(int) seg], null));
            assertTrue(w.segment() > 1);
        }
        try (RollingBusReader r = new RollingBusReader(d).setFrames(true).open()) {
            for (int i = 0; i < 40; i++) {
                assertTrue(r.next(), "message " + i);
                FrameMessage m = r.message();
                assertArrayEquals(sent.get(i), m.payload(), "message " + i);
                assertEquals(i % 2 == 0 ? "even" : "odd", m.topic());
            }
            assertFalse(r.next());
        }
        try (RollingBusReader r = new RollingBusReader(d).setFrames(true).open()) {
            r.setTopics("odd");
            int n = 0;
            while (r.next()) {
                assertArrayEquals(sent.get(2 * n + 1), r.message().payload());
                n++;
            }
            assertEquals(20, n);
            assertEquals(20, r.filtered());
        }
    }
}
