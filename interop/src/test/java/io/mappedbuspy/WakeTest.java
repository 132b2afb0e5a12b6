package io.mappedbuspy;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static io.mappedbuspy.Buses.assertContains;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Parking readers and waking writers (the wake file, issue 22). Timing is asserted only loosely (a shared 2-core
 * machine): a reader that must be woken parks with a bound of 2 s, so getting its record well inside it
 * shows the wake, whatever the scheduler does meanwhile.
 */
public final class WakeTest {
    private static final long LONG_PARK_NS = 2_000_000_000L;
    // Well inside LONG_PARK_NS: a record delivered sooner came with a wake.
    private static final long WOKEN_NS = 1_000_000_000L;
    private static final int RECORD = 16;
    private static final long FILE = 1 << 16;

    @TempDir
    Path tmp;

    /** The library is loaded in the test JVM, and was compiled from the same layout as Layout.java. */
    @Test
    public void libraryIsLoadedAndAgreesWithTheLayout() {
        assertTrue(WakeFile.nativeLoaded(), () -> "no wake library: " + WakeFile.nativeLibrary()
                + " (interop/build_native.sh builds it)");
        assertArrayEquals(WakeFile.expectedConstants(), WakeFile.nativeConstants(), "_wake.h vs Layout.java");
    }

    /** The constants have the values layout.py gives them (test_layout_java checks all of describe()). */
    @Test
    public void constantsAreLayoutPys() {
        assertEquals(".wake", Layout.WAKE_SUFFIX);
        assertEquals("bus.wake", Layout.WAKE_FILE);
        assertEquals(4096, Layout.WAKE_FILE_SIZE);
        assertEquals(0x314B41575355424DL, Layout.WAKE_MAGIC);
        assertArrayEquals("MBUSWAK1".getBytes(java.nio.charset.StandardCharsets.US_ASCII),
                java.nio.ByteBuffer.allocate(8).order(java.nio.ByteOrder.LITTLE_ENDIAN).putLong(Layout.WAKE_MAGIC).array());
        assertEquals(64, Layout.WAKE_PARKED_OFFSET);
        assertEquals(128, Layout.WAKE_SEQ_OFFSET);
        assertEquals(240, Layout.WAKE_SLOT_COUNT);
        assertEquals(1_000_000L, Layout.DEFAULT_PARK_NS);
        assertEquals(16_000_000L, Layout.DEFAULT_PARK_MAX_NS);
        assertContains(Layout.describe(), "WAKE_MAGIC=" + 0x314B41575355424DL + "\n");
    }

    /** A writer makes PATH.wake beside the bus: 4096 bytes with its magic and version, the bus file's mode. */
    @Test
    public void writerCreatesTheWakeFileBesideTheBus() throws Exception {
        String path = tmp.resolve("a.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, FILE, RECORD).open()) {
            Path wake = Path.of(path + Layout.WAKE_SUFFIX);
            assertEquals(Layout.WAKE_FILE_SIZE, Files.size(wake));
            assertEquals("rw-------", PosixFilePermissions.toString(
                    Files.getPosixFilePermissions(wake, LinkOption.NOFOLLOW_LINKS)));
            try (MemoryMappedFile m = new MemoryMappedFile(wake.toString(), Layout.WAKE_FILE_SIZE, true)) {
                assertEquals(Layout.WAKE_MAGIC, m.getLong(Layout.WAKE_MAGIC_OFFSET));
                assertEquals(Layout.WAKE_VERSION, m.getInt(Layout.WAKE_VERSION_OFFSET));
                assertEquals(0, m.getInt(Layout.WAKE_PARKED_OFFSET));
            }
            assertTrue(w.wake.isNative());
        }
    }

    /** A link where the wake file should be is never followed, and never fails the bus: no wake-ups, that is all. */
    @Test
    public void linkInPlaceOfTheWakeFileIsRefusedQuietly() throws Exception {
        String path = tmp.resolve("l.bus").toString();
        Path target = tmp.resolve("target");
        Files.write(target, new byte[0]);
        Files.createSymbolicLink(Path.of(path + Layout.WAKE_SUFFIX), target);
        try (MappedBusWriter w = new MappedBusWriter(path, FILE, RECORD).open();
             MappedBusReader r = new MappedBusReader(path, FILE, RECORD).open()) {
            assertSame(WakeFile.NONE, w.wake);
            w.write(new byte[4], 0, 4);
            assertTrue(r.waitNext(5, TimeUnit.SECONDS));
            assertFalse(r.waitNext(20, TimeUnit.MILLISECONDS));
        }
        assertEquals(0, Files.size(target), "the link's target untouched");
    }

    /** A file that is not a wake file is refused by open, and ignored by a bus. */
    @Test
    public void foreignContentIsNotAWakeFile() throws Exception {
        Path wake = tmp.resolve("x.bus" + Layout.WAKE_SUFFIX);
        Files.write(wake, new byte[] {1, 2, 3, 4, 5, 6, 7, 8});
        Files.setPosixFilePermissions(wake, PosixFilePermissions.fromString("rw-------"));
        CorruptBusException e = assertThrows(CorruptBusException.class,
                () -> WakeFile.open(wake, false, "rw-------"));
        assertContains(e.getMessage(), "not a bus wake file");
        assertSame(WakeFile.NONE, WakeFile.forBus(tmp.resolve("x.bus").toString(), false));
    }

    /** A reader parked in waitNext is woken by a Java writer's commit, long before its park bound. */
    @Test
    public void parkedReaderIsWokenByTheWriter() throws Exception {
        String path = tmp.resolve("w.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, FILE, RECORD).open();
             MappedBusReader r = new MappedBusReader(path, FILE, RECORD).open();
             WakeFile probe = WakeFile.forBus(path, false)) {
            r.setIdleStrategy(IdleStrategy.PARK).setParkNanos(LONG_PARK_NS).setParkMaxNanos(LONG_PARK_NS);
            ExecutorService ex = Executors.newSingleThreadExecutor();
            try {
                for (int i = 0; i < 20; i++) {
                    Future<Long> got = ex.submit(() -> r.waitNext(30, TimeUnit.SECONDS) ? System.nanoTime() : -1L);
                    awaitParked(probe, 1);
                    long t0 = System.nanoTime();
                    w.write(Buses.pattern(RECORD, i), 0, RECORD);
                    long t1 = got.get(30, TimeUnit.SECONDS);
                    assertTrue(t1 > 0, "record delivered");
                    assertTrue(t1 - t0 < WOKEN_NS, () -> "woken after " + (t1 - t0) / 1000 + " us");
                    byte[] b = new byte[RECORD];
                    r.readBuffer(b, 0);
                    assertArrayEquals(Buses.pattern(RECORD, i), b);
                }
            } finally {
                ex.shutdownNow();
            }
            assertEquals(0, probe.parked(), "nobody parked any more");
        }
    }

    /** A record from a writer that wakes nobody (the raw protocol, as the Java original) comes at the park bound. */
    @Test
    public void recordFromAWriterThatWakesNobodyComesWithinTheParkBound() throws Exception {
        String path = tmp.resolve("raw.bus").toString();
        new MappedBusWriter(path, FILE, RECORD).open().close();
        try (MappedBusReader r = new MappedBusReader(path, FILE, RECORD).open();
             WakeFile probe = WakeFile.forBus(path, false);
             MemoryMappedFile m = new MemoryMappedFile(path, FILE)) {
            r.setIdleStrategy(IdleStrategy.PARK); // default park bound: 1 ms
            ExecutorService ex = Executors.newSingleThreadExecutor();
            try {
                Future<Long> got = ex.submit(() -> r.waitNext(30, TimeUnit.SECONDS) ? System.nanoTime() : -1L);
                awaitParked(probe, 1);
                long t0 = System.nanoTime();
                long pos = m.getAndAddLong(Layout.LIMIT_OFFSET, Layout.slotSize(RECORD));
                m.putInt(pos + Layout.METADATA_OFFSET, 3);
                assertTrue(m.compareAndSetInt(pos + Layout.STATUS_OFFSET, 0, 1));
                long t1 = got.get(30, TimeUnit.SECONDS);
                assertTrue(t1 > 0, "delivered");
                assertTrue(t1 - t0 < 500_000_000L, () -> "found after " + (t1 - t0) / 1000 + " us");
                assertEquals(3, r.readType());
            } finally {
                ex.shutdownNow();
            }
        }
    }

    /** One record wakes 64 readers parked at once (each its own slot). */
    @Test
    public void oneRecordWakesSixtyFourParkedReaders() throws Exception {
        String path = tmp.resolve("many.bus").toString();
        int n = 64;
        List<MappedBusReader> readers = new ArrayList<>();
        ExecutorService ex = Executors.newFixedThreadPool(n);
        try (MappedBusWriter w = new MappedBusWriter(path, FILE, RECORD).open();
             WakeFile probe = WakeFile.forBus(path, false)) {
            List<Future<Long>> got = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                MappedBusReader r = new MappedBusReader(path, FILE, RECORD).open();
                r.setIdleStrategy(IdleStrategy.PARK).setParkNanos(LONG_PARK_NS).setParkMaxNanos(LONG_PARK_NS);
                readers.add(r);
                got.add(ex.submit(() -> r.waitNext(30, TimeUnit.SECONDS) ? System.nanoTime() : -1L));
            }
            awaitParked(probe, n);
            long t0 = System.nanoTime();
            w.write(new byte[] {42}, 0, 1);
            long last = 0;
            for (Future<Long> f : got) {
                long t = f.get(30, TimeUnit.SECONDS);
                assertTrue(t > 0, "every reader got the record");
                last = Math.max(last, t - t0);
            }
            long lastUs = last / 1000;
            assertTrue(last < WOKEN_NS, () -> "the last reader woke after " + lastUs + " us");
            for (MappedBusReader r : readers) {
                assertEquals(1, r.readType());
            }
            assertEquals(0, probe.parked());
        } finally {
            ex.shutdownNow();
            readers.forEach(MappedBusReader::close);
        }
    }

    /** Without the library (here: a reader told not to use it) waitNext polls at the park bound: still bounded. */
    @Test
    public void readerWithoutTheLibraryParksByPolling() throws Exception {
        String path = tmp.resolve("poll.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, FILE, RECORD).open();
             MappedBusReader r = new MappedBusReader(path, FILE, RECORD).open();
             WakeFile probe = WakeFile.forBus(path, false)) {
            r.wakeNative = false;
            r.setIdleStrategy(IdleStrategy.PARK).setParkNanos(2_000_000);
            ExecutorService ex = Executors.newSingleThreadExecutor();
            try {
                Future<Boolean> got = ex.submit(() -> r.waitNext(30, TimeUnit.SECONDS));
                Thread.sleep(50);
                assertEquals(0, probe.parked(), "a polling reader does not register");
                w.write(new byte[] {7}, 0, 1);
                assertTrue(got.get(30, TimeUnit.SECONDS));
                assertEquals(1, r.readType());
            } finally {
                ex.shutdownNow();
            }
        }
        // The same for a wake file opened without the library: it initialises the file through Unsafe.
        Path fresh = tmp.resolve("fresh.wake");
        try (WakeFile f = WakeFile.open(fresh, false, "rw-------", false)) {
            assertFalse(f.isNative());
            assertFalse(f.park(1_000_000), "nobody wakes a polling park");
            assertFalse(f.wakeNeeded());
        }
        try (MemoryMappedFile m = new MemoryMappedFile(fresh.toString(), Layout.WAKE_FILE_SIZE, true)) {
            assertEquals(Layout.WAKE_MAGIC, m.getLong(Layout.WAKE_MAGIC_OFFSET));
            assertEquals(Layout.WAKE_VERSION, m.getInt(Layout.WAKE_VERSION_OFFSET));
        }
    }

    /** waitNext returns false once its time is up, having waited about that long; 0 looks once. */
    @Test
    public void waitNextTimesOut() throws Exception {
        String path = tmp.resolve("t.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, FILE, RECORD).open();
             MappedBusReader r = new MappedBusReader(path, FILE, RECORD).open()) {
            for (IdleStrategy s : IdleStrategy.values()) {
                r.setIdleStrategy(s);
                long t0 = System.nanoTime();
                assertFalse(r.waitNext(30, TimeUnit.MILLISECONDS), s.name());
                assertTrue(System.nanoTime() - t0 >= 30_000_000L, s.name());
            }
            assertFalse(r.waitNext(0, TimeUnit.SECONDS));
            w.write(new byte[0], 0, 0);
            assertTrue(r.waitNext(0, TimeUnit.SECONDS));
        }
        MappedBusReader r = new MappedBusReader(path, FILE, RECORD);
        assertThrows(IllegalArgumentException.class, () -> r.setParkNanos(0));
        assertThrows(IllegalArgumentException.class, () -> r.setParkNanos(60_000_000_001L));
        assertThrows(IllegalArgumentException.class, () -> r.setParkMaxNanos(9_999));
        assertThrows(IllegalArgumentException.class, () -> r.setSpinNanos(-1));
        assertThrows(NullPointerException.class, () -> r.setIdleStrategy(null));
        assertEquals(IdleStrategy.SPIN_PARK, r.idleStrategy());
        assertEquals(10_000L, r.spinNanos());
        assertEquals(Layout.DEFAULT_PARK_NS, r.parkNanos());
        assertEquals(Layout.DEFAULT_PARK_MAX_NS, r.parkMaxNanos());
        r.setParkNanos(50_000_000L);
        assertEquals(50_000_000L, r.parkMaxNanos(), "a max below the park bound is the park bound");
    }

    /**
     * The park bound backs off as wake_backoff in _wake.h: doubling up to the maximum while looks after unwoken parks
     * find nothing, back to the minimum (and held there) once one finds a record; a woken park changes nothing.
     */
    @Test
    public void parkBoundBacksOffAsTheCSide() {
        Waiter w = new Waiter();
        long now = System.nanoTime();
        assertEquals(Layout.DEFAULT_PARK_NS, w.curNanos());
        long[] expect = {2_000_000, 4_000_000, 8_000_000, 16_000_000, 16_000_000};
        for (long e : expect) {
            w.afterPark(false, false, now);
            assertEquals(e, w.curNanos());
        }
        w.afterPark(true, false, now);
        assertEquals(16_000_000, w.curNanos(), "woken: unchanged");
        w.afterPark(false, true, now);
        assertEquals(1_000_000, w.curNanos(), "a record without a wake: back to the minimum");
        w.afterPark(false, false, now + Waiter.PIN_NS - 1);
        assertEquals(1_000_000, w.curNanos(), "held there for PIN_NS");
        w.afterPark(false, false, now + Waiter.PIN_NS);
        assertEquals(2_000_000, w.curNanos(), "then backing off again");
    }

    /** An interrupt ends a parked wait with InterruptedException. */
    @Test
    public void interruptEndsTheWait() throws Exception {
        String path = tmp.resolve("i.bus").toString();
        new MappedBusWriter(path, FILE, RECORD).open().close();
        try (MappedBusReader r = new MappedBusReader(path, FILE, RECORD).open();
             WakeFile probe = WakeFile.forBus(path, false)) {
            r.setIdleStrategy(IdleStrategy.PARK).setParkNanos(5_000_000);
            ExecutorService ex = Executors.newSingleThreadExecutor();
            try {
                Future<Boolean> got = ex.submit(() -> r.waitNext(30, TimeUnit.SECONDS));
                awaitParked(probe, 1);
                got.cancel(true);
                ex.shutdown();
                assertTrue(ex.awaitTermination(10, TimeUnit.SECONDS), "the waiting thread ended");
            } finally {
                ex.shutdownNow();
            }
            assertEquals(0, probe.parked());
        }
    }

    /** A waiting reader notices, within milliseconds, that its file was truncated or replaced. */
    @Test
    public void waitingReaderNoticesTruncationAndReplacement() throws Exception {
        String path = tmp.resolve("tr.bus").toString();
        new MappedBusWriter(path, FILE, RECORD).open().close();
        try (MappedBusReader r = new MappedBusReader(path, FILE, RECORD).open()) {
            CountDownLatch waiting = new CountDownLatch(1);
            ExecutorService ex = Executors.newSingleThreadExecutor();
            try {
                Future<Boolean> got = ex.submit(() -> {
                    waiting.countDown();
                    return r.waitNext(30, TimeUnit.SECONDS);
                });
                waiting.await();
                Thread.sleep(20);
                try (FileChannel ch = FileChannel.open(Path.of(path), StandardOpenOption.WRITE)) {
                    ch.truncate(4096);
                }
                java.util.concurrent.ExecutionException e = assertThrows(java.util.concurrent.ExecutionException.class,
                        () -> got.get(10, TimeUnit.SECONDS));
                assertTrue(e.getCause() instanceof BusTruncatedException, e.getCause().toString());
            } finally {
                ex.shutdownNow();
            }
        }
        String path2 = tmp.resolve("re.bus").toString();
        new MappedBusWriter(path2, FILE, RECORD).open().close();
        try (MappedBusReader r = new MappedBusReader(path2, FILE, RECORD).open()) {
            ExecutorService ex = Executors.newSingleThreadExecutor();
            try {
                Future<Boolean> got = ex.submit(() -> r.waitNext(30, TimeUnit.SECONDS));
                Thread.sleep(20);
                Files.delete(Path.of(path2));
                java.util.concurrent.ExecutionException e = assertThrows(java.util.concurrent.ExecutionException.class,
                        () -> got.get(10, TimeUnit.SECONDS));
                assertTrue(e.getCause() instanceof BusReplacedException, e.getCause().toString());
            } finally {
                ex.shutdownNow();
            }
        }
    }

    /** A rolling reader parked at the end of a segment is woken when the writer rolls into the next one. */
    @Test
    public void rollingReaderIsWokenAcrossSegments() throws Exception {
        String dir = tmp.resolve("roll").toString();
        int record = 8;
        long segment = Layout.FIRST_RECORD_OFFSET + 4 * Layout.slotSize(record); // 4 records a segment
        try (RollingBusWriter w = new RollingBusWriter(dir, segment, record).open();
             RollingBusReader r = new RollingBusReader(dir, segment, record).open();
             WakeFile probe = WakeFile.forRollingBus(dir, false)) {
            r.setIdleStrategy(IdleStrategy.PARK).setParkNanos(LONG_PARK_NS).setParkMaxNanos(LONG_PARK_NS);
            ExecutorService ex = Executors.newSingleThreadExecutor();
            try {
                for (int i = 0; i < 10; i++) { // across two rolls
                    Future<Long> got = ex.submit(() -> r.waitNext(30, TimeUnit.SECONDS) ? System.nanoTime() : -1L);
                    awaitParked(probe, 1);
                    long t0 = System.nanoTime();
                    w.write(new byte[] {(byte) i}, 0, 1);
                    long t1 = got.get(30, TimeUnit.SECONDS);
                    assertTrue(t1 > 0, "delivered");
                    assertTrue(t1 - t0 < WOKEN_NS, () -> "woken after " + (t1 - t0) / 1000 + " us");
                    byte[] b = new byte[record];
                    assertEquals(1, r.readBuffer(b, 0));
                    assertEquals(i, b[0]);
                }
                assertEquals(2, r.segment());
            } finally {
                ex.shutdownNow();
            }
            assertTrue(Files.isRegularFile(Path.of(dir, Layout.WAKE_FILE), LinkOption.NOFOLLOW_LINKS));
        }
    }

    /** A reader killed while parked leaves its slot parked: others free it (and writers stop waking it). */
    @Test
    public void deadParkersAreReclaimed() throws Exception {
        String path = tmp.resolve("dead.bus").toString();
        Process p = new ProcessBuilder("true").start();
        assertEquals(0, p.waitFor());
        int dead = (int) p.pid();
        try (MappedBusWriter w = new MappedBusWriter(path, 1 << 20, RECORD).open();
             WakeFile probe = WakeFile.forBus(path, false)) {
            try (MemoryMappedFile m = new MemoryMappedFile(path + Layout.WAKE_SUFFIX, Layout.WAKE_FILE_SIZE)) {
                for (int slot : new int[] {3, 7}) {
                    long s = Layout.WAKE_SLOTS_OFFSET + (long) slot * Layout.WAKE_SLOT_SIZE;
                    m.putInt(s + Layout.WAKE_SLOT_PID_OFFSET, dead);
                    m.putInt(s + Layout.WAKE_SLOT_STATE_OFFSET, 1);
                }
                m.putInt(Layout.WAKE_PARKED_OFFSET, 2);
                m.putInt(Layout.WAKE_ARMED_OFFSET, 1);
            }
            assertTrue(w.wake.wakeNeeded(), "the dead parkers armed the file");
            // They cost a writer one wake, which takes the arming: the writes after it make no system call.
            byte[] one = new byte[1];
            w.write(one, 0, 1);
            assertFalse(w.wake.wakeNeeded(), "disarmed by the first wake");
            for (int i = 0; i < 100; i++) {
                w.write(one, 0, 1);
            }
            assertEquals(2, probe.parked(), "counted until someone looks");
            assertEquals(2, probe.reclaim(), "the dead parkers' slots freed");
            assertEquals(0, probe.parked(), "reclaimed");
        }
    }

    private static void awaitParked(WakeFile probe, int n) throws InterruptedException, IOException {
        long end = System.nanoTime() + 30_000_000_000L;
        while (probe.parked() < n) {
            if (System.nanoTime() > end) {
                throw new AssertionError("readers parked: " + probe.parked() + " of " + n);
            }
            Thread.sleep(1);
        }
    }
}
