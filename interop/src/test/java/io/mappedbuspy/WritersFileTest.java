package io.mappedbuspy;

import java.nio.file.Path;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import io.mappedbuspy.internal.Liveness;
import io.mappedbuspy.internal.MemoryMappedFile;
import io.mappedbuspy.internal.WakeFile;
import io.mappedbuspy.internal.WritersFile;

/**
 * The writers file (issue 33) in one JVM: a writer's claim is published after each reservation and cleared at close;
 * a reader sees its writer alive through its own channel; a live writer slower than the timeout is waited for, and a
 * stall limit turns the wait into {@link WriterStalledException}. Killed writers: tests/jvm/test_writer_liveness_java.py.
 */
public final class WritersFileTest {
    @TempDir
    Path tmp;

    @Test
    public void aWriterPublishesItsClaimAndClosingClearsIt() throws Exception {
        Assumptions.assumeTrue(Liveness.available(), "needs the JNI library");
        String path = tmp.resolve("claims.bus").toString();
        Path writers = Path.of(path + Layout.WRITERS_SUFFIX);
        long slot = Layout.slotSize(12);
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 12).open()) {
            w.write(new byte[] {1}, 0, 1);
            w.write(new byte[] {2}, 0, 1);
            try (WritersFile r = WritersFile.forReader(writers, false)) {
                WritersFile.Holder h = r.holder(Layout.FIRST_RECORD_OFFSET + slot);
                assertEquals(Liveness.ALIVE, h.liveness(), "the last reservation's writer");
                assertEquals(new WritersFile.Claim(8 + slot, 8 + 2 * slot), h.claim(), "its claim");
                assertEquals(Liveness.UNKNOWN, r.holder(8).liveness(), "an earlier slot: no claim holds it");
                assertEquals(WakeFile.PID, r.pidOf(h.index()), "pid, for people");
            }
        }
        try (WritersFile r = WritersFile.forReader(writers, false)) {
            assertEquals(Liveness.UNKNOWN, r.holder(8 + slot).liveness(), "closed: the claim is cleared");
        }
    }

    /**
     * The public question (SlotHolders, as the Spark connector's planning asks it): a live writer's claim is
     * {@link SlotHolder.Alive} with its pid, a position no claim holds is {@link SlotHolder.Unknown}, and so is any
     * position of a bus with no writers file (the Java original's). A dead writer's: tests/spark/test_writer_liveness.py
     * and tests/jvm/test_writer_liveness_java.py (a SIGKILLed process).
     */
    @Test
    public void slotHoldersSayWhoHoldsAPosition() throws Exception {
        Assumptions.assumeTrue(Liveness.available(), "needs the JNI library");
        String path = tmp.resolve("holders.bus").toString();
        long slot = Layout.slotSize(12);
        try (SlotHolders holders = SlotHolders.ofBus(path)) {
            assertEquals(SlotHolder.UNKNOWN, holders.holderOf(8), "no writers file yet");
            try (MappedBusWriter w = new MappedBusWriter(path, 4096, 12).open()) {
                w.write(new byte[] {1}, 0, 1);
                w.write(new byte[] {2}, 0, 1);
                assertEquals(new SlotHolder.Alive(WakeFile.PID, 8 + slot, 8 + 2 * slot), holders.holderOf(8 + slot));
                assertEquals(SlotHolder.UNKNOWN, holders.holderOf(8), "an earlier slot: no claim holds it");
            }
            assertEquals(SlotHolder.UNKNOWN, holders.holderOf(8 + slot), "closed: the claim is cleared");
        }
    }

    @Test
    public void aLiveSlowWriterIsWaitedForUntilTheStallLimit() throws Exception {
        Assumptions.assumeTrue(Liveness.available(), "needs the JNI library");
        String path = tmp.resolve("stall.bus").toString();
        CountDownLatch inWrite = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        MappedBusMessage slow = new MappedBusMessage() {
            @Override
            public void write(MemoryMappedFile mem, long pos) {
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
            r.setTimeout(Layout.MIN_ROLLBACK_TIMEOUT_MS);
            r.setStallLimit(300);
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
            long t0 = System.nanoTime();
            while (System.nanoTime() - t0 < 150_000_000L) {
                assertFalse(r.next(), "15 timeouts: still waited for");
                Thread.sleep(1);
            }
            assertEquals(0, r.rollbacks(), "never rolled back");
            WriterStalledException e = assertThrows(WriterStalledException.class, () -> {
                while (!r.next()) {
                    Thread.sleep(1);
                }
            });
            assertEquals(WakeFile.PID, e.pid(), "the writer's pid");
            assertEquals(Layout.FIRST_RECORD_OFFSET, e.position(), "the record's position");
            release.countDown();
            t.join(10_000);
            assertEquals(Boolean.TRUE, result.get(), "the slow writer commits");
            assertTrue(r.next(), "its record is delivered");
            assertEquals(5, r.readType(), "type");
        }
    }
}
