package io.mappedbuspy;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import io.mappedbuspy.internal.WakeLibrary;

/**
 * Java work-group members on framed buses (issue 36; docs/groups.md, "Framed buses"; protocol _group_frames.h): a
 * message of any slot count goes whole to one member, with its topic, is acked once, comes back whole when released
 * or given back, goes whole to a framed dead-letter bus, and a topic filter hands out only its topics. Python and Java
 * members together, and a SIGKILLed Java member: tests/groups/test_groups_frames_java.py.
 */
public final class GroupFramesTest {
    private static final int REC = 248;                       // slots of 256 bytes
    private static final int SLOT = (int) Layout.slotSize(REC);

    @TempDir
    Path tmp;

    @BeforeEach
    void needsTheLibrary() {
        Assumptions.assumeTrue(WakeLibrary.LOADED, "needs the JNI library (interop/build_native.sh)");
    }

    // Message i of n bytes: its index first (when it fits), then bytes of a seeded generator.
    private static byte[] message(int i, int n) {
        byte[] b = new byte[n];
        new Random(i).nextBytes(b);
        if (n >= 8) {
            ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).putLong(0, i);
        }
        return b;
    }

    private static int[] sizes(int count, int max, long seed) {
        Random rng = new Random(seed);
        int[] s = new int[count];
        int[] fixed = {0, 1, 8, REC - 16, SLOT, SLOT + 1, 3 * SLOT, max};
        for (int i = 0; i < count; i++) {
            s[i] = i < fixed.length ? fixed[i] : rng.nextInt(10) < 6 ? rng.nextInt(2 * SLOT) : rng.nextInt(max + 1);
        }
        return s;
    }

    private static String topicOf(int i) {
        return i % 3 == 0 ? null : i % 3 == 1 ? "a" : "b";
    }

    private String single(int[] sizes, long fileSize) throws Exception {
        String p = tmp.resolve("bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(p, fileSize, REC).setFrames(true).open()) {
            for (int i = 0; i < sizes.length; i++) {
                assertTrue(w.write(message(i, sizes[i]), topicOf(i)));
            }
        }
        return p;
    }

    /** Two members, one by next() and one by readBatch: every message once, byte-identical, with its topic. */
    @Test
    public void twoMembersTakeWholeMessagesOfAnySizeEachOnce() throws Exception {
        int[] sizes = sizes(150, 40_000, 3);
        String p = single(sizes, 8 << 20);
        Map<Long, FrameMessage> got = new HashMap<>();
        try (GroupReader a = new GroupReader(p, "g").open(); GroupReader b = new GroupReader(p, "g").open()) {
            assertTrue(a.framed());
            GroupBatch batch = new GroupBatch(7, a.recordSize());
            boolean more = true;
            while (more) {
                more = false;
                if (a.next()) {
                    more = true;
                    FrameMessage m = a.message();
                    assertEquals(m.topic(), a.current().topic());
                    assertArrayEquals(m.payload(), a.readPayload());
                    assertEquals(null, got.put(m.position(), m));
                    assertTrue(a.ack());
                    assertFalse(a.ack(), "acked once");
                }
                if (b.readBatch(batch, 0, TimeUnit.SECONDS) > 0) {
                    more = true;
                    for (int i = 0; i < batch.size(); i++) {
                        FrameMessage m = batch.message(i);
                        byte[] copy = new byte[m.payload().length + 3];
                        assertEquals(m.payload().length, batch.readBuffer(i, copy, 3));
                        assertEquals(m.payload().length, batch.payload(i).remaining());
                        assertEquals(batch.topic(i), m.topic());
                        assertEquals(batch.record(i).position(), m.position());
                        assertEquals(null, got.put(m.position(), m));
                    }
                    assertEquals(batch.size(), b.ackBatch(batch));
                }
            }
            assertFalse(a.next(), "every message done");
        }
        assertEquals(sizes.length, got.size());
        List<Long> order = new ArrayList<>(got.keySet());
        order.sort(null);
        for (int i = 0; i < sizes.length; i++) {
            FrameMessage m = got.get(order.get(i));
            assertArrayEquals(message(i, sizes[i]), m.payload(), "message " + i);
            assertEquals(topicOf(i), m.topic());
        }
    }

    /** A rolling bus: messages that meet a segment's end (a padding there, whole in the next), across segments. */
    @Test
    public void aRollingBusAcrossSegmentsMessagesMeetingSegmentEnds() throws Exception {
        String dir = tmp.resolve("roll").toString();
        long seg = 1 << 16;
        int[] sizes = sizes(150, 50_000, 5);
        try (RollingBusWriter w = new RollingBusWriter(dir, seg, REC).setFrames(true).open()) {
            for (int i = 0; i < sizes.length; i++) {
                assertTrue(w.write(message(i, sizes[i]), topicOf(i)));
            }
        }
        Map<Long, FrameMessage> got = new HashMap<>();
        try (GroupReader a = new GroupReader(dir, "g").setWindow(64).open();
             GroupReader b = new GroupReader(dir, "g").open()) {
            int idle = 0;
            for (int k = 0; idle < 4; k++) {
                GroupReader m = k % 2 == 0 ? a : b;
                if (!m.waitNext(5, TimeUnit.MILLISECONDS)) {
                    idle++;
                    continue;
                }
                idle = 0;
                FrameMessage msg = m.message();
                assertEquals(null, got.put(msg.position(), msg));
                assertTrue(m.ack());
            }
        }
        List<Long> order = new ArrayList<>(got.keySet());
        order.sort(null);
        assertEquals(sizes.length, order.size());
        for (int i = 0; i < sizes.length; i++) {
            assertArrayEquals(message(i, sizes[i]), got.get(order.get(i)).payload(), "message " + i);
            assertEquals(topicOf(i), got.get(order.get(i)).topic());
        }
        assertTrue(order.get(order.size() - 1) / seg >= 10, "over many segments");
    }

    /** A window of 16 slots and messages of 100: one goes out alone, entries lapped many times over. */
    @Test
    public void messagesLongerThanTheWindowGoOutAlone() throws Exception {
        int[] sizes = new int[40];
        for (int i = 0; i < sizes.length; i++) {
            sizes[i] = i % 2 == 0 ? 100 * SLOT : 10;
        }
        String p = single(sizes, 4 << 20);
        try (GroupReader a = new GroupReader(p, "g").setWindow(16).open();
             GroupReader b = new GroupReader(p, "g").open()) {
            for (int i = 0; i < sizes.length; i++) {
                assertTrue(a.next(), "message " + i);
                if (i % 2 == 0) { // b may take a small one behind a's, never one past the window
                    assertFalse(b.next(), "the window is full while a holds message " + i);
                }
                assertArrayEquals(message(i, sizes[i]), a.readPayload());
                assertTrue(a.ack());
            }
            assertFalse(b.next());
        }
    }

    /** Released twice with maxDeliveries 2: the message lands whole on the framed dead-letter bus, with its topic. */
    @Test
    public void releaseRedeliversWholeThenMaxDeliveriesDeadLetters() throws Exception {
        byte[] big = message(1, 30_000);
        String p = tmp.resolve("bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(p, 1 << 20, REC).setFrames(true).open()) {
            w.write(big, "jobs");
        }
        try (GroupReader a = new GroupReader(p, "g").setMaxDeliveries(2).open();
             GroupReader b = new GroupReader(p, "g").open()) {
            assertTrue(a.next());
            long pos = a.position();
            assertTrue(a.release());
            assertTrue(b.next());
            assertEquals(2, b.deliveries());
            assertEquals(pos, b.position());
            assertArrayEquals(big, b.readPayload());
            assertEquals("jobs", b.topic());
            assertTrue(b.release());
            assertFalse(a.next(), "out of deliveries: dead-lettered");
            assertFalse(b.next());
            checkDeadLetter(a.deadLetterPath(), pos, 2, big, "jobs");
        }
    }

    /** reject(): the whole message, header first, on a framed dead-letter bus; an ack afterwards fails. */
    @Test
    public void rejectLandsWholeOnAFramedDeadLetterBus() throws Exception {
        byte[] big = message(3, (1 << 20) + 12345);
        String p = tmp.resolve("bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(p, 4 << 20, REC).setFrames(true).open()) {
            w.write("small".getBytes(), null);
            w.write(big, "jobs");
        }
        try (GroupReader m = new GroupReader(p, "g").open()) {
            assertTrue(m.next());
            GroupRecord small = m.current();
            assertNull(small.topic());
            assertTrue(m.next());
            GroupRecord rec = m.current();
            assertEquals("jobs", rec.topic());
            assertTrue(m.reject(rec));
            assertFalse(m.ack(rec));
            assertTrue(m.ack(small));
            assertFalse(m.next());
            checkDeadLetter(m.deadLetterPath(), rec.position(), 1, big, "jobs");
        }
    }

    private static void checkDeadLetter(Path dead, long pos, int deliveries, byte[] payload, String topic)
            throws Exception {
        try (RollingBusReader r = new RollingBusReader(dead.toString()).setFrames(true).open()) {
            assertTrue(r.next());
            FrameMessage letter = r.message();
            assertFalse(r.next(), "one letter");
            ByteBuffer h = ByteBuffer.wrap(letter.payload()).order(ByteOrder.LITTLE_ENDIAN);
            assertEquals(pos, h.getLong(Layout.GROUP_DEAD_POSITION_OFFSET));
            assertEquals(deliveries, h.getInt(Layout.GROUP_DEAD_DELIVERIES_OFFSET));
            assertTrue(h.getInt(Layout.GROUP_DEAD_META_OFFSET) < 0, "the frame's meta");
            assertEquals('g', letter.payload()[Layout.GROUP_DEAD_NAME_OFFSET]);
            assertEquals(0, letter.payload()[Layout.GROUP_DEAD_NAME_OFFSET + 1]);
            byte[] body = java.util.Arrays.copyOfRange(letter.payload(), Layout.GROUP_DEAD_HEADER_SIZE,
                    letter.payload().length);
            assertArrayEquals(payload, body);
            assertEquals(topic, letter.topic());
        }
    }

    /** setTopics: members take only their topics' messages, once; null in the set: messages without a topic too. */
    @Test
    public void topicFiltersHandOutOnlyTheirTopics() throws Exception {
        int[] sizes = sizes(300, 3000, 9);
        String p = single(sizes, 8 << 20);
        Map<Long, String> a = new HashMap<>();
        Map<Long, String> rest = new HashMap<>();
        try (GroupReader a1 = new GroupReader(p, "only-a").setTopics("a").setWindow(16).open();
             GroupReader a2 = new GroupReader(p, "only-a").setTopics("a").open();
             GroupReader o = new GroupReader(p, "untagged-and-b").setTopics(null, "b").open()) {
            for (boolean more = true; more; ) {
                more = false;
                for (GroupReader m : new GroupReader[] {a1, a2}) {
                    if (m.next()) {
                        more = true;
                        assertEquals("a", m.topic());
                        assertEquals(null, a.put(m.position(), m.topic()));
                        assertTrue(m.ack());
                    }
                }
            }
            while (o.next()) {
                assertTrue(o.topic() == null || o.topic().equals("b"), o.topic());
                assertEquals(null, rest.put(o.position(), o.topic()));
                assertTrue(o.ack());
            }
        }
        long wantA = 0;
        for (int i = 0; i < sizes.length; i++) {
            wantA += "a".equals(topicOf(i)) ? 1 : 0;
        }
        assertEquals(wantA, a.size());
        assertEquals(sizes.length - wantA, rest.size());
        String plain = tmp.resolve("plain").toString();
        new MappedBusWriter(plain, 1 << 16, 8).open().close();
        assertThrows(IllegalArgumentException.class, () -> new GroupReader(plain, "g").setTopics("a").open());
        assertThrows(IllegalArgumentException.class, () -> new GroupReader(p, "g").setTopics());
    }

    /**
     * A single file written to its end (a message that no longer fits leaves a padding): once every message is done,
     * next() says so (EOFException), also past a tail of messages of topics the member does not read.
     */
    @Test
    public void aSingleFileReadToItsEndEndsTheGroup() throws Exception {
        String p = tmp.resolve("bus").toString();
        List<byte[]> written = new ArrayList<>();
        try (MappedBusWriter w = new MappedBusWriter(p, Layout.FIRST_RECORD_OFFSET + 40 * SLOT, REC).setFrames(true)
                .open()) {
            for (int i = 0; ; i++) {
                byte[] b = message(i, 3 * SLOT);
                try {
                    w.write(b, i < 3 ? "a" : "b");
                } catch (java.io.EOFException full) {
                    break;
                }
                written.add(b);
            }
        }
        assertEquals(10, written.size());
        try (GroupReader m = new GroupReader(p, "g").setTopics("a").open()) {
            for (int i = 0; i < 3; i++) {
                assertTrue(m.next());
                assertArrayEquals(written.get(i), m.readPayload());
                assertTrue(m.ack());
            }
            assertThrows(java.io.EOFException.class, m::next, "the b messages and the padding skipped to the end");
            assertThrows(java.io.EOFException.class, m::next, "and again");
            try (FileChannel f = FileChannel.open(m.groupPath(), StandardOpenOption.READ)) {
                ByteBuffer b = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
                f.read(b, Layout.GROUP_END_OFFSET);
                assertEquals(40, b.getLong(0), "`end` at the file's end, not past it");
            }
        }
    }

    /** A member closing while it holds a multi-slot message gives it back whole; framed reads refuse fixed ones. */
    @Test
    public void closeGivesAHeldMessageBackWhole() throws Exception {
        int[] sizes = {100_000, 5};
        String p = single(sizes, 4 << 20);
        try (GroupReader b = new GroupReader(p, "g").open()) {
            long pos;
            try (GroupReader a = new GroupReader(p, "g").open()) {
                assertTrue(a.next());
                pos = a.position();
                assertThrows(IllegalStateException.class, () -> a.readBuffer(new byte[REC], 0));
                assertTrue(b.next());
                assertArrayEquals(message(1, 5), b.readPayload(), "the next message, not a continuation slot");
                assertTrue(b.ack());
                assertFalse(b.next(), "a holds the other one");
            }
            assertTrue(b.next());
            assertEquals(pos, b.position());
            assertEquals(2, b.deliveries());
            assertArrayEquals(message(0, 100_000), b.readPayload());
            assertTrue(b.ack());
            assertFalse(b.next());
        }
    }

    /** Rolled-back messages (their writer died) of many slots are skipped whole, by their slot count. */
    @Test
    public void rolledBackMessagesAreSkippedWhole() throws Exception {
        int[] sizes = {5, 5000, 20 * SLOT, 7};
        String p = single(sizes, 1 << 20);
        long second = Layout.FIRST_RECORD_OFFSET + SLOT;
        long third = second + Layout.frameSlots(5000, REC) * SLOT;
        try (FileChannel f = FileChannel.open(Path.of(p), StandardOpenOption.WRITE)) {
            for (long at : new long[] {second, third}) {
                f.write(ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(0, Layout.STATUS_ROLLED_BACK), at);
            }
        }
        try (GroupReader m = new GroupReader(p, "g").setWindow(16).open()) {
            assertTrue(m.next());
            assertArrayEquals(message(0, 5), m.readPayload());
            assertFalse(m.next(), "41 skipped slots: past the window while message 0 is out");
            assertTrue(m.ack(Layout.FIRST_RECORD_OFFSET));
            assertTrue(m.next());
            assertArrayEquals(message(3, 7), m.readPayload());
            assertTrue(m.ack());
            assertFalse(m.next());
        }
    }

    /**
     * A member that died between taking a message and moving `end`, its entry's slot count overwritten since: the
     * next member reads the count from the bus's frame meta, for `end` (acquire) and for `start` (ack).
     */
    @Test
    public void aSlotCountLostFromTheGroupFileIsReadFromTheBus() throws Exception {
        int[] sizes = {5000, 3, 3000};
        String p = single(sizes, 1 << 20);
        try (GroupReader a = new GroupReader(p, "g").open()) {
            assertTrue(a.next());
            GroupRecord r0 = a.current();
            try (FileChannel f = FileChannel.open(a.groupPath(), StandardOpenOption.WRITE)) {
                ByteBuffer zero = ByteBuffer.allocate(8);
                f.write(zero, Layout.GROUP_ENTRIES_OFFSET + Layout.GROUP_ENTRY_SLOTS_OFFSET); // entry(0)'s count lost
                f.write(zero.clear(), Layout.GROUP_END_OFFSET);                                // `end` not past it
            }
            assertTrue(a.next());
            assertArrayEquals(message(1, 3), a.readPayload(), "past message 0's 20 slots");
            GroupRecord r1 = a.current();
            assertTrue(a.ack(r0));
            assertTrue(a.ack(r1));
            assertTrue(a.next());
            assertArrayEquals(message(2, 3000), a.readPayload());
            long last = a.position();
            assertTrue(a.ack());
            assertFalse(a.next());
            try (FileChannel f = FileChannel.open(a.groupPath(), StandardOpenOption.READ)) {
                ByteBuffer b = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
                f.read(b, Layout.GROUP_START_OFFSET);
                long start = b.getLong(0);
                f.read(b.clear(), Layout.GROUP_END_OFFSET);
                long end = b.getLong(0);
                long want = (last - Layout.FIRST_RECORD_OFFSET) / SLOT + Layout.frameSlots(3000, REC);
                assertEquals(want, start);
                assertEquals(want, end);
            }
        }
    }
}
