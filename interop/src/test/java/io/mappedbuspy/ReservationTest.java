package io.mappedbuspy;

import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import io.mappedbuspy.internal.MemoryMappedFile;

/**
 * {@link MappedBusWriter#reserve}: the one fetch-and-add of many slots, which the rolling writer's reserve and the
 * Spark commit log go through.
 */
public final class ReservationTest {
    /** Scratch directory, new for each test and deleted after it. */
    @TempDir
    Path tmp;

    private static final int REC = 8;
    private static final long SLOT = Layout.slotSize(REC); // 16
    // Room for 10 slots: 8 + 10 * 16.
    private static final long FILE = Layout.FIRST_RECORD_OFFSET + 10 * SLOT;

    /** Reservations follow one another and the writes; a reservation past the end is cut there, then empty. */
    @Test
    public void reservesContiguousSlotsCutAtTheEnd() throws Exception {
        String path = tmp.resolve("r.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, FILE, REC).open();
             MemoryMappedFile mem = new MemoryMappedFile(path, FILE)) {
            assertEquals(new Reservation(8, 3), w.reserve(3));
            assertTrue(w.write(new byte[] {1}, 0, 1), "a write after the reservation");
            assertEquals(Layout.STATUS_COMMITTED, mem.getStatus(8 + 3 * SLOT), "the write took the slot after it");
            assertEquals(Layout.STATUS_NOT_SET, mem.getStatus(8), "reserved slots stay uncommitted");
            assertEquals(new Reservation(8 + 4 * SLOT, 6), w.reserve(100), "cut at the end of the file");
            assertEquals(new Reservation(8 + 104 * SLOT, 0), w.reserve(1), "none once the file is full");
        }
    }

    /** A count below one, or one whose slots overflow a long, is refused before the limit moves. */
    @Test
    public void refusesBadCounts() throws Exception {
        String path = tmp.resolve("bad.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, FILE, REC).open();
             MemoryMappedFile mem = new MemoryMappedFile(path, FILE)) {
            assertThrows(IllegalArgumentException.class, () -> w.reserve(0));
            assertThrows(IllegalArgumentException.class, () -> w.reserve(Long.MAX_VALUE / SLOT + 1));
            assertEquals(8, mem.getLongAcquire(Layout.LIMIT_OFFSET), "limit unchanged");
        }
        MappedBusWriter closed = new MappedBusWriter(path, FILE, REC);
        assertThrows(IllegalStateException.class, () -> closed.reserve(1), "not open");
    }

    /** A rolling writer's reservation stays in one segment and moves to the next when none is left. */
    @Test
    public void rollingReservationsNeverSpanSegments() throws Exception {
        String dir = tmp.resolve("rolling").toString();
        try (RollingBusWriter w = new RollingBusWriter(dir, FILE, REC).open()) {
            assertEquals(new Reservation(8, 7), w.reserve(7));
            assertEquals(new Reservation(8 + 7 * SLOT, 3), w.reserve(5), "the rest of segment 0");
            assertEquals(new Reservation(Layout.joinPosition(1, 8, FILE), 5), w.reserve(5), "segment 1");
            assertEquals(1, w.segment());
        }
    }
}
