package io.mappedbuspy;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static io.mappedbuspy.Buses.assertContains;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import io.mappedbuspy.internal.MemoryMappedFile;
import io.mappedbuspy.internal.Waiter;
import io.mappedbuspy.internal.WakeFile;

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

    /** One step of the protocol on a wake file, with a second instance on the same file. */
    private interface Step {
        void run(WakeFile w, WakeFile other) throws Exception;
    }

    /**
     * Every step of the protocol on a wake file truncated to 0 bytes under its mapping (as another process may do):
     * the JVM survives (the steps are Unsafe accesses, whose fault the JVM reports as an InternalError; the library
     * only makes futex calls, which fail with EFAULT there), nothing is thrown, the fault's report is taken inside
     * the step (none is left pending for the caller's code) and the file is no longer used. The writer's look after
     * each commit (wakeNeeded, one load) is the one step that may leave its report pending (docs/jvm.md).
     */
    @Test
    public void everyStepSurvivesTheFileTruncatedUnderIt() throws Exception {
        int[] v = new int[1];
        Map<String, Step[]> steps = new LinkedHashMap<>(); // {before the truncation, after it}
        steps.put("claim and prepare", new Step[] {(w, o) -> { }, (w, o) -> w.prepare()});
        steps.put("prepare", new Step[] {(w, o) -> w.park(10_000), (w, o) -> w.prepare()});
        steps.put("await", new Step[] {(w, o) -> v[0] = w.prepare(), (w, o) -> assertFalse(w.await(v[0], 1_000_000))});
        steps.put("done", new Step[] {(w, o) -> w.prepare(), (w, o) -> w.done()});
        steps.put("park", new Step[] {(w, o) -> w.park(10_000), (w, o) -> assertFalse(w.park(1_000_000))});
        steps.put("wake", new Step[] {(w, o) -> o.prepare(), (w, o) -> w.wake()});
        steps.put("parked", new Step[] {(w, o) -> { }, (w, o) -> assertEquals(0, w.parked())});
        steps.put("reclaim", new Step[] {(w, o) -> { }, (w, o) -> assertEquals(0, w.reclaim())});
        steps.put("close", new Step[] {(w, o) -> w.park(10_000), (w, o) -> w.close()});
        int k = 0;
        for (Map.Entry<String, Step[]> e : steps.entrySet()) {
            String step = e.getKey();
            Path file = tmp.resolve("step" + k++ + ".wake");
            try (WakeFile w = WakeFile.open(file, false, "rw-------");
                 WakeFile o = WakeFile.open(file, false, "rw-------")) {
                assertTrue(w.isNative(), step);
                e.getValue()[0].run(w, o);
                truncate(file, 0);
                assertDoesNotThrow(() -> e.getValue()[1].run(w, o), step);
                assertNoFaultReportPending(step);
                if (!step.equals("close")) {
                    // A step that touched no page past the new end (its slot already given back, as timing
                    // decides) leaves the truncation to the look every waiting reader and writer makes.
                    w.check();
                    assertFalse(w.isNative(), step + ": the file is no longer used");
                }
                assertFalse(w.park(10_000), step + ": a park polls");
                w.wake();
                assertNoFaultReportPending(step + ", then");
            }
            assertNoFaultReportPending(step + ", closed");
        }

        // The writer's look: it may leave its report pending, to be raised at this thread's next entry into the VM
        // (here, in this try), unless what the faulted load left sends it to wake(), which takes the report.
        Path file = tmp.resolve("look.wake");
        try (WakeFile w = WakeFile.open(file, false, "rw-------");
             WakeFile o = WakeFile.open(file, false, "rw-------")) {
            o.prepare();
            truncate(file, 0);
            try {
                if (w.wakeNeeded()) {
                    w.wake();
                }
                MemoryMappedFile.raiseFaultReports();
            } catch (InternalError e) {
                assertContains(e.getMessage(), "unsafe memory access");
            }
        }
        assertNoFaultReportPending("wakeNeeded, closed");

        // Cut inside its first page, which stays mapped: nothing faults, the words past the cut read 0 (the slots,
        // seq), and a waiting reader's look at the length drops the file.
        Path cut = tmp.resolve("cut.wake");
        try (WakeFile w = WakeFile.open(cut, false, "rw-------")) {
            w.park(10_000);
            truncate(cut, 100);
            assertFalse(w.park(1_000_000));
            assertTrue(w.isNative());
            w.check();
            assertFalse(w.isNative(), "dropped at the reader's look");
        }
        assertNoFaultReportPending("cut at 100 bytes");
    }

    /**
     * Readers parked in waitNext and a writer writing while another thread truncates the wake file under them, to 0
     * bytes and to 100 (inside its first page), and lets it grow back, over and over: the JVM survives, every reader
     * gets every record, in order (by its own looks once it no longer uses the file), nothing is thrown by the port,
     * and no write fails. Each round has a new bus, readers and writer, so that the truncations meet wake files in
     * use. The writer's look after a commit (one load) may leave the JVM's report of its fault pending, raised at the
     * thread's next entry into the VM (docs/jvm.md): here the application's code between two writes, which takes it.
     */
    @Test
    public void truncatingTheWakeFileUnderReadersAndAWriterLosesNothing() throws Exception {
        int rounds = 8;
        int readers = 3;
        int records = 300;
        byte[][] patterns = new byte[records][];
        for (int n = 0; n < records; n++) {
            patterns[n] = Buses.pattern(RECORD, n);
        }
        int dropped = 0;
        int lateReports = 0;
        ExecutorService ex = Executors.newFixedThreadPool(readers + 2);
        try {
            for (int round = 0; round < rounds; round++) {
                String path = tmp.resolve("cut" + round + ".bus").toString();
                Path wake = Path.of(path + Layout.WAKE_SUFFIX);
                List<MappedBusReader> rs = new ArrayList<>();
                try (MappedBusWriter w = new MappedBusWriter(path, FILE, RECORD).open()) {
                    List<Future<?>> done = new ArrayList<>();
                    for (int i = 0; i < readers; i++) {
                        MappedBusReader r = new MappedBusReader(path, FILE, RECORD).open();
                        r.setIdleStrategy(IdleStrategy.PARK);
                        rs.add(r);
                        done.add(ex.submit(() -> {
                            byte[] b = new byte[RECORD];
                            for (int n = 0; n < records; n++) {
                                assertTrue(r.waitNext(30, TimeUnit.SECONDS), "record " + n);
                                assertEquals(RECORD, r.readBuffer(b, 0));
                                assertArrayEquals(patterns[n], b, "record " + n);
                            }
                            return null;
                        }));
                    }
                    AtomicBoolean stop = new AtomicBoolean();
                    AtomicInteger cuts = new AtomicInteger();
                    Future<?> cutter = ex.submit(() -> {
                        try (RandomAccessFile f = new RandomAccessFile(wake.toFile(), "rw")) {
                            long[] sizes = {0, Layout.WAKE_FILE_SIZE, 100, Layout.WAKE_FILE_SIZE};
                            for (int i = 0; !stop.get(); i++) {
                                f.setLength(sizes[i % sizes.length]);
                                cuts.incrementAndGet();
                                LockSupport.parkNanos(300_000 + (i % 7) * 100_000);
                            }
                        }
                        return null;
                    });
                    Future<Integer> writer = ex.submit(() -> {
                        int late = 0;
                        for (int n = 0; n < records; n++) {
                            boolean ok = w.write(patterns[n], 0, RECORD);
                            try {
                                MemoryMappedFile.raiseFaultReports(); // the application's entry into the VM
                            } catch (InternalError e) {
                                assertContains(e.getMessage(), "unsafe memory access");
                                late++;
                            }
                            if (!ok) {
                                throw new AssertionError("record " + n + " rolled back");
                            }
                            LockSupport.parkNanos(100_000); // time for the readers to park
                        }
                        return late;
                    });
                    try {
                        lateReports += writer.get(60, TimeUnit.SECONDS);
                        for (Future<?> f : done) {
                            f.get(60, TimeUnit.SECONDS);
                        }
                    } finally {
                        stop.set(true);
                        cutter.get(10, TimeUnit.SECONDS);
                    }
                    assertTrue(cuts.get() >= 4, "truncated " + cuts.get() + " times");
                    if (!w.wake.isNative()) {
                        dropped++;
                    }
                } finally {
                    rs.forEach(MappedBusReader::close);
                }
            }
        } finally {
            ex.shutdownNow();
        }
        // The writers met their files cut: one stopped using its file, or reports of looks came between writes.
        assertTrue(dropped + lateReports > 0, "the writers never met a truncated wake file");
    }

    /**
     * The JVM's report of a fault in another file (here one the message touches, truncated under its mapping, as a
     * writer's look at a truncated wake file can leave one), raised inside a write: not taken for a truncation of the
     * bus, which is whole; the record is written once and the writer goes on.
     */
    @Test
    public void aFaultReportOfAnotherFileDoesNotEndAWrite() throws Exception {
        String other = tmp.resolve("other").toString();
        String path = tmp.resolve("late.bus").toString();
        try (MemoryMappedFile cut = new MemoryMappedFile(other, Layout.PAGE_SIZE);
             MappedBusWriter w = new MappedBusWriter(path, FILE, RECORD).open();
             MappedBusReader r = new MappedBusReader(path, FILE, RECORD).open()) {
            truncate(Path.of(other), 0);
            int[] calls = new int[1];
            MappedBusMessage m = new MappedBusMessage() {
                @Override
                public void write(MemoryMappedFile mem, long pos) {
                    if (calls[0]++ == 0) {
                        MemoryMappedFile.getIntVolatileAt(cut.baseAddress()); // a fault, its report left pending
                        MemoryMappedFile.raiseFaultReports(); // and raised here, inside the write
                    }
                    mem.putInt(pos, 42);
                }

                @Override
                public void read(MemoryMappedFile mem, long pos) {
                }

                @Override
                public int type() {
                    return 7;
                }
            };
            assertTrue(w.write(m), "committed");
            assertEquals(2, calls[0], "the message written again after the report");
            assertTrue(w.write(new byte[] {1}, 0, 1), "the writer goes on");
            assertTrue(r.next());
            assertEquals(7, r.readType());
            assertTrue(r.next());
            assertEquals(1, r.readType());
            assertFalse(r.next(), "nothing else");
        }
        assertNoFaultReportPending("after the writes");
    }

    private static void truncate(Path file, long size) throws IOException {
        try (RandomAccessFile f = new RandomAccessFile(file.toFile(), "rw")) {
            f.setLength(size);
        }
    }

    // Raises here a fault's report that the JVM may still hold for this thread: none may be.
    private static void assertNoFaultReportPending(String what) {
        try {
            MemoryMappedFile.raiseFaultReports();
        } catch (InternalError e) {
            throw new AssertionError(what + ": a fault's report was left for the caller", e);
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
