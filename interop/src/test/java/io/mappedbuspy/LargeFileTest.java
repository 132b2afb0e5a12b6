package io.mappedbuspy;

import io.mappedbuspy.messages.Trade;

import java.io.EOFException;
import java.io.File;
import java.io.RandomAccessFile;
import java.nio.file.Path;
import java.util.Arrays;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import io.mappedbuspy.internal.MemoryMappedFile;

/** A sparse 2.5 GiB bus: records across the 1 GiB and 2 GiB mapping-window boundaries and at the very end. */
public final class LargeFileTest {
    /** Scratch directory, new for each test and deleted after it. */
    @TempDir
    Path tmp;

    private static final long GIB = 1L << 30;
    private static final long FILE_SIZE = 5 * GIB / 2;
    private static final int RECORD = 100;
    private static final long SLOT = Layout.slotSize(RECORD);

    /** Index of the record whose slot contains {@code pos}. */
    private static long slotIndexAt(long pos) {
        return (pos - Layout.FIRST_RECORD_OFFSET) / SLOT;
    }

    /** Writes three records starting at record k (set as the limit first) and reads them back. */
    private static void writeAndReadAt(String path, long k) throws Exception {
        try (MemoryMappedFile mem = new MemoryMappedFile(path, FILE_SIZE)) {
            long limit = mem.getLongAcquire(0);
            assertTrue(mem.compareAndSetLong(0, limit, Layout.recordOffset(k, RECORD)), "set limit");
        }
        try (MappedBusWriter w = new MappedBusWriter(path, FILE_SIZE, RECORD).open()) {
            for (int i = 0; i < 3; i++) {
                assertTrue(w.write(Buses.pattern(RECORD, (int) k + i), 0, RECORD - i), "write");
            }
            assertTrue(w.write(new Trade(k, 0.5, 7)), "trade");
        }
        try (MappedBusReader r = new MappedBusReader(path, FILE_SIZE, RECORD).open()) {
            r.seek(Layout.recordOffset(k, RECORD));
            byte[] buf = new byte[RECORD];
            for (int i = 0; i < 3; i++) {
                assertTrue(r.next(), "next");
                Arrays.fill(buf, (byte) 0);
                assertEquals(Layout.recordOffset(k + i, RECORD), r.recordPosition(), "position");
                assertEquals(RECORD - i, r.readBuffer(buf, 0), "length");
                byte[] expect = Buses.pattern(RECORD, (int) k + i);
                for (int j = RECORD - i; j < RECORD; j++) {
                    expect[j] = 0;
                }
                assertArrayEquals(expect, buf, "payload at " + r.recordPosition());
            }
            assertTrue(r.next(), "next");
            Trade t = r.readMessage(new Trade());
            assertEquals(k, t.getId(), "trade id");
            assertEquals(7, t.getQuantity(), "trade qty");
            assertFalse(r.next(), "end");
        }
    }

    /** Records across both window boundaries and in the last slot of a 2.5 GiB file. */
    @Test
    @Timeout(120)
    public void fileLargerThan2GiBWorksAcrossSegments() throws Exception {
        String path = tmp.resolve("large.bus").toString();
        try {
            try (RandomAccessFile raf = new RandomAccessFile(path, "rw")) {
                raf.setLength(FILE_SIZE); // sparse
                raf.seek(0);
                raf.write(new byte[] {8, 0, 0, 0, 0, 0, 0, 0});
            }
            // The record just before each boundary straddles it.
            long k1 = slotIndexAt(GIB) - 1;
            assertTrue(Layout.recordOffset(k1 + 1, RECORD) < GIB
                    && Layout.recordOffset(k1 + 2, RECORD) > GIB, "straddles 1 GiB");
            writeAndReadAt(path, k1);
            long k2 = slotIndexAt(2 * GIB) - 1;
            writeAndReadAt(path, k2);

            // Primitive accesses straddling a boundary, seen through a second mapping.
            try (MemoryMappedFile a = new MemoryMappedFile(path, FILE_SIZE);
                 MemoryMappedFile b = new MemoryMappedFile(path, FILE_SIZE)) {
                a.putLong(GIB - 4, 0x1122334455667788L);
                assertEquals(0x1122334455667788L, b.getLong(GIB - 4), "long across 1 GiB");
                assertEquals(0x11223344, b.getInt(GIB), "high half");
                a.putDouble(2 * GIB - 3, 1.25);
                assertEquals(1.25, b.getDouble(2 * GIB - 3), "double across 2 GiB");
                byte[] big = Buses.pattern(10_000, 3);
                a.putBytes(2 * GIB - 5000, big, 0, big.length);
                byte[] back = new byte[big.length];
                b.getBytes(2 * GIB - 5000, back, 0, back.length);
                assertArrayEquals(big, back, "bytes across 2 GiB");
                assertEquals(FILE_SIZE, b.size(), "mapped");
                assertThrows(IndexOutOfBoundsException.class, () -> b.getLong(FILE_SIZE - 4));
            }

            // The last slot that fits, then EOF for the writer and the reader.
            long last = slotIndexAt(FILE_SIZE) - 1;
            while (Layout.recordOffset(last + 1, RECORD) > FILE_SIZE) {
                last--;
            }
            try (MemoryMappedFile mem = new MemoryMappedFile(path, FILE_SIZE)) {
                mem.compareAndSetLong(0, mem.getLongAcquire(0), Layout.recordOffset(last, RECORD));
            }
            try (MappedBusWriter w = new MappedBusWriter(path, FILE_SIZE, RECORD).open();
                 MappedBusReader r = new MappedBusReader(path, FILE_SIZE, RECORD).open()) {
                assertTrue(w.write(Buses.pattern(RECORD, 5), 0, RECORD), "last slot");
                assertThrows(EOFException.class, () -> w.write(new byte[1], 0, 1));
                r.seek(Layout.recordOffset(last, RECORD));
                assertTrue(r.next(), "last record");
                byte[] buf = new byte[RECORD];
                r.readBuffer(buf, 0);
                assertArrayEquals(Buses.pattern(RECORD, 5), buf, "last payload");
                r.setTimeout(10_000);
                long start = System.nanoTime();
                assertThrows(EOFException.class, r::next);
                assertTrue(System.nanoTime() - start < 1_000_000_000L, "EOF at once");
            }
            assertEquals(FILE_SIZE, new File(path).length(), "length");
        } finally {
            new File(path).delete();
        }
    }
}
