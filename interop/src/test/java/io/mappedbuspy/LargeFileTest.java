package io.mappedbuspy;

import io.mappedbuspy.messages.Trade;
import io.mappedbuspy.testing.Test;
import io.mappedbuspy.testing.TestFiles;

import java.io.EOFException;
import java.io.File;
import java.io.RandomAccessFile;
import java.util.Arrays;

import static io.mappedbuspy.testing.Assert.assertArrayEquals;
import static io.mappedbuspy.testing.Assert.assertEquals;
import static io.mappedbuspy.testing.Assert.assertFalse;
import static io.mappedbuspy.testing.Assert.assertThrows;
import static io.mappedbuspy.testing.Assert.assertTrue;

/** A sparse 2.5 GiB bus: records across the 1 GiB and 2 GiB segment boundaries and at the very end. */
public final class LargeFileTest {
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
            assertTrue("set limit", mem.compareAndSetLong(0, limit, Layout.recordOffset(k, RECORD)));
        }
        try (MappedBusWriter w = new MappedBusWriter(path, FILE_SIZE, RECORD).open()) {
            for (int i = 0; i < 3; i++) {
                assertTrue("write", w.write(Buses.pattern(RECORD, (int) k + i), 0, RECORD - i));
            }
            assertTrue("trade", w.write(new Trade(k, 0.5, 7)));
        }
        try (MappedBusReader r = new MappedBusReader(path, FILE_SIZE, RECORD).open()) {
            r.seek(Layout.recordOffset(k, RECORD));
            byte[] buf = new byte[RECORD];
            for (int i = 0; i < 3; i++) {
                assertTrue("next", r.next());
                Arrays.fill(buf, (byte) 0);
                assertEquals("position", Layout.recordOffset(k + i, RECORD), r.recordPosition());
                assertEquals("length", RECORD - i, r.readBuffer(buf, 0));
                byte[] expect = Buses.pattern(RECORD, (int) k + i);
                for (int j = RECORD - i; j < RECORD; j++) {
                    expect[j] = 0;
                }
                assertArrayEquals("payload at " + r.recordPosition(), expect, buf);
            }
            assertTrue("next", r.next());
            Trade t = r.readMessage(new Trade());
            assertEquals("trade id", k, t.getId());
            assertEquals("trade qty", 7, t.getQuantity());
            assertFalse("end", r.next());
        }
    }

    /** Records across both segment boundaries and in the last slot of a 2.5 GiB file. */
    @Test(timeoutSeconds = 120)
    public void fileLargerThan2GiBWorksAcrossSegments() throws Exception {
        String path = TestFiles.newPath("large.bus");
        try {
            try (RandomAccessFile raf = new RandomAccessFile(path, "rw")) {
                raf.setLength(FILE_SIZE); // sparse
                raf.seek(0);
                raf.write(new byte[] {8, 0, 0, 0, 0, 0, 0, 0});
            }
            // The record just before each boundary straddles it.
            long k1 = slotIndexAt(GIB) - 1;
            assertTrue("straddles 1 GiB", Layout.recordOffset(k1 + 1, RECORD) < GIB
                    && Layout.recordOffset(k1 + 2, RECORD) > GIB);
            writeAndReadAt(path, k1);
            long k2 = slotIndexAt(2 * GIB) - 1;
            writeAndReadAt(path, k2);

            // Primitive accesses straddling a boundary, seen through a second mapping.
            try (MemoryMappedFile a = new MemoryMappedFile(path, FILE_SIZE);
                 MemoryMappedFile b = new MemoryMappedFile(path, FILE_SIZE)) {
                a.putLong(GIB - 4, 0x1122334455667788L);
                assertEquals("long across 1 GiB", 0x1122334455667788L, b.getLong(GIB - 4));
                assertEquals("high half", 0x11223344, b.getInt(GIB));
                a.putDouble(2 * GIB - 3, 1.25);
                assertEquals("double across 2 GiB", 1.25, b.getDouble(2 * GIB - 3));
                byte[] big = Buses.pattern(10_000, 3);
                a.putBytes(2 * GIB - 5000, big, 0, big.length);
                byte[] back = new byte[big.length];
                b.getBytes(2 * GIB - 5000, back, 0, back.length);
                assertArrayEquals("bytes across 2 GiB", big, back);
                assertEquals("mapped", FILE_SIZE, b.size());
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
                assertTrue("last slot", w.write(Buses.pattern(RECORD, 5), 0, RECORD));
                assertThrows(EOFException.class, () -> w.write(new byte[1], 0, 1));
                r.seek(Layout.recordOffset(last, RECORD));
                assertTrue("last record", r.next());
                byte[] buf = new byte[RECORD];
                r.readBuffer(buf, 0);
                assertArrayEquals("last payload", Buses.pattern(RECORD, 5), buf);
                r.setTimeout(10_000);
                long start = System.nanoTime();
                assertThrows(EOFException.class, r::next);
                assertTrue("EOF at once", System.nanoTime() - start < 1_000_000_000L);
            }
            assertEquals("length", FILE_SIZE, new File(path).length());
        } finally {
            new File(path).delete();
        }
    }
}
