package io.mappedbuspy;

import io.mappedbuspy.internal.*;

import java.io.EOFException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import io.mappedbuspy.internal.GroupProtocol;
import io.mappedbuspy.internal.WakeLibrary;

/**
 * The Java work-group member (issue 35) in one JVM: distinct records to distinct members, ack once, release and lease
 * expiry redeliver with one more delivery, reject and max deliveries write the dead-letter bus, close gives back, the
 * group's options must agree, and a truncated group file is an exception, not a SIGBUS. Members of both languages
 * and killed members: tests/test_groups_java.py.
 */
public final class GroupReaderTest {
    private static final int RECORD = 8;

    @TempDir
    Path tmp;

    @BeforeEach
    void needsTheLibrary() {
        Assumptions.assumeTrue(WakeLibrary.LOADED, "needs the JNI library (interop/build_native.sh)");
    }

    private String bus(int n) throws Exception {
        String path = tmp.resolve("bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 1 << 16, RECORD).open()) {
            for (int i = 0; i < n; i++) {
                w.write(value(i), 0, RECORD);
            }
        }
        return path;
    }

    private static byte[] value(long v) {
        return ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(0, v).array();
    }

    private static long read(GroupReader m) throws Exception {
        byte[] b = new byte[RECORD];
        assertEquals(RECORD, m.readBuffer(b, 0));
        return ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).getLong(0);
    }

    @Test
    public void theLibraryRunsThisLayoutsProtocol() {
        assertTrue(GroupProtocol.LOADED, GroupProtocol.WHY);
        assertArrayEquals(GroupProtocol.expectedConstants(), GroupProtocol.nativeConstants());
    }

    @Test
    public void twoMembersGetDistinctRecordsEachAckedOnce() throws Exception {
        String path = bus(10);
        Set<Long> seen = new HashSet<>();
        try (GroupReader a = new GroupReader(path, "g").open(); GroupReader b = new GroupReader(path, "g").open()) {
            assertNotEquals(a.member(), b.member());
            for (int i = 0; i < 5; i++) {
                assertTrue(a.next());
                assertTrue(seen.add(read(a)));
                assertEquals(1, a.deliveries());
                GroupRecord rec = a.current();
                assertTrue(b.next());
                assertTrue(seen.add(read(b)));
                assertTrue(a.ack(rec));
                assertFalse(a.ack(rec), "a second ack of one delivery");
                assertTrue(b.ack());
            }
            assertFalse(a.next(), "every record taken");
            assertThrows(IllegalArgumentException.class, () -> a.ack(Layout.FIRST_RECORD_OFFSET + 1));
            assertFalse(a.ack(Layout.FIRST_RECORD_OFFSET), "settled already");
            assertFalse(b.ack(a.current()), "another member's delivery");
        }
        assertEquals(10, seen.size());
    }

    /** readBatch takes what is there now, up to the batch's capacity, distinct between members; ackBatch acks them. */
    @Test
    public void readBatchTakesUpToItsCapacityAndAckBatchAcksThem() throws Exception {
        String path = bus(10);
        try (GroupReader a = new GroupReader(path, "g").open(); GroupReader b = new GroupReader(path, "g").open()) {
            GroupBatch small = new GroupBatch(4, RECORD);
            GroupBatch large = new GroupBatch(100, RECORD);
            assertEquals(4, a.readBatch(small, 1, TimeUnit.SECONDS));
            assertEquals(4, a.inFlight());
            assertEquals(6, b.readBatch(large, 0, TimeUnit.SECONDS), "the rest, at once");
            Set<Long> seen = new HashSet<>();
            byte[] buf = new byte[RECORD];
            for (GroupBatch x : new GroupBatch[] {small, large}) {
                for (int i = 0; i < x.size(); i++) {
                    assertEquals(RECORD, x.readBuffer(i, buf, 0));
                    long v = ByteBuffer.wrap(buf).order(ByteOrder.LITTLE_ENDIAN).getLong(0);
                    assertEquals(v, x.payload(i).getLong(0));
                    assertEquals(Layout.FIRST_RECORD_OFFSET + v * Layout.slotSize(RECORD), x.record(i).position());
                    assertEquals(1, x.record(i).deliveries());
                    assertTrue(seen.add(v));
                }
            }
            assertEquals(10, seen.size());
            assertEquals(0, a.readBatch(small, 0, TimeUnit.SECONDS), "nothing left");
            assertEquals(0, small.size());
            assertThrows(IndexOutOfBoundsException.class, () -> small.record(0));
            assertEquals(6, b.ackBatch(large));
            assertEquals(0, b.ackBatch(large), "acked once");
            assertEquals(0, b.inFlight());
        }
        try (GroupReader a = new GroupReader(path, "h").setMaxInFlight(2).open()) { // what the member may hold
            GroupBatch batch = new GroupBatch(3, RECORD);
            int n = 0;
            while (a.readBatch(batch, 0, TimeUnit.SECONDS) > 0) {
                assertTrue(batch.size() <= 2, "maxInFlight 2");
                n += batch.size();
                assertEquals(batch.size(), a.ackBatch(batch));
            }
            assertEquals(10, n);
            assertThrows(IllegalArgumentException.class, () -> a.readBatch(new GroupBatch(1, RECORD + 1), 0,
                    TimeUnit.SECONDS));
        }
    }

    /**
     * Java members alone commit the group's retention entry (group:NAME) on a rolling bus: the segment of the
     * oldest unacked record is kept past retain-1 (max consumer lag 100), then let go once everything is acked.
     */
    @Test
    public void javaMembersAloneHoldTheSegmentOfTheOldestUnackedRecord() throws Exception {
        String dir = tmp.resolve("roll").toString();
        long seg = 1 << 16;
        try (RollingBusWriter w = new RollingBusWriter(dir, seg, RECORD).setRetention(1, 0, 0).setMaxConsumerLag(100)
                .open()) {
            w.write(value(-1), 0, RECORD);
            try (GroupReader holder = new GroupReader(dir, "g").setLease(Duration.ofSeconds(60)).open()) {
                assertTrue(holder.waitNext(1, TimeUnit.SECONDS));
                long held = holder.position();
                int perSegment = (int) RollingLayout.slotsPerSegment(seg, RECORD);
                for (int i = 0; i < 4 * perSegment; i++) {
                    w.write(value(i), 0, RECORD);
                }
                RollingDir d = RollingDir.open(dir, false);
                assertTrue(java.nio.file.Files.exists(d.segmentPath(0)), "held by the group's oldest unacked record");
                ConsumerInfo entry = entry(dir, "group:g");
                assertEquals(held, entry.position());
                assertFalse(entry.expired());
                try (GroupReader other = new GroupReader(dir, "g").open()) {
                    GroupBatch batch = new GroupBatch(512, RECORD);
                    while (other.readBatch(batch, 50, TimeUnit.MILLISECONDS) > 0) {
                        assertEquals(batch.size(), other.ackBatch(batch));
                    }
                    assertEquals(held, entry(dir, "group:g").position(), "still held: the first is not acked");
                    assertTrue(holder.ack());
                    while (other.readBatch(batch, 50, TimeUnit.MILLISECONDS) > 0) { // past the window it held back
                        assertEquals(batch.size(), other.ackBatch(batch));
                    }
                    assertFalse(other.waitNext(20, TimeUnit.MILLISECONDS)); // a waiting member commits at once
                }
                assertTrue(entry(dir, "group:g").position() > held + 3 * seg, "the start moved past the acked ones");
                for (int i = 0; i < perSegment; i++) {
                    w.write(value(i), 0, RECORD);
                }
                assertFalse(java.nio.file.Files.exists(d.segmentPath(0)), "let go: retention removed it");
            }
        }
    }

    private static ConsumerInfo entry(String path, String name) throws Exception {
        for (ConsumerInfo c : Consumers.consumers(path)) {
            if (c.name().equals(name)) {
                return c;
            }
        }
        throw new AssertionError("no consumer entry " + name + " in " + path);
    }

    /** The entry's name is Python's hold_name: group:NAME, a long name cut with its BLAKE2b-64 hash. */
    @Test
    public void holdNamesAreSharedWithPython() {
        assertEquals("group:resize", GroupHold.holdName("resize"));
        assertEquals("group:" + "a".repeat(58), GroupHold.holdName("a".repeat(58)));
        // values from mappedbus_py.groups._group.hold_name
        assertEquals("group:" + "a".repeat(41) + "~bb5d13e31fe1bd7f", GroupHold.holdName("a".repeat(59)));
        assertEquals("group:" + "b".repeat(41) + "~01f930a0240d0b0f", GroupHold.holdName("b".repeat(64)));
        assertEquals("group:job-" + "\u00e9".repeat(18) + "~a78c79d0ee2a7738",
                GroupHold.holdName("job-" + "\u00e9".repeat(20) + "x".repeat(15)));
        assertEquals("group:" + "\u00fc".repeat(20) + "~791131d6e9db1ac4", GroupHold.holdName("\u00fc".repeat(32)));
    }

    @Test
    public void releaseAndLeaseExpiryRedeliverWithOneMoreDelivery() throws Exception {
        String path = bus(2);
        try (GroupReader a = new GroupReader(path, "g").setLease(Duration.ofMillis(100)).open();
             GroupReader b = new GroupReader(path, "g").open()) {
            assertTrue(a.next());
            long first = a.position();
            assertTrue(a.release());
            assertTrue(b.waitNext(5, TimeUnit.SECONDS));
            assertEquals(first, b.position());
            assertEquals(2, b.deliveries());
            assertTrue(b.ack(b.position()), "by position");
            assertTrue(a.next());
            GroupRecord late = a.current();
            Thread.sleep(200); // past the lease
            assertTrue(b.waitNext(5, TimeUnit.SECONDS));
            assertEquals(late.position(), b.position());
            assertEquals(2, b.deliveries());
            assertFalse(a.ack(late), "the lease passed: the delivery was taken away");
            assertTrue(b.ack());
        }
    }

    @Test
    public void rejectAndMaxDeliveriesWriteTheDeadLetterBus() throws Exception {
        String path = bus(2);
        try (GroupReader a = new GroupReader(path, "g").setMaxDeliveries(1).open()) {
            assertTrue(a.next());
            assertTrue(a.reject());
            assertTrue(a.next());
            assertTrue(a.release());
            assertFalse(a.next(), "past max deliveries: dead-lettered, not redelivered");
            try (RollingBusReader r = new RollingBusReader(a.deadLetterPath().toString()).open()) {
                for (int i = 0; i < 2; i++) {
                    assertTrue(r.next());
                    byte[] letter = new byte[Layout.GROUP_DEAD_HEADER_SIZE + RECORD];
                    assertEquals(letter.length, r.readBuffer(letter, 0));
                    ByteBuffer l = ByteBuffer.wrap(letter).order(ByteOrder.LITTLE_ENDIAN);
                    assertEquals(Layout.FIRST_RECORD_OFFSET + i * Layout.slotSize(RECORD),
                            l.getLong(Layout.GROUP_DEAD_POSITION_OFFSET));
                    assertEquals(1, l.getInt(Layout.GROUP_DEAD_DELIVERIES_OFFSET));
                    assertEquals(RECORD, l.getInt(Layout.GROUP_DEAD_META_OFFSET));
                    assertEquals('g', letter[Layout.GROUP_DEAD_NAME_OFFSET]);
                    assertEquals(i, l.getLong(Layout.GROUP_DEAD_HEADER_SIZE));
                }
                assertFalse(r.next());
            }
        }
    }

    @Test
    public void closingGivesBackWhatTheMemberHolds() throws Exception {
        String path = bus(1);
        GroupReader a = new GroupReader(path, "g").open();
        assertTrue(a.next());
        assertEquals(1, a.inFlight());
        a.close();
        try (GroupReader b = new GroupReader(path, "g").open()) {
            assertTrue(b.next());
            assertEquals(2, b.deliveries());
            assertTrue(b.ack());
        }
    }

    @Test
    public void theEndOfAFullSingleFileBusIsEofOnceEveryRecordIsDone() throws Exception {
        String path = tmp.resolve("full").toString();
        long n = (4096 - Layout.FIRST_RECORD_OFFSET) / Layout.slotSize(RECORD);
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, RECORD).open()) {
            for (long i = 0; i < n; i++) {
                w.write(value(i), 0, RECORD);
            }
        }
        try (GroupReader a = new GroupReader(path, "g").open()) {
            for (long i = 0; i < n; i++) {
                assertTrue(a.next());
                assertEquals(i, read(a));
                assertTrue(a.ack());
            }
            assertThrows(EOFException.class, a::next);
        }
    }

    @Test
    public void optionsOfAnExistingGroupMustAgree() throws Exception {
        String path = bus(1);
        try (GroupReader a = new GroupReader(path, "g").setWindow(64).open()) {
            assertThrows(BusMismatchException.class, () -> new GroupReader(path, "g").setWindow(128).open());
            try (GroupReader b = new GroupReader(path, "g").open()) {
                assertNotEquals(a.member(), b.member(), "left out: joins with the group's");
            }
        }
        assertThrows(IllegalArgumentException.class, () -> new GroupReader(path, ".hidden"));
        assertThrows(IllegalArgumentException.class, () -> new GroupReader(path, "g").setWindow(3));
    }

    @Test
    public void aTruncatedGroupFileIsAnExceptionNotASigbus() throws Exception {
        String path = bus(3);
        try (GroupReader a = new GroupReader(path, "g").open()) {
            assertTrue(a.next());
            try (FileChannel ch = FileChannel.open(a.groupPath(), StandardOpenOption.WRITE)) {
                // The header's page stays; the entries' pages are wholly past the end: a native access there would
                // be a SIGBUS ending the JVM, so the member must see the truncation before calling the library.
                ch.truncate(4096);
            }
            assertThrows(BusTruncatedException.class, a::ack);
            assertThrows(BusTruncatedException.class, a::next);
        }
    }
}
