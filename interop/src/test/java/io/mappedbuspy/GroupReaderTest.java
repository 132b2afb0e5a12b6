package io.mappedbuspy;

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
