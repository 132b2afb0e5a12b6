package io.mappedbuspy;

import java.io.File;
import java.nio.ReadOnlyBufferException;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicBoolean;

import org.junit.jupiter.api.RepeatedTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static io.mappedbuspy.Buses.assertContains;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import io.mappedbuspy.internal.MemoryMappedFile;

/** Bounds checks, misaligned statuses and read-only mappings. */
public final class MemoryMappedFileTest {
    /** Scratch directory, new for each test and deleted after it. */
    @TempDir
    Path tmp;

    /**
     * Threads of one JVM opening and growing the same file at once (two Spark tasks, say) take
     * turns instead of failing with OverlappingFileLockException from the per-JVM file lock.
     */
    @RepeatedTest(20)
    public void threadsOfOneJvmGrowTheSameFileAtOnce() throws Exception {
        String path = tmp.resolve("grow-race.bus").toString();
        Thread[] threads = new Thread[4];
        Exception[] failure = new Exception[1];
        for (int i = 0; i < threads.length; i++) {
            long fileSize = 1_000_000 + i * 100_000L;
            threads[i] = new Thread(() -> {
                // MemoryMappedFile, not a writer: a writer refuses sizes other than its metadata's.
                try (MemoryMappedFile m = new MemoryMappedFile(path, fileSize)) {
                    m.putByte(100, (byte) 1);
                } catch (Exception e) {
                    failure[0] = e;
                }
            });
        }
        for (Thread t : threads) {
            t.start();
        }
        for (Thread t : threads) {
            t.join();
        }
        if (failure[0] != null) {
            throw failure[0];
        }
        assertEquals(Layout.mappedSize(1_300_000), new File(path).length(), "grown to the largest size");
    }

    /** Every access outside the mapping throws instead of touching memory. */
    @Test
    public void outOfBoundsAccessThrows() throws Exception {
        String path = tmp.resolve("bounds.bus").toString();
        try (MemoryMappedFile mem = new MemoryMappedFile(path, 100)) {
            assertEquals(4096, mem.size(), "mapped");
            assertEquals(4096, new File(path).length(), "file");
            IndexOutOfBoundsException e = assertThrows(IndexOutOfBoundsException.class, () -> mem.getInt(4093));
            assertContains(e.getMessage(), "4093");
            assertThrows(IndexOutOfBoundsException.class, () -> mem.getLong(-8));
            assertThrows(IndexOutOfBoundsException.class, () -> mem.getLongAcquire(4096));
            assertThrows(IndexOutOfBoundsException.class, () -> mem.getAndAddLong(Long.MAX_VALUE - 3, 1));
            assertThrows(IndexOutOfBoundsException.class, () -> mem.putByte(4096, (byte) 1));
            assertThrows(IndexOutOfBoundsException.class, () -> mem.getStatus(4094));
            assertThrows(IndexOutOfBoundsException.class, () -> mem.casStatus(4093, 0, 1));
            assertThrows(IndexOutOfBoundsException.class, () -> mem.putBytes(4000, new byte[97], 0, 97));
            assertThrows(IndexOutOfBoundsException.class, () -> mem.getBytes(4000, new byte[10], 5, 6));
            mem.putBytes(4000, new byte[96], 0, 96);
            mem.putLong(4088, -1L);
            assertEquals(-1L, mem.getLong(4088), "last long");
        }
    }

    /** Misaligned atomics are refused by the int/long accessors (the status helpers handle them). */
    @Test
    public void misalignedAtomicAccessorsRefuse() throws Exception {
        try (MemoryMappedFile mem = new MemoryMappedFile(tmp.resolve("mis.bus").toString(), 4096)) {
            assertThrows(IllegalStateException.class, () -> mem.getIntAcquire(6));
            assertThrows(IllegalStateException.class, () -> mem.compareAndSetLong(4, 0, 1));
        }
    }

    /** After close every access fails with IllegalStateException. */
    @Test
    public void closedMappingThrows() throws Exception {
        MemoryMappedFile mem = new MemoryMappedFile(tmp.resolve("c.bus").toString(), 4096);
        mem.putInt(0, 1);
        mem.close();
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> mem.getInt(0));
        assertContains(e.getMessage(), "closed");
        assertThrows(IllegalStateException.class, () -> mem.getStatus(10));
        assertThrows(IllegalStateException.class, () -> mem.getBytes(0, new byte[4], 0, 4));
        mem.close();
    }

    /** A misaligned status is read and swapped through its low byte; neighbouring bytes are kept. */
    @ParameterizedTest(name = "status at {0}")
    @ValueSource(longs = {25, 26, 27})
    public void misalignedStatusCasChangesOnlyTheStatus(long pos) throws Exception {
        try (MemoryMappedFile mem = new MemoryMappedFile(tmp.resolve("mis10.bus").toString(), 4096)) {
            mem.putBytes(20, new byte[] {9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9}, 0, 16);
            mem.putInt(pos, 0);
            assertEquals(0, mem.getStatus(pos), "not set");
            assertFalse(mem.casStatus(pos, 1, 2), "wrong expected");
            assertTrue(mem.casStatus(pos, 0, 1), "0 -> 1");
            assertEquals(1, mem.getStatus(pos), "committed");
            assertFalse(mem.casStatus(pos, 0, 2), "already 1");
            assertEquals(1, mem.getInt(pos), "int32");
            assertEquals(9, mem.getByte(pos - 1), "byte before");
            assertEquals(9, mem.getByte(pos + 4), "byte after");
            mem.putInt(pos, 0x0100);
            assertEquals(0x0100, mem.getStatus(pos), "corrupt upper byte shows");
            assertFalse(mem.casStatus(pos, 0, 1), "corrupt status never matches");
            assertThrows(IllegalArgumentException.class, () -> mem.casStatus(pos, 0, 256));
        }
    }

    /** The misaligned CAS retries while another thread writes the bytes sharing its word. */
    @Test
    @Timeout(60)
    public void misalignedStatusCasKeepsConcurrentNeighbourWrites() throws Exception {
        try (MemoryMappedFile mem = new MemoryMappedFile(tmp.resolve("race.bus").toString(), 4096)) {
            long status = 26; // word 24..27 also holds bytes 24 and 25 (previous record's payload)
            AtomicBoolean stop = new AtomicBoolean();
            Thread neighbour = new Thread(() -> {
                byte b = 0;
                while (!stop.get()) {
                    mem.putByte(25, ++b);
                    mem.putByte(24, b);
                }
                mem.putByte(25, (byte) 0x7A);
                mem.putByte(24, (byte) 0x7B);
            });
            neighbour.start();
            int flips = 0;
            long end = System.nanoTime() + 300_000_000L;
            while (System.nanoTime() < end) {
                assertTrue(mem.casStatus(status, 0, 1), "0 -> 1");
                assertTrue(mem.casStatus(status, 1, 0), "1 -> 0");
                flips++;
            }
            stop.set(true);
            neighbour.join();
            assertEquals(0x7A, mem.getByte(25), "neighbour kept");
            assertEquals(0x7B, mem.getByte(24), "neighbour kept");
            assertEquals(0, mem.getStatus(status), "status");
            assertTrue(flips > 0, "some flips");
        }
    }

    /** Record size 10: every status is misaligned, and write, commit, read and rollback still work. */
    @Test
    public void recordSize10RoundTripsAndRollsBack() throws Exception {
        String path = tmp.resolve("r10.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 10).open();
             MappedBusReader r = new MappedBusReader(path, 4096, 10).open()) {
            for (int i = 0; i < 20; i++) {
                assertTrue(w.write(Buses.pattern(10, i), 0, 10 - i % 3), "write");
            }
            long crashed = Buses.allocateUncommitted(path, 4096, 10, 10, (byte) 0xCC);
            assertTrue(w.write(Buses.pattern(10, 99), 0, 10), "write after crash");
            r.setTimeout(Layout.MIN_ROLLBACK_TIMEOUT_MS);
            byte[] buf = new byte[10];
            for (int i = 0; i < 20; i++) {
                assertTrue(r.next(), "next");
                assertEquals(10 - i % 3, r.readBuffer(buf, 0), "len");
                byte[] expect = Buses.pattern(10, i);
                for (int j = 0; j < 10 - i % 3; j++) {
                    assertEquals(expect[j], buf[j], "byte");
                }
            }
            assertTrue(Buses.await(r, 5000), "after the crashed slot, rolled back");
            assertEquals(10, r.readBuffer(buf, 0), "len");
            assertArrayEquals(Buses.pattern(10, 99), buf, "payload");
            assertEquals(1, r.rollbacks(), "rollbacks");
            try (MemoryMappedFile mem = new MemoryMappedFile(path, 4096)) {
                assertEquals(2, mem.getStatus(crashed), "crashed slot");
                assertEquals(2, mem.getInt(crashed), "its int32");
                assertEquals(Buses.pattern(10, 19)[8], mem.getByte(crashed - 2), "previous payload");
                assertEquals(10, mem.getInt(crashed + 4), "its metadata");
            }
        }
    }

    /** A read-only mapping reads but refuses every write. */
    @Test
    public void readOnlyMappingRefusesWrites() throws Exception {
        String path = tmp.resolve("romap.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 8).open()) {
            w.write(new byte[] {1}, 0, 1);
        }
        try (MemoryMappedFile mem = new MemoryMappedFile(path, 1 << 20, true)) {
            assertTrue(mem.isReadOnly(), "ro");
            assertEquals(4096, mem.size(), "maps only what exists");
            assertEquals(24, mem.getLongAcquire(0), "limit");
            assertEquals(1, mem.getStatus(8), "status");
            assertThrows(ReadOnlyBufferException.class, () -> mem.putInt(100, 1));
            assertThrows(ReadOnlyBufferException.class, () -> mem.casStatus(8, 1, 2));
            assertThrows(ReadOnlyBufferException.class, () -> mem.getAndAddLong(0, 1));
        }
        assertEquals(4096, new File(path).length(), "not grown");
    }
}
