package io.mappedbuspy;

import io.mappedbuspy.messages.PriceUpdate;
import io.mappedbuspy.testing.Test;
import io.mappedbuspy.testing.TestFiles;

import java.io.EOFException;
import java.nio.file.NoSuchFileException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import static io.mappedbuspy.testing.Assert.assertArrayEquals;
import static io.mappedbuspy.testing.Assert.assertContains;
import static io.mappedbuspy.testing.Assert.assertEquals;
import static io.mappedbuspy.testing.Assert.assertFalse;
import static io.mappedbuspy.testing.Assert.assertThrows;
import static io.mappedbuspy.testing.Assert.assertTrue;

/** The reader's protocol: delivery, rollback, corruption checks, seeking and state. */
public final class ReaderTest {
    /** Byte arrays of every length 0..recordSize come back as written. */
    @Test
    public void writesAndReadsByteArraysOfEveryLength() throws Exception {
        String path = TestFiles.newPath("bytes.bus");
        try (MappedBusWriter w = new MappedBusWriter(path, 1 << 16, 16).open();
             MappedBusReader r = new MappedBusReader(path, 1 << 16, 16).open()) {
            assertFalse("empty", r.next());
            for (int len = 0; len <= 16; len++) {
                assertTrue("write", w.write(Buses.pattern(20, len), 2, len));
            }
            for (int len = 0; len <= 16; len++) {
                assertTrue("next", r.next());
                assertEquals("type is the length", len, r.readType());
                byte[] buf = new byte[len + 3];
                assertEquals("copied", len, r.readBuffer(buf, 3));
                byte[] expect = new byte[len];
                System.arraycopy(Buses.pattern(20, len), 2, expect, 0, len);
                byte[] got = new byte[len];
                System.arraycopy(buf, 3, got, 0, len);
                assertArrayEquals("payload " + len, expect, got);
            }
            assertFalse("drained", r.next());
        }
    }

    /** The current record can be read in any order, repeatedly, until next() is called again. */
    @Test
    public void currentRecordReadsRepeatUntilNext() throws Exception {
        String path = TestFiles.newPath("repeat.bus");
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 12).open();
             MappedBusReader r = new MappedBusReader(path, 4096, 12).open()) {
            w.write(new PriceUpdate(1, 2, 3));
            w.write(new PriceUpdate(4, 5, 6));
            assertTrue("next", r.next());
            PriceUpdate p = r.readMessage(new PriceUpdate());
            assertEquals("type", 0, r.readType());
            assertEquals("again", p.toString(), r.readMessage(new PriceUpdate()).toString());
            byte[] raw = new byte[12];
            assertEquals("type 0 reads as a byte array of length 0", 0, r.readBuffer(raw, 0));
            assertEquals("position", 8, r.recordPosition());
            assertTrue("next", r.next());
            assertEquals("second", "PriceUpdate [source=4, price=5, quantity=6]", r.readMessage(p).toString());
            assertFalse("none", r.next());
            assertThrows(IllegalStateException.class, r::readType);
        }
    }

    /** Reading with no current record (before next(), or after it returned false) is an error. */
    @Test
    public void readWithoutCurrentRecordThrows() throws Exception {
        String path = TestFiles.newPath("nocurrent.bus");
        new MappedBusWriter(path, 4096, 12).open().close();
        try (MappedBusReader r = new MappedBusReader(path, 4096, 12).open()) {
            IllegalStateException e = assertThrows(IllegalStateException.class, r::readType);
            assertContains(e.getMessage(), "no current record");
            assertThrows(IllegalStateException.class, () -> r.readMessage(new PriceUpdate()));
            assertThrows(IllegalStateException.class, () -> r.readBuffer(new byte[12], 0));
            assertFalse("nothing", r.next());
            assertThrows(IllegalStateException.class, r::readType);
            assertEquals("record position", -1, r.recordPosition());
        }
    }

    /** A stored length outside 0..recordSize is reported as corruption, never trusted. */
    @Test
    public void corruptStoredLengthThrows() throws Exception {
        String path = TestFiles.newPath("len.bus");
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 8).open()) {
            w.write(new byte[8], 0, 8);
            w.write(new byte[8], 0, 8);
        }
        try (MemoryMappedFile mem = new MemoryMappedFile(path, 4096)) {
            mem.putInt(8 + 4, 9);
            mem.putInt(24 + 4, -1);
        }
        try (MappedBusReader r = new MappedBusReader(path, 4096, 8).open()) {
            assertTrue("next", r.next());
            CorruptBusException e = assertThrows(CorruptBusException.class, () -> r.readBuffer(new byte[100], 0));
            assertContains(e.getMessage(), "position 8");
            assertContains(e.getMessage(), "length 9");
            assertEquals("still current", 9, r.readType());
            assertTrue("next", r.next());
            e = assertThrows(CorruptBusException.class, () -> r.readBuffer(new byte[100], 0));
            assertContains(e.getMessage(), "length -1");
        }
    }

    /** A destination array with no room is refused and the record stays current. */
    @Test
    public void tooSmallDestinationKeepsRecordCurrent() throws Exception {
        String path = TestFiles.newPath("small.bus");
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 8).open();
             MappedBusReader r = new MappedBusReader(path, 4096, 8).open()) {
            w.write(new byte[] {1, 2, 3, 4, 5}, 0, 5);
            assertTrue("next", r.next());
            assertThrows(IllegalArgumentException.class, () -> r.readBuffer(new byte[4], 0));
            assertThrows(IllegalArgumentException.class, () -> r.readBuffer(new byte[8], 4));
            assertThrows(IllegalArgumentException.class, () -> r.readBuffer(new byte[8], -1));
            byte[] buf = new byte[5];
            assertEquals("copied", 5, r.readBuffer(buf, 0));
            assertArrayEquals("bytes", new byte[] {1, 2, 3, 4, 5}, buf);
        }
    }

    /** A status other than 0, 1 or 2 is corruption, named with its position and value. */
    @Test
    public void invalidStatusThrows() throws Exception {
        String path = TestFiles.newPath("status.bus");
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 12).open()) {
            w.write(new PriceUpdate());
            w.write(new PriceUpdate());
        }
        try (MemoryMappedFile mem = new MemoryMappedFile(path, 4096)) {
            mem.putInt(28, 7);
        }
        try (MappedBusReader r = new MappedBusReader(path, 4096, 12).open()) {
            assertTrue("first", r.next());
            CorruptBusException e = assertThrows(CorruptBusException.class, r::next);
            assertContains(e.getMessage(), "position 28");
            assertContains(e.getMessage(), "status 7");
        }
    }

    /** A crashed writer's slot is rolled back after the timeout and the records after it still arrive. */
    @Test
    public void uncommittedSlotIsRolledBackAfterTimeout() throws Exception {
        String path = TestFiles.newPath("crash.bus");
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 12).open()) {
            w.write(new PriceUpdate(1, 1, 1));
            long crashed = Buses.allocateUncommitted(path, 4096, 12, 0, (byte) 0x55);
            assertEquals("crashed slot", 28, crashed);
            w.write(new PriceUpdate(3, 3, 3));
        }
        try (MappedBusReader r = new MappedBusReader(path, 4096, 12).open();
             MemoryMappedFile mem = new MemoryMappedFile(path, 4096)) {
            r.setTimeout(200);
            assertTrue("first", r.next());
            long start = System.nanoTime();
            assertFalse("waits for the writer", r.next());
            assertFalse("still waiting", r.next());
            assertEquals("not rolled back yet", 0, mem.getStatus(28));
            assertTrue("third arrives", Buses.await(r, 5000));
            long ms = (System.nanoTime() - start) / 1_000_000;
            assertTrue("waited the timeout, took " + ms + " ms", ms >= 200 && ms < 2000);
            assertEquals("third", 3, r.readMessage(new PriceUpdate()).getSource());
            assertEquals("status", 2, mem.getStatus(28));
            assertEquals("rollbacks", 1, r.rollbacks());
            assertEquals("skipped", 1, r.rolledBackSkipped());
        }
        try (MappedBusReader r = new MappedBusReader(path, 4096, 12).open()) {
            r.setTimeout(0);
            assertTrue("first", r.next());
            assertTrue("third, without a timeout", r.next());
            assertEquals("third", 3, r.readMessage(new PriceUpdate()).getSource());
            assertEquals("rollbacks", 0, r.rollbacks());
            assertEquals("skipped", 1, r.rolledBackSkipped());
        }
    }

    /** The record is invisible until its commit, and a writer slower than the timeout gets false. */
    @Test
    public void recordInvisibleUntilCommitAndSlowWriterGetsFalse() throws Exception {
        String path = TestFiles.newPath("slow.bus");
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
            assertTrue("writer started", inWrite.await(10, TimeUnit.SECONDS));
            assertFalse("allocated but uncommitted is not delivered", r.next());
            Thread.sleep(150);
            assertFalse("rolled back, nothing delivered", r.next());
            assertEquals("rollbacks", 1, r.rollbacks());
            release.countDown();
            t.join(10_000);
            assertEquals("slow writer's result", Boolean.FALSE, result.get());
            assertTrue("the next write commits", w.write(new PriceUpdate(9, 9, 9)));
            assertTrue("delivered", r.next());
            assertEquals("the later record", 9, r.readMessage(new PriceUpdate()).getSource());
        }
    }

    /** A record committed just before the timeout is delivered, not rolled back. */
    @Test
    public void writerCommittingBeforeTimeoutIsDelivered() throws Exception {
        String path = TestFiles.newPath("intime.bus");
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 12).open();
             MappedBusReader r = new MappedBusReader(path, 4096, 12).open();
             MemoryMappedFile mem = new MemoryMappedFile(path, 4096)) {
            r.setTimeout(10_000);
            long offset = Buses.allocateUncommitted(path, 4096, 12, 0, (byte) 1);
            assertFalse("waiting", r.next());
            assertTrue("commit", mem.casStatus(offset, 0, 1));
            assertTrue("delivered", r.next());
            assertEquals("no rollback", 0, r.rollbacks());
            assertTrue("writer still fine", w.write(new PriceUpdate()));
        }
    }

    /** hasRecovered() turns true once the reader passes the limit seen at open. */
    @Test
    public void hasRecoveredTracksTheInitialLimit() throws Exception {
        String path = TestFiles.newPath("recover.bus");
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 12).open()) {
            w.write(new PriceUpdate());
            w.write(new PriceUpdate());
            try (MappedBusReader r = new MappedBusReader(path, 4096, 12).open()) {
                assertFalse("behind", r.hasRecovered());
                w.write(new PriceUpdate());
                assertTrue("1", r.next());
                assertFalse("behind", r.hasRecovered());
                assertTrue("2", r.next());
                assertTrue("caught up", r.hasRecovered());
                assertEquals("position", 48, r.position());
            }
        }
        String fresh = TestFiles.newPath("fresh.bus");
        new MappedBusWriter(fresh, 4096, 12).open().close();
        try (MappedBusReader r = new MappedBusReader(fresh, 4096, 12).open()) {
            assertTrue("nothing to recover", r.hasRecovered());
            assertFalse("nothing written yet", r.next());
        }
    }

    /** seek() accepts record boundaries only; seekToEnd() skips what is there. */
    @Test
    public void seekAndSeekToEnd() throws Exception {
        String path = TestFiles.newPath("seek.bus");
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 12).open();
             MappedBusReader r = new MappedBusReader(path, 4096, 12).open()) {
            for (int i = 0; i < 5; i++) {
                w.write(new PriceUpdate(i, 0, 0));
            }
            r.seek(Layout.recordOffset(3, 12));
            assertTrue("3", r.next());
            assertEquals("source", 3, r.readMessage(new PriceUpdate()).getSource());
            assertThrows(IllegalArgumentException.class, () -> r.seek(9));
            assertThrows(IllegalArgumentException.class, () -> r.seek(0));
            assertThrows(IllegalArgumentException.class, () -> r.seek(Layout.recordOffset(300, 12)));
            r.seek(8);
            assertThrows(IllegalStateException.class, r::readType);
            assertTrue("0", r.next());
            assertEquals("source", 0, r.readMessage(new PriceUpdate()).getSource());
            r.seekToEnd();
            assertEquals("position", Layout.recordOffset(5, 12), r.position());
            assertFalse("nothing new", r.next());
            w.write(new PriceUpdate(5, 0, 0));
            assertTrue("5", r.next());
            assertEquals("source", 5, r.readMessage(new PriceUpdate()).getSource());
        }
    }

    /** A closed or never-opened reader says so. */
    @Test
    public void closedReaderThrows() throws Exception {
        String path = TestFiles.newPath("rclosed.bus");
        new MappedBusWriter(path, 4096, 12).open().close();
        MappedBusReader r = new MappedBusReader(path, 4096, 12);
        assertContains(assertThrows(IllegalStateException.class, r::next).getMessage(), "not open");
        r.open();
        assertFalse("empty", r.next());
        r.close();
        assertContains(assertThrows(IllegalStateException.class, r::next).getMessage(), "closed");
        assertThrows(IllegalStateException.class, r::readType);
        assertThrows(IllegalStateException.class, r::seekToEnd);
        r.close();
    }

    /** A read-only reader needs an existing file, never writes, and skips a stuck slot locally. */
    @Test
    public void readOnlyReaderNeverWritesAndSkipsUncommittedSlot() throws Exception {
        String missing = TestFiles.newPath("missing.bus");
        assertContains(assertThrows(NoSuchFileException.class,
                () -> new MappedBusReader(missing, 4096, 12, true).open()).getMessage(), missing);
        assertThrows(NoSuchFileException.class, () -> new MappedBusReader(missing, 4096, 12).open());
        assertFalse("a reader never creates the file", new java.io.File(missing).exists());
        String path = TestFiles.newPath("ro.bus");
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 12).open()) {
            w.write(new PriceUpdate(1, 0, 0));
            Buses.allocateUncommitted(path, 4096, 12, 0, (byte) 0x11);
            w.write(new PriceUpdate(3, 0, 0));
        }
        byte[] before = Buses.bytes(path);
        try (MappedBusReader r = new MappedBusReader(path, 4096, 12, true).open()) {
            r.setTimeout(100);
            assertTrue("ro", r.isReadOnly());
            assertTrue("first", r.next());
            long start = System.nanoTime();
            assertTrue("third", Buses.await(r, 5000));
            assertTrue("waited the timeout", System.nanoTime() - start >= 100_000_000L);
            assertEquals("third", 3, r.readMessage(new PriceUpdate()).getSource());
            assertEquals("a local skip is a lost record", 1, r.rolledBackSkipped());
            assertEquals("but not a rollback: nothing was written", 0, r.rollbacks());
            assertThrows(EOFException.class, () -> {
                r.seek(Layout.recordOffset(204, 12));
                r.next();
            });
        }
        assertArrayEquals("file untouched", before, Buses.bytes(path));
    }
}
