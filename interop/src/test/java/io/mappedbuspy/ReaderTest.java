package io.mappedbuspy;

import io.mappedbuspy.messages.PriceUpdate;

import java.io.EOFException;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static io.mappedbuspy.Buses.assertContains;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import io.mappedbuspy.internal.Liveness;
import io.mappedbuspy.internal.MemoryMappedFile;

/** The reader's protocol: delivery, rollback, corruption checks, seeking and state. */
public final class ReaderTest {
    /** Scratch directory, new for each test and deleted after it. */
    @TempDir
    Path tmp;

    /** Byte arrays of every length 0..recordSize come back as written. */
    @Test
    public void writesAndReadsByteArraysOfEveryLength() throws Exception {
        String path = tmp.resolve("bytes.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 1 << 16, 16).open();
             MappedBusReader r = new MappedBusReader(path, 1 << 16, 16).open()) {
            assertFalse(r.next(), "empty");
            for (int len = 0; len <= 16; len++) {
                assertTrue(w.write(Buses.pattern(20, len), 2, len), "write");
            }
            for (int len = 0; len <= 16; len++) {
                assertTrue(r.next(), "next");
                assertEquals(len, r.readType(), "type is the length");
                byte[] buf = new byte[len + 3];
                assertEquals(len, r.readBuffer(buf, 3), "copied");
                byte[] expect = new byte[len];
                System.arraycopy(Buses.pattern(20, len), 2, expect, 0, len);
                byte[] got = new byte[len];
                System.arraycopy(buf, 3, got, 0, len);
                assertArrayEquals(expect, got, "payload " + len);
            }
            assertFalse(r.next(), "drained");
        }
    }

    /** The current record can be read in any order, repeatedly, until next() is called again. */
    @Test
    public void currentRecordReadsRepeatUntilNext() throws Exception {
        String path = tmp.resolve("repeat.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 12).open();
             MappedBusReader r = new MappedBusReader(path, 4096, 12).open()) {
            w.write(new PriceUpdate(1, 2, 3));
            w.write(new PriceUpdate(4, 5, 6));
            assertTrue(r.next(), "next");
            PriceUpdate p = r.readMessage(new PriceUpdate());
            assertEquals(0, r.readType(), "type");
            assertEquals(p.toString(), r.readMessage(new PriceUpdate()).toString(), "again");
            byte[] raw = new byte[12];
            assertEquals(0, r.readBuffer(raw, 0), "type 0 reads as a byte array of length 0");
            assertEquals(8, r.recordPosition(), "position");
            assertTrue(r.next(), "next");
            assertEquals("PriceUpdate [source=4, price=5, quantity=6]", r.readMessage(p).toString(), "second");
            assertFalse(r.next(), "none");
            assertThrows(IllegalStateException.class, r::readType);
        }
    }

    /** Reading with no current record (before next(), or after it returned false) is an error. */
    @Test
    public void readWithoutCurrentRecordThrows() throws Exception {
        String path = tmp.resolve("nocurrent.bus").toString();
        new MappedBusWriter(path, 4096, 12).open().close();
        try (MappedBusReader r = new MappedBusReader(path, 4096, 12).open()) {
            IllegalStateException e = assertThrows(IllegalStateException.class, r::readType);
            assertContains(e.getMessage(), "no current record");
            assertThrows(IllegalStateException.class, () -> r.readMessage(new PriceUpdate()));
            assertThrows(IllegalStateException.class, () -> r.readBuffer(new byte[12], 0));
            assertFalse(r.next(), "nothing");
            assertThrows(IllegalStateException.class, r::readType);
            assertEquals(-1, r.recordPosition(), "record position");
        }
    }

    /** A stored length outside 0..recordSize is reported as corruption, never trusted. */
    @Test
    public void corruptStoredLengthThrows() throws Exception {
        String path = tmp.resolve("len.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 8).open()) {
            w.write(new byte[8], 0, 8);
            w.write(new byte[8], 0, 8);
        }
        try (MemoryMappedFile mem = new MemoryMappedFile(path, 4096)) {
            mem.putInt(8 + 4, 9);
            mem.putInt(24 + 4, -1);
        }
        try (MappedBusReader r = new MappedBusReader(path, 4096, 8).open()) {
            assertTrue(r.next(), "next");
            CorruptBusException e = assertThrows(CorruptBusException.class, () -> r.readBuffer(new byte[100], 0));
            assertContains(e.getMessage(), "position 8");
            assertContains(e.getMessage(), "length 9");
            assertEquals(9, r.readType(), "still current");
            assertTrue(r.next(), "next");
            e = assertThrows(CorruptBusException.class, () -> r.readBuffer(new byte[100], 0));
            assertContains(e.getMessage(), "length -1");
        }
    }

    /** A destination array with no room is refused and the record stays current. */
    @Test
    public void tooSmallDestinationKeepsRecordCurrent() throws Exception {
        String path = tmp.resolve("small.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 8).open();
             MappedBusReader r = new MappedBusReader(path, 4096, 8).open()) {
            w.write(new byte[] {1, 2, 3, 4, 5}, 0, 5);
            assertTrue(r.next(), "next");
            assertThrows(IllegalArgumentException.class, () -> r.readBuffer(new byte[4], 0));
            assertThrows(IllegalArgumentException.class, () -> r.readBuffer(new byte[8], 4));
            assertThrows(IllegalArgumentException.class, () -> r.readBuffer(new byte[8], -1));
            byte[] buf = new byte[5];
            assertEquals(5, r.readBuffer(buf, 0), "copied");
            assertArrayEquals(new byte[] {1, 2, 3, 4, 5}, buf, "bytes");
        }
    }

    /** A status other than 0, 1 or 2 is corruption, named with its position and value. */
    @Test
    public void invalidStatusThrows() throws Exception {
        String path = tmp.resolve("status.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 12).open()) {
            w.write(new PriceUpdate());
            w.write(new PriceUpdate());
        }
        try (MemoryMappedFile mem = new MemoryMappedFile(path, 4096)) {
            mem.putInt(28, 7);
        }
        try (MappedBusReader r = new MappedBusReader(path, 4096, 12).open()) {
            assertTrue(r.next(), "first");
            CorruptBusException e = assertThrows(CorruptBusException.class, r::next);
            assertContains(e.getMessage(), "position 28");
            assertContains(e.getMessage(), "status 7");
        }
    }

    /** A crashed writer's slot is rolled back after the timeout and the records after it still arrive. */
    @Test
    public void uncommittedSlotIsRolledBackAfterTimeout() throws Exception {
        String path = tmp.resolve("crash.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 12).open()) {
            w.write(new PriceUpdate(1, 1, 1));
            long crashed = Buses.allocateUncommitted(path, 4096, 12, 0, (byte) 0x55);
            assertEquals(28, crashed, "crashed slot");
            w.write(new PriceUpdate(3, 3, 3));
        }
        try (MappedBusReader r = new MappedBusReader(path, 4096, 12).open();
             MemoryMappedFile mem = new MemoryMappedFile(path, 4096)) {
            r.setTimeout(200);
            assertTrue(r.next(), "first");
            long start = System.nanoTime();
            assertFalse(r.next(), "waits for the writer");
            assertFalse(r.next(), "still waiting");
            assertEquals(0, mem.getStatus(28), "not rolled back yet");
            assertTrue(Buses.await(r, 5000), "third arrives");
            long ms = (System.nanoTime() - start) / 1_000_000;
            assertTrue(ms >= 200 && ms < 2000, "waited the timeout, took " + ms + " ms");
            assertEquals(3, r.readMessage(new PriceUpdate()).getSource(), "third");
            assertEquals(2, mem.getStatus(28), "status");
            assertEquals(1, r.rollbacks(), "rollbacks");
            assertEquals(1, r.rolledBackSkipped(), "skipped");
        }
        try (MappedBusReader r = new MappedBusReader(path, 4096, 12).open()) {
            assertTrue(r.next(), "first");
            assertTrue(r.next(), "third, without waiting the (default) timeout: the slot is rolled back");
            assertEquals(3, r.readMessage(new PriceUpdate()).getSource(), "third");
            assertEquals(0, r.rollbacks(), "rollbacks");
            assertEquals(1, r.rolledBackSkipped(), "skipped");
        }
    }

    /**
     * The record is invisible until its commit; a writer slower than the timeout gets false where liveness is
     * unknown (no JNI library), and is waited for where the writers file says it is alive.
     */
    @Test
    public void recordInvisibleUntilCommitAndSlowWriterGetsFalse() throws Exception {
        String path = tmp.resolve("slow.bus").toString();
        CountDownLatch inWrite = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        MappedBusMessage slow = new MappedBusMessage() {
            @Override
            public void write(MemoryMappedFile mem, long pos) {
                mem.putInt(pos, 42);
                inWrite.countDown();
                try {
                    release.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }

            @Override
            public void read(MemoryMappedFile mem, long pos) {
            }

            @Override
            public int type() {
                return 5;
            }
        };
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 12).open();
             MappedBusReader r = new MappedBusReader(path, 4096, 12).open()) {
            r.setTimeout(100);
            AtomicReference<Object> result = new AtomicReference<>();
            Thread t = new Thread(() -> {
                try {
                    result.set(w.write(slow));
                } catch (Throwable e) {
                    result.set(e);
                }
            });
            t.start();
            assertTrue(inWrite.await(10, TimeUnit.SECONDS), "writer started");
            assertFalse(r.next(), "allocated but uncommitted is not delivered");
            Thread.sleep(150);
            assertFalse(r.next(), "past the timeout: rolled back, or waited for; nothing delivered");
            if (Liveness.available()) {
                // The writers file says the slot's writer is alive: never rolled back, however slow (issue 33).
                assertEquals(0, r.rollbacks(), "rollbacks");
                release.countDown();
                t.join(10_000);
                assertEquals(Boolean.TRUE, result.get(), "slow writer's result");
                assertTrue(r.next(), "the slow record, delivered");
                assertEquals(5, r.readType(), "its type");
            } else {
                assertEquals(1, r.rollbacks(), "rollbacks");
                release.countDown();
                t.join(10_000);
                assertEquals(Boolean.FALSE, result.get(), "slow writer's result");
            }
            assertTrue(w.write(new PriceUpdate(9, 9, 9)), "the next write commits");
            assertTrue(r.next(), "delivered");
            assertEquals(9, r.readMessage(new PriceUpdate()).getSource(), "the later record");
        }
    }

    /** A record committed just before the timeout is delivered, not rolled back. */
    @Test
    public void writerCommittingBeforeTimeoutIsDelivered() throws Exception {
        String path = tmp.resolve("intime.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 12).open();
             MappedBusReader r = new MappedBusReader(path, 4096, 12).open();
             MemoryMappedFile mem = new MemoryMappedFile(path, 4096)) {
            r.setTimeout(10_000);
            long offset = Buses.allocateUncommitted(path, 4096, 12, 0, (byte) 1);
            assertFalse(r.next(), "waiting");
            assertTrue(mem.casStatus(offset, 0, 1), "commit");
            assertTrue(r.next(), "delivered");
            assertEquals(0, r.rollbacks(), "no rollback");
            assertTrue(w.write(new PriceUpdate()), "writer still fine");
        }
    }

    /** hasRecovered() turns true once the reader passes the limit seen at open. */
    @Test
    public void hasRecoveredTracksTheInitialLimit() throws Exception {
        String path = tmp.resolve("recover.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 12).open()) {
            w.write(new PriceUpdate());
            w.write(new PriceUpdate());
            try (MappedBusReader r = new MappedBusReader(path, 4096, 12).open()) {
                assertFalse(r.hasRecovered(), "behind");
                w.write(new PriceUpdate());
                assertTrue(r.next(), "1");
                assertFalse(r.hasRecovered(), "behind");
                assertTrue(r.next(), "2");
                assertTrue(r.hasRecovered(), "caught up");
                assertEquals(48, r.position(), "position");
            }
        }
        String fresh = tmp.resolve("fresh.bus").toString();
        new MappedBusWriter(fresh, 4096, 12).open().close();
        try (MappedBusReader r = new MappedBusReader(fresh, 4096, 12).open()) {
            assertTrue(r.hasRecovered(), "nothing to recover");
            assertFalse(r.next(), "nothing written yet");
        }
    }

    /** seek() accepts record boundaries only; seekToEnd() skips what is there. */
    @Test
    public void seekAndSeekToEnd() throws Exception {
        String path = tmp.resolve("seek.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 12).open();
             MappedBusReader r = new MappedBusReader(path, 4096, 12).open()) {
            for (int i = 0; i < 5; i++) {
                w.write(new PriceUpdate(i, 0, 0));
            }
            r.seek(Layout.recordOffset(3, 12));
            assertTrue(r.next(), "3");
            assertEquals(3, r.readMessage(new PriceUpdate()).getSource(), "source");
            assertThrows(IllegalArgumentException.class, () -> r.seek(9));
            assertThrows(IllegalArgumentException.class, () -> r.seek(0));
            assertThrows(IllegalArgumentException.class, () -> r.seek(Layout.recordOffset(300, 12)));
            r.seek(8);
            assertThrows(IllegalStateException.class, r::readType);
            assertTrue(r.next(), "0");
            assertEquals(0, r.readMessage(new PriceUpdate()).getSource(), "source");
            r.seekToEnd();
            assertEquals(Layout.recordOffset(5, 12), r.position(), "position");
            assertFalse(r.next(), "nothing new");
            w.write(new PriceUpdate(5, 0, 0));
            assertTrue(r.next(), "5");
            assertEquals(5, r.readMessage(new PriceUpdate()).getSource(), "source");
        }
    }

    /** A closed or never-opened reader says so. */
    @Test
    public void closedReaderThrows() throws Exception {
        String path = tmp.resolve("rclosed.bus").toString();
        new MappedBusWriter(path, 4096, 12).open().close();
        MappedBusReader r = new MappedBusReader(path, 4096, 12);
        assertContains(assertThrows(IllegalStateException.class, r::next).getMessage(), "not open");
        r.open();
        assertFalse(r.next(), "empty");
        r.close();
        assertContains(assertThrows(IllegalStateException.class, r::next).getMessage(), "closed");
        assertThrows(IllegalStateException.class, r::readType);
        assertThrows(IllegalStateException.class, r::seekToEnd);
        r.close();
    }

    /** A read-only reader needs an existing file, never writes, and skips a stuck slot locally. */
    @Test
    public void readOnlyReaderNeverWritesAndSkipsUncommittedSlot() throws Exception {
        String missing = tmp.resolve("missing.bus").toString();
        assertContains(assertThrows(NoSuchFileException.class,
                () -> new MappedBusReader(missing, 4096, 12, true).open()).getMessage(), missing);
        assertThrows(NoSuchFileException.class, () -> new MappedBusReader(missing, 4096, 12).open());
        assertFalse(new java.io.File(missing).exists(), "a reader never creates the file");
        String path = tmp.resolve("ro.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 12).open()) {
            w.write(new PriceUpdate(1, 0, 0));
            Buses.allocateUncommitted(path, 4096, 12, 0, (byte) 0x11);
            w.write(new PriceUpdate(3, 0, 0));
        }
        byte[] before = Buses.bytes(path);
        try (MappedBusReader r = new MappedBusReader(path, 4096, 12, true).open()) {
            r.setTimeout(100);
            assertTrue(r.isReadOnly(), "ro");
            assertTrue(r.next(), "first");
            long start = System.nanoTime();
            assertTrue(Buses.await(r, 5000), "third");
            assertTrue(System.nanoTime() - start >= 100_000_000L, "waited the timeout");
            assertEquals(3, r.readMessage(new PriceUpdate()).getSource(), "third");
            assertEquals(1, r.rolledBackSkipped(), "a local skip is a lost record");
            assertEquals(0, r.rollbacks(), "but not a rollback: nothing was written");
            assertThrows(EOFException.class, () -> {
                r.seek(Layout.recordOffset(204, 12));
                r.next();
            });
        }
        assertArrayEquals(before, Buses.bytes(path), "file untouched");
    }

    /** open(waitMs) waits for a writer to create the bus (a reader never creates one); without one, it gives up. */
    @org.junit.jupiter.api.Test
    public void openWithWaitWaitsForAWriterToCreateTheBus() throws Exception {
        String path = tmp.resolve("late.bus").toString();
        Thread writer = new Thread(() -> {
            try {
                Thread.sleep(300);
                new MappedBusWriter(path, 100_000, 12).open().close();
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        });
        writer.start();
        long t0 = System.nanoTime();
        try (MappedBusReader r = new MappedBusReader(path, 100_000, 12).open(10_000)) {
            org.junit.jupiter.api.Assertions.assertTrue(System.nanoTime() - t0 >= 250_000_000L, "waited");
            org.junit.jupiter.api.Assertions.assertNotNull(r.busId());
        }
        writer.join();
        org.junit.jupiter.api.Assertions.assertThrows(java.nio.file.NoSuchFileException.class,
                () -> new MappedBusReader(path + "-none", 100_000, 12).open(100));
    }
}
