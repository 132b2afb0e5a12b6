package io.mappedbuspy;

import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static io.mappedbuspy.Buses.assertContains;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import io.mappedbuspy.internal.BusMeta;
import io.mappedbuspy.internal.MemoryMappedFile;

/**
 * The rollback timeout has a floor ({@link Layout#MIN_ROLLBACK_TIMEOUT_MS}, the same in Python): a shorter
 * one would roll back live writers between their fetch-and-add and their commit. And a file read with the
 * wrong record size (one without metadata, which could tell) fails as corrupt rather than ending quietly.
 */
public final class RollbackTimeoutTest {
    @TempDir
    Path tmp;

    private static final String MEANING = "the rollback timeout: how long a slot may stay uncommitted before "
            + "readers roll it back; must be at least 10 ms, got ";

    @Test
    public void theFloorIsTenMillisecondsBelowTheDefault() {
        assertEquals(10, Layout.MIN_ROLLBACK_TIMEOUT_MS);
        assertTrue(Layout.MIN_ROLLBACK_TIMEOUT_MS <= Layout.DEFAULT_TIMEOUT_MS, "the default is allowed");
        assertContains(Layout.describe(), "MIN_ROLLBACK_TIMEOUT_MS=10\n");
    }

    /** 0 (roll back at once), negative and short timeouts are refused, saying what the timeout is. */
    @ParameterizedTest(name = "{0} ms")
    @ValueSource(ints = {0, -1, 1, 9, Integer.MIN_VALUE})
    public void shortTimeoutsAreRefusedByBothReaders(int ms) throws Exception {
        String path = tmp.resolve("floor.bus").toString();
        new MappedBusWriter(path, 4096, 12).open().close();
        try (MappedBusReader r = new MappedBusReader(path, 4096, 12).open()) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> r.setTimeout(ms));
            assertEquals(MEANING + ms, e.getMessage());
        }
        String dir = tmp.resolve("rolling").toString();
        new RollingBusWriter(dir, 4096, 12).open().close();
        try (RollingBusReader r = new RollingBusReader(dir, 4096, 12)) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> r.setTimeout(ms));
            assertEquals(MEANING + ms, e.getMessage());
        }
    }

    /** The floor itself is accepted and works: a crashed writer's slot is rolled back after about 10 ms. */
    @Test
    public void theFloorRollsBackAHungSlot() throws Exception {
        String path = tmp.resolve("hung.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 12).open()) {
            w.write(new byte[] {1}, 0, 1);
            long hung = Buses.allocateUncommitted(path, 4096, 12, 0, (byte) 0x55);
            w.write(new byte[] {3}, 0, 1);
            try (MappedBusReader r = new MappedBusReader(path, 4096, 12).open();
                 MemoryMappedFile mem = new MemoryMappedFile(path, 4096)) {
                r.setTimeout(Layout.MIN_ROLLBACK_TIMEOUT_MS);
                assertTrue(r.next(), "first");
                long t0 = System.nanoTime();
                assertTrue(Buses.await(r, 5000), "third, after the hung slot");
                long ms = (System.nanoTime() - t0) / 1_000_000;
                assertTrue(ms >= Layout.MIN_ROLLBACK_TIMEOUT_MS, "waited the timeout, took " + ms + " ms");
                assertEquals(Layout.STATUS_ROLLED_BACK, mem.getStatus(hung), "rolled back");
                assertEquals(1, r.rollbacks(), "rollbacks");
            }
        }
        String dir = tmp.resolve("rolling").toString();
        new RollingBusWriter(dir, 4096, 12).open().close();
        try (RollingBusReader r = new RollingBusReader(dir, 4096, 12).setTimeout(Layout.MIN_ROLLBACK_TIMEOUT_MS)
                .open()) {
            assertFalse(r.next(), "an empty rolling bus, read with the shortest timeout");
        }
    }

    /**
     * A file without metadata (as the Java original writes) holding records of 32 bytes, read as 24: the
     * limit (8 + 4 * 40) is on the 32-byte slot grid too, but the second "status" is payload bytes: the
     * reader reports corruption and the record size at open (issue 33: before any record is delivered) rather
     * than waiting on it or stopping.
     */
    @Test
    public void aWrongRecordSizeOnAFileWithoutMetadataIsCorruption() throws Exception {
        String path = tmp.resolve("legacy.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 32).open()) {
            for (int i = 0; i < 4; i++) {
                byte[] b = new byte[32];
                java.util.Arrays.fill(b, (byte) (0x40 + i));
                assertTrue(w.write(b, 0, 32), "write");
            }
        }
        Files.delete(BusMeta.metaPath(path));
        CorruptBusException e = assertThrows(CorruptBusException.class,
                () -> new MappedBusReader(path, 4096, 24, true).open());
        assertContains(e.getMessage(), path + ": with recordSize 24 the record at 40 has status 1077952576");
        assertContains(e.getMessage(), "another recordSize");
        try (MappedBusReader r = new MappedBusReader(path, 4096, 32, true).open()) {
            assertNull(r.busId(), "no metadata");
            for (int i = 0; i < 4; i++) {
                assertTrue(r.next(), "the right record size reads them all");
            }
        }
        // Off the grid: the limit says so at open.
        e = assertThrows(CorruptBusException.class,
                () -> new MappedBusReader(path, 4096, 20, true).open());
        assertContains(e.getMessage(), "limit 168 in " + path + " is not on a record boundary for recordSize 20");
    }
}
