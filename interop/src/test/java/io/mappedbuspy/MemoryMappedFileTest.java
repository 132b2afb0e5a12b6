package io.mappedbuspy;

import io.mappedbuspy.testing.Test;
import io.mappedbuspy.testing.TestFiles;

import java.io.File;
import java.nio.ReadOnlyBufferException;
import java.util.concurrent.atomic.AtomicBoolean;

import static io.mappedbuspy.testing.Assert.assertArrayEquals;
import static io.mappedbuspy.testing.Assert.assertContains;
import static io.mappedbuspy.testing.Assert.assertEquals;
import static io.mappedbuspy.testing.Assert.assertFalse;
import static io.mappedbuspy.testing.Assert.assertThrows;
import static io.mappedbuspy.testing.Assert.assertTrue;

/** Bounds checks, misaligned statuses and read-only mappings. */
public final class MemoryMappedFileTest {
    /**
     * Threads of one JVM opening and growing the same file at once (two Spark tasks, say) take
     * turns instead of failing with OverlappingFileLockException from the per-JVM file lock.
     */
    @Test
    public void threadsOfOneJvmGrowTheSameFileAtOnce() throws Exception {
        for (int round = 0; round < 20; round++) {
            String path = TestFiles.newPath("grow-race.bus");
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
            assertEquals("grown to the largest size", Layout.mappedSize(1_300_000), new File(path).length());
        }
    }

    /** Every access outside the mapping throws instead of touching memory. */
    @Test
    public void outOfBoundsAccessThrows() throws Exception {
        String path = TestFiles.newPath("bounds.bus");
        try (MemoryMappedFile mem = new MemoryMappedFile(path, 100)) {
            assertEquals("mapped", 4096, mem.size());
            assertEquals("file", 4096, new File(path).length());
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
            assertEquals("last long", -1L, mem.getLong(4088));
        }
    }

    /** Misaligned atomics are refused by the int/long accessors (the status helpers handle them). */
    @Test
    public void misalignedAtomicAccessorsRefuse() throws Exception {
        try (MemoryMappedFile mem = new MemoryMappedFile(TestFiles.newPath("mis.bus"), 4096)) {
            assertThrows(IllegalStateException.class, () -> mem.getIntAcquire(6));
            assertThrows(IllegalStateException.class, () -> mem.compareAndSetLong(4, 0, 1));
        }
    }

    /** After close every access fails with IllegalStateException. */
    @Test
    public void closedMappingThrows() throws Exception {
        MemoryMappedFile mem = new MemoryMappedFile(TestFiles.newPath("c.bus"), 4096);
        mem.putInt(0, 1);
        mem.close();
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> mem.getInt(0));
        assertContains(e.getMessage(), "closed");
        assertThrows(IllegalStateException.class, () -> mem.getStatus(10));
        assertThrows(IllegalStateException.class, () -> mem.getBytes(0, new byte[4], 0, 4));
        mem.close();
    }

    /** A misaligned status is read and swapped through its low byte; neighbouring bytes are kept. */
    @Test
    public void misalignedStatusCasChangesOnlyTheStatus() throws Exception {
        try (MemoryMappedFile mem = new MemoryMappedFile(TestFiles.newPath("mis10.bus"), 4096)) {
            for (long pos : new long[] {25, 26, 27}) {
                mem.putBytes(20, new byte[] {9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9}, 0, 16);
                mem.putInt(pos, 0);
                assertEquals("not set", 0, mem.getStatus(pos));
                assertFalse("wrong expected", mem.casStatus(pos, 1, 2));
                assertTrue("0 -> 1", mem.casStatus(pos, 0, 1));
                assertEquals("committed", 1, mem.getStatus(pos));
                assertFalse("already 1", mem.casStatus(pos, 0, 2));
                assertEquals("int32", 1, mem.getInt(pos));
                assertEquals("byte before", 9, mem.getByte(pos - 1));
                assertEquals("byte after", 9, mem.getByte(pos + 4));
                mem.putInt(pos, 0x0100);
                assertEquals("corrupt upper byte shows", 0x0100, mem.getStatus(pos));
                assertFalse("corrupt status never matches", mem.casStatus(pos, 0, 1));
                assertThrows(IllegalArgumentException.class, () -> mem.casStatus(pos, 0, 256));
            }
        }
    }

    /** The misaligned CAS retries while another thread writes the bytes sharing its word. */
    @Test(timeoutSeconds = 60)
    public void misalignedStatusCasKeepsConcurrentNeighbourWrites() throws Exception {
        try (MemoryMappedFile mem = new MemoryMappedFile(TestFiles.newPath("race.bus"), 4096)) {
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
                assertTrue("0 -> 1", mem.casStatus(status, 0, 1));
                assertTrue("1 -> 0", mem.casStatus(status, 1, 0));
                flips++;
            }
            stop.set(true);
            neighbour.join();
            assertEquals("neighbour kept", 0x7A, mem.getByte(25));
            assertEquals("neighbour kept", 0x7B, mem.getByte(24));
            assertEquals("status", 0, mem.getStatus(status));
            assertTrue("some flips", flips > 0);
        }
    }

    /** Record size 10: every status is misaligned, and write, commit, read and rollback still work. */
    @Test
    public void recordSize10RoundTripsAndRollsBack() throws Exception {
        String path = TestFiles.newPath("r10.bus");
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 10).open();
             MappedBusReader r = new MappedBusReader(path, 4096, 10).open()) {
            for (int i = 0; i < 20; i++) {
                assertTrue("write", w.write(Buses.pattern(10, i), 0, 10 - i % 3));
            }
            long crashed = Buses.allocateUncommitted(path, 4096, 10, 10, (byte) 0xCC);
            assertTrue("write after crash", w.write(Buses.pattern(10, 99), 0, 10));
            r.setTimeout(0);
            byte[] buf = new byte[10];
            for (int i = 0; i < 20; i++) {
                assertTrue("next", r.next());
                assertEquals("len", 10 - i % 3, r.readBuffer(buf, 0));
                byte[] expect = Buses.pattern(10, i);
                for (int j = 0; j < 10 - i % 3; j++) {
                    assertEquals("byte", expect[j], buf[j]);
                }
            }
            assertTrue("after the crashed slot", r.next());
            assertEquals("len", 10, r.readBuffer(buf, 0));
            assertArrayEquals("payload", Buses.pattern(10, 99), buf);
            assertEquals("rollbacks", 1, r.rollbacks());
            try (MemoryMappedFile mem = new MemoryMappedFile(path, 4096)) {
                assertEquals("crashed slot", 2, mem.getStatus(crashed));
                assertEquals("its int32", 2, mem.getInt(crashed));
                assertEquals("previous payload", Buses.pattern(10, 19)[8], mem.getByte(crashed - 2));
                assertEquals("its metadata", 10, mem.getInt(crashed + 4));
            }
        }
    }

    /** A read-only mapping reads but refuses every write. */
    @Test
    public void readOnlyMappingRefusesWrites() throws Exception {
        String path = TestFiles.newPath("romap.bus");
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 8).open()) {
            w.write(new byte[] {1}, 0, 1);
        }
        try (MemoryMappedFile mem = new MemoryMappedFile(path, 1 << 20, true)) {
            assertTrue("ro", mem.isReadOnly());
            assertEquals("maps only what exists", 4096, mem.size());
            assertEquals("limit", 24, mem.getLongAcquire(0));
            assertEquals("status", 1, mem.getStatus(8));
            assertThrows(ReadOnlyBufferException.class, () -> mem.putInt(100, 1));
            assertThrows(ReadOnlyBufferException.class, () -> mem.casStatus(8, 1, 2));
            assertThrows(ReadOnlyBufferException.class, () -> mem.getAndAddLong(0, 1));
        }
        assertEquals("not grown", 4096, new File(path).length());
    }
}
