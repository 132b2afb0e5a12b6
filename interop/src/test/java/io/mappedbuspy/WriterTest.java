package io.mappedbuspy;

import io.mappedbuspy.messages.PriceUpdate;

import java.io.EOFException;
import java.io.File;
import java.io.RandomAccessFile;
import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import static io.mappedbuspy.Buses.assertContains;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import io.mappedbuspy.internal.BusMeta;
import io.mappedbuspy.internal.MemoryMappedFile;

/** The writer's protocol and its argument and state checks. */
public final class WriterTest {
    /** Scratch directory, new for each test and deleted after it. */
    @TempDir
    Path tmp;

    /** A new file gets limit 8 from the first writer; the file is sized to a page multiple. */
    @Test
    public void firstWriterInitialisesLimitAndSizesTheFile() throws Exception {
        String path = tmp.resolve("new.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 5000, 16).open()) {
            assertEquals(8192, new File(path).length(), "file length");
            try (MemoryMappedFile mem = new MemoryMappedFile(path, 5000)) {
                assertEquals(8, mem.getLongAcquire(0), "limit");
                assertTrue(w.write(new byte[] {1, 2, 3}, 0, 3), "write");
                assertEquals(32, mem.getLongAcquire(0), "limit after one record");
                assertEquals(1, mem.getStatus(8), "status");
                assertEquals(3, mem.getInt(12), "meta");
                assertEquals(0x030201, mem.getInt(16), "payload");
            }
        }
        try (MappedBusWriter w = new MappedBusWriter(path, 5000, 16).open();
             MemoryMappedFile mem = new MemoryMappedFile(path, 5000)) {
            assertEquals(32, mem.getLongAcquire(0), "a second writer keeps the limit");
            w.write(new byte[0], 0, 0);
            assertEquals(56, mem.getLongAcquire(0), "limit");
        }
    }

    /** A payload longer than the record is refused before anything is allocated or written. */
    @Test
    public void payloadTooLongIsRejectedBeforeAllocation() throws Exception {
        String path = tmp.resolve("long.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 8).open()) {
            w.write(new byte[] {1, 2, 3, 4, 5, 6, 7, 8}, 0, 8);
            w.write(new byte[] {9}, 0, 1);
            byte[] before = Buses.bytes(path);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> w.write(new byte[9], 0, 9));
            assertContains(e.getMessage(), "9");
            assertThrows(IllegalArgumentException.class, () -> w.write(new byte[4], 0, -1));
            assertThrows(IllegalArgumentException.class, () -> w.write(new byte[4], 2, 3));
            assertThrows(IllegalArgumentException.class, () -> w.write(new byte[4], -1, 2));
            assertArrayEquals(before, Buses.bytes(path), "file unchanged");
        }
        try (MappedBusReader r = new MappedBusReader(path, 4096, 8).open()) {
            byte[] buf = new byte[8];
            assertTrue(r.next(), "first");
            assertEquals(8, r.readBuffer(buf, 0), "len");
            assertTrue(r.next(), "second");
            assertEquals(1, r.readBuffer(buf, 0), "len");
            assertEquals(9, buf[0], "byte");
            assertFalse(r.next(), "nothing else");
        }
    }

    /** Zero or negative sizes, and files too small for one record, are refused before any file exists. */
    @ParameterizedTest(name = "{0} fileSize={1} recordSize={2}")
    @CsvSource({
        "writer, 4096, 0", "writer, 4096, -1", "writer, 0, 8", "writer, -4096, 8", "writer, 23, 8",
        "writer, 1099511627776, 2147483647", "reader, 4096, 0", "reader, 10, 8",
    })
    public void badSizesAreRejected(String who, long fileSize, int recordSize) {
        String path = tmp.resolve("sizes.bus").toString();
        assertThrows(IllegalArgumentException.class, () -> {
            if (who.equals("writer")) {
                new MappedBusWriter(path, fileSize, recordSize).open().close();
            } else {
                new MappedBusReader(path, fileSize, recordSize).open().close();
            }
        });
        assertFalse(new File(path).exists(), "no file was created");
    }

    /** The smallest file holds exactly one record; the next write is EOF. */
    @Test
    public void smallestFileHoldsOneRecord() throws Exception {
        String path = tmp.resolve("min.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 24, 8).open()) {
            assertTrue(w.write(new byte[8], 0, 8), "one record");
            assertThrows(EOFException.class, () -> w.write(new byte[8], 0, 8));
        }
    }

    /** A full bus throws EOF with the numbers; readers reach EOF without waiting for their timeout. */
    @Test
    public void fullBusThrowsEofAndReaderReachesEofWithoutTimeout() throws Exception {
        String path = tmp.resolve("full.bus").toString();
        long fileSize = 80; // 3 slots of 24 bytes after the limit
        try (MappedBusWriter w = new MappedBusWriter(path, fileSize, 16).open()) {
            for (int i = 0; i < 3; i++) {
                assertTrue(w.write(new PriceUpdate(i, i, i)), "write " + i);
            }
            EOFException e = assertThrows(EOFException.class, () -> w.write(new PriceUpdate()));
            assertContains(e.getMessage(), "80");
            assertThrows(EOFException.class, () -> w.write(new byte[1], 0, 1));
        }
        try (MappedBusReader r = new MappedBusReader(path, fileSize, 16).open()) {
            r.setTimeout(10_000);
            long start = System.nanoTime();
            for (int i = 0; i < 3; i++) {
                assertTrue(r.next(), "read " + i);
            }
            assertThrows(EOFException.class, r::next);
            assertThrows(EOFException.class, r::next);
            long ms = (System.nanoTime() - start) / 1_000_000;
            assertTrue(ms < 1000, "EOF took " + ms + " ms");
        }
    }

    /** A limit that is not on a record boundary for this record size fails open. */
    @Test
    public void limitOffRecordBoundaryFailsOpen() throws Exception {
        String path = tmp.resolve("limit.bus").toString();
        try (RandomAccessFile raf = new RandomAccessFile(path, "rw")) {
            raf.setLength(4096);
            raf.seek(0);
            raf.write(new byte[] {30, 0, 0, 0, 0, 0, 0, 0}); // 30 - 8 = 22 is not a multiple of 20
        }
        CorruptBusException e = assertThrows(CorruptBusException.class,
                () -> new MappedBusWriter(path, 4096, 12).open());
        assertContains(e.getMessage(), "limit 30");
        assertContains(e.getMessage(), "recordSize 12");
        assertThrows(CorruptBusException.class, () -> new MappedBusReader(path, 4096, 12).open());
        assertThrows(CorruptBusException.class, () -> new MappedBusReader(path, 4096, 12, true).open());
        // 30 is a boundary for recordSize 14 (slot 22).
        new MappedBusWriter(path, 4096, 14).open().close();
    }

    /**
     * A corrupt limit at the last record boundary below 2^63 (recordSize 9: 2^63 - 1) is the end of the bus to
     * readers and writers alike: the bounds checks do not overflow into a read or write outside the mapping
     * (the fuzz campaign found a reader reading 4 bytes at 2^63 - 1 after seekToEnd).
     */
    @Test
    public void limitNearLongMaxIsTheEndNotAnOverflow() throws Exception {
        String path = tmp.resolve("maxlimit.bus").toString();
        assertTrue(Layout.isRecordBoundary(Long.MAX_VALUE, 9), "2^63 - 1 is a boundary for slot 17");
        try (RandomAccessFile raf = new RandomAccessFile(path, "rw")) {
            raf.setLength(4096);
            raf.seek(0);
            raf.writeLong(Long.reverseBytes(Long.MAX_VALUE)); // the limit is little-endian
        }
        try (MappedBusReader r = new MappedBusReader(path, 4096, 9).open()) {
            r.seekToEnd();
            assertThrows(EOFException.class, r::next);
        }
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 9).open()) {
            assertThrows(EOFException.class, () -> w.write(new byte[] {1}, 0, 1));
        }
    }

    /** Reopening with a smaller file size maps less but never truncates the file. */
    @Test
    public void reopeningWithSmallerFileSizeNeverShrinks() throws Exception {
        String path = tmp.resolve("shrink.bus").toString();
        try (MappedBusWriter big = new MappedBusWriter(path, 1 << 20, 16).open()) {
            big.write(new byte[] {7}, 0, 1);
            // Other sizes on a bus with metadata are refused (MetadataTest); a file without it is not.
            java.nio.file.Files.delete(BusMeta.metaPath(path));
            try (MappedBusWriter small = new MappedBusWriter(path, 4096, 16).open();
                 MappedBusReader r = new MappedBusReader(path, 8192, 16).open()) {
                assertEquals(1 << 20, new File(path).length(), "length");
                small.write(new byte[] {8}, 0, 1);
                big.write(new byte[] {9}, 0, 1);
                byte[] buf = new byte[16];
                int n = 0;
                while (r.next()) {
                    r.readBuffer(buf, 0);
                    n++;
                }
                assertEquals(3, n, "records");
                assertEquals(9, buf[0], "last");
            }
            assertEquals(1 << 20, new File(path).length(), "length");
        }
    }

    /** A closed or never-opened writer says so. */
    @Test
    public void closedWriterThrows() throws Exception {
        String path = tmp.resolve("closed.bus").toString();
        MappedBusWriter w = new MappedBusWriter(path, 4096, 8);
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> w.write(new byte[1], 0, 1));
        assertContains(e.getMessage(), "not open");
        w.open();
        assertThrows(IllegalStateException.class, w::open);
        w.close();
        e = assertThrows(IllegalStateException.class, () -> w.write(new PriceUpdate()));
        assertContains(e.getMessage(), "closed");
        w.close();
        assertThrows(IllegalStateException.class, w::open);
    }

    /** Several writer threads share one bus: every record is delivered once, each writer's in order. */
    @Test
    @Timeout(120)
    public void concurrentWritersDeliverEveryRecordOnceInOrder() throws Exception {
        String path = tmp.resolve("mw.bus").toString();
        int writers = 4;
        int perWriter = 20_000;
        long fileSize = Layout.recordOffset((long) writers * perWriter, 8);
        Thread[] threads = new Thread[writers];
        Throwable[] errors = new Throwable[writers];
        for (int k = 0; k < writers; k++) {
            final int id = k;
            threads[k] = new Thread(() -> {
                try (MappedBusWriter w = new MappedBusWriter(path, fileSize, 8).open()) {
                    byte[] rec = new byte[8];
                    for (int i = 0; i < perWriter; i++) {
                        rec[0] = (byte) id;
                        rec[4] = (byte) i;
                        rec[5] = (byte) (i >>> 8);
                        rec[6] = (byte) (i >>> 16);
                        if (!w.write(rec, 0, 8)) {
                            throw new AssertionError("record rolled back");
                        }
                    }
                } catch (Throwable t) {
                    errors[id] = t;
                }
            });
        }
        new MappedBusWriter(path, fileSize, 8).open().close();
        try (MappedBusReader r = new MappedBusReader(path, fileSize, 8).open()) {
            r.setTimeout(30_000); // a descheduled writer thread must not be rolled back
            for (Thread t : threads) {
                t.start();
            }
            int[] nextExpected = new int[writers];
            byte[] buf = new byte[8];
            int total = 0;
            while (total < writers * perWriter) {
                if (!Buses.await(r, 30_000)) {
                    break;
                }
                assertEquals(8, r.readBuffer(buf, 0), "length");
                int id = buf[0];
                int i = (buf[4] & 0xFF) | (buf[5] & 0xFF) << 8 | (buf[6] & 0xFF) << 16;
                assertEquals(nextExpected[id], i, "order of writer " + id);
                nextExpected[id]++;
                total++;
            }
            for (Thread t : threads) {
                t.join();
            }
            for (Throwable t : errors) {
                if (t != null) {
                    throw new AssertionError("writer failed", t);
                }
            }
            assertEquals(writers * perWriter, total, "records");
            assertThrows(EOFException.class, r::next);
            assertEquals(0, r.rollbacks() + r.rolledBackSkipped(), "no rollbacks");
        }
    }
}
