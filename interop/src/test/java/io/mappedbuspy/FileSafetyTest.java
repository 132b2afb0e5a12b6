package io.mappedbuspy;

import java.io.File;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.api.io.TempDir;

import static io.mappedbuspy.Buses.assertContains;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import io.mappedbuspy.internal.BusMeta;
import io.mappedbuspy.internal.MemoryMappedFile;

/** Opening a bus file safely (docs/files-and-rolling.md): what the Java reader and writer refuse. */
public class FileSafetyTest {
    /** Scratch directory, new for each test and deleted after it. */
    @TempDir
    Path tmp;


    private static void mkfifo(String path) throws Exception {
        Process p = new ProcessBuilder("mkfifo", path).inheritIO().start();
        assertTrue(p.waitFor(10, TimeUnit.SECONDS) && p.exitValue() == 0, "mkfifo");
    }

    /** A FIFO is refused before it is opened, so neither a reader nor a writer blocks on it. */
    @Test
    @Timeout(30)
    public void readerAndWriterRefuseAFifoWithoutBlocking() throws Exception {
        String path = tmp.resolve("fifo.bus").toString();
        mkfifo(path);
        for (boolean ro : new boolean[] {true, false}) {
            UnsafeBusFileException e = assertThrows(UnsafeBusFileException.class,
                    () -> new MappedBusReader(path, 4096, 8, ro).open());
            assertContains(e.getMessage(), path);
            assertContains(e.getMessage(), "a FIFO");
        }
        assertContains(assertThrows(UnsafeBusFileException.class,
                () -> new MappedBusWriter(path, 4096, 8).open()).getMessage(), "a FIFO");
        assertThrows(UnsafeBusFileException.class, () -> new MemoryMappedFile(path, 4096, true));
    }

    /** A symbolic link is never followed, even to a good bus; the target is untouched. */
    @Test
    public void symbolicLinkIsRefusedAndItsTargetUntouched() throws Exception {
        String target = tmp.resolve("target.bus").toString();
        new MappedBusWriter(target, 4096, 8).open().close();
        byte[] before = Files.readAllBytes(Path.of(target));
        String link = tmp.resolve("link.bus").toString();
        Files.createSymbolicLink(Path.of(link), Path.of(target));
        UnsafeBusFileException e = assertThrows(UnsafeBusFileException.class,
                () -> new MappedBusWriter(link, 8192, 8).open());
        assertContains(e.getMessage(), link);
        assertContains(e.getMessage(), "symbolic link");
        assertThrows(UnsafeBusFileException.class, () -> new MappedBusReader(link, 4096, 8).open());
        assertThrows(UnsafeBusFileException.class, () -> new MappedBusReader(link, 4096, 8, true).open());
        assertTrue(java.util.Arrays.equals(before, Files.readAllBytes(Path.of(target))), "target unchanged");
        assertFalse(new File(link + ".meta").exists(), "no metadata beside the link");
    }

    /** A file writable by group or others is refused unless setAllowForeign(true). */
    @Test
    public void sharedWritableFileIsRefusedUnlessAllowForeign() throws Exception {
        String path = tmp.resolve("shared.bus").toString();
        new MappedBusWriter(path, 4096, 8).open().close();
        Files.setPosixFilePermissions(Path.of(path), PosixFilePermissions.fromString("rw-rw-rw-"));
        UnsafeBusFileException e = assertThrows(UnsafeBusFileException.class,
                () -> new MappedBusReader(path, 4096, 8).open());
        assertContains(e.getMessage(), path);
        assertContains(e.getMessage(), "writable by group or others");
        assertThrows(UnsafeBusFileException.class, () -> new MappedBusWriter(path, 4096, 8).open());
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 8).setAllowForeign(true).open();
             MappedBusReader r = new MappedBusReader(path, 4096, 8).setAllowForeign(true).open()) {
            assertTrue(w.write(new byte[] {1}, 0, 1), "write");
            assertTrue(r.next(), "read");
        }
    }

    /** Readers never create or grow: a missing file is NoSuchFileException, a short one is refused as is. */
    @Test
    public void readersNeverCreateOrGrowAFile() throws Exception {
        String missing = tmp.resolve("nobus.bus").toString();
        assertContains(assertThrows(NoSuchFileException.class,
                () -> new MappedBusReader(missing, 4096, 8).open()).getMessage(), missing);
        assertFalse(new File(missing).exists(), "not created");
        String shortFile = tmp.resolve("short.bus").toString();
        Files.write(Path.of(shortFile), new byte[100]);
        Files.setPosixFilePermissions(Path.of(shortFile), PosixFilePermissions.fromString("rw-------"));
        for (boolean ro : new boolean[] {true, false}) {
            Exception e = assertThrows(java.io.IOException.class, () -> new MappedBusReader(shortFile, 4096, 8, ro).open());
            assertContains(e.getMessage(), "shorter than");
            assertEquals(100, new File(shortFile).length(), "not grown");
        }
    }

    /** A writer creates its file exactly rw-------, whatever the umask, with metadata beside it. */
    @Test
    public void writerCreatesThePrivateFileAndItsMetadata() throws Exception {
        String path = tmp.resolve("private.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 8).open()) {
            assertEquals("rw-------",
                    PosixFilePermissions.toString(Files.getPosixFilePermissions(Path.of(path), LinkOption.NOFOLLOW_LINKS)), "mode");
            assertEquals("rw-------", PosixFilePermissions.toString(
                    Files.getPosixFilePermissions(BusMeta.metaPath(path), LinkOption.NOFOLLOW_LINKS)), "meta mode");
            assertTrue(w.busId() != null && w.busId().length() == 32, "an id");
        }
    }

    /** A writer whose open fails after it created the file removes the file and its metadata. */
    @Test
    public void failedOpenLeavesNothingBehind() throws Exception {
        String path = tmp.resolve("failed.bus").toString();
        // A size no device can hold: growing fails after the file was created.
        assertThrows(java.io.IOException.class, () -> new MappedBusWriter(path, Long.MAX_VALUE / 4, 8).open());
        assertFalse(new File(path).exists(), "file removed");
        assertFalse(new File(path + ".meta").exists(), "metadata removed");
    }

    /** Another process holding the open lock: BusLockTimeoutException after the bound, naming its pid. */
    @Test
    @Timeout(60)
    public void openLockHeldElsewhereTimesOutWithTheHoldersPid() throws Exception {
        String path = tmp.resolve("locked.bus").toString();
        new MappedBusWriter(path, 4096, 8).open().close();
        Process holder = new ProcessBuilder("python3", "-c",
                "import fcntl,os,sys,time\nfd=os.open(sys.argv[1],os.O_RDWR)\nfcntl.lockf(fd,fcntl.LOCK_EX)\n"
                        + "print('locked',flush=True)\ntime.sleep(60)", path).start();
        try {
            assertEquals("locked",
                    new java.io.BufferedReader(new java.io.InputStreamReader(holder.getInputStream())).readLine(), "holder");
            long start = System.nanoTime();
            BusLockTimeoutException e = assertThrows(BusLockTimeoutException.class,
                    () -> new MappedBusReader(path, 4096, 8).setLockTimeout(300).open());
            long ms = (System.nanoTime() - start) / 1_000_000;
            assertTrue(ms >= 300, "waited the bound, " + ms + " ms");
            assertEquals(holder.pid(), e.holderPid(), "holder pid");
            assertContains(e.getMessage(), path);
            assertContains(e.getMessage(), "" + holder.pid());
            assertThrows(BusLockTimeoutException.class, () -> new MappedBusWriter(path, 4096, 8).setLockTimeout(100).open());
        } finally {
            holder.destroyForcibly().waitFor();
        }
        new MappedBusReader(path, 4096, 8).setLockTimeout(300).open().close(); // released: opens
    }

    /**
     * Calls {@code op} until it throws BusTruncatedException and returns that. A fault the JVM reports late, as
     * an InternalError at any safepoint of this loop, is tolerated; one still pending when the exception
     * arrives is taken at a native call here, not in the caller's assertions.
     */
    private static BusTruncatedException untilTruncationReported(Executable op, int tries) {
        BusTruncatedException found = null;
        int left = tries;
        while (found == null && left > 0) {
            // The fault report is asynchronous: it may arrive inside a handler below too, so it is caught
            // at both levels (its message checked where it is caught).
            try {
                try {
                    while (found == null && left-- > 0) {
                        try {
                            op.execute();
                        } catch (BusTruncatedException e) {
                            found = e;
                        }
                    }
                } catch (InternalError e) {
                    assertContains(e.getMessage(), "unsafe memory access");
                } catch (Throwable t) {
                    throw new AssertionError("only BusTruncatedException or a fault report may come out", t);
                }
            } catch (InternalError e) {
                assertContains(e.getMessage(), "unsafe memory access");
            }
        }
        for (int i = 0; i < 3; i++) {
            try {
                Thread.sleep(1);
            } catch (InternalError e) {
                assertContains(e.getMessage(), "unsafe memory access");
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        assertNotNull(found, "truncation reported within " + tries + " calls");
        return found;
    }

    /** Truncated under a reader's and a writer's mapping: BusTruncatedException naming the path, no crash. */
    @Test
    public void truncationIsReportedByReaderAndWriter() throws Exception {
        String path = tmp.resolve("trunc.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 1 << 16, 8).open();
             MappedBusReader r = new MappedBusReader(path, 1 << 16, 8).open()) {
            w.write(new byte[] {1}, 0, 1);
            assertTrue(r.next(), "first");
            try (RandomAccessFile f = new RandomAccessFile(path, "rw")) {
                f.setLength(0);
            }
            // The JVM reports a fault at its next safepoint or native call, which may lie outside the bus's
            // methods (a raw InternalError there, even after the bus reported the truncation itself).
            BusTruncatedException re = untilTruncationReported(r::next, 1_000_000);
            assertContains(re.getMessage(), path);
            BusTruncatedException we = untilTruncationReported(() -> w.write(new byte[] {2}, 0, 1), 100_000);
            assertContains(we.getMessage(), path);
            assertThrows(BusTruncatedException.class, r::next); // dead from then on
        }
    }

    /** A caught-up reader notices its path now names another file. */
    @Test
    public void caughtUpReaderNoticesReplacement() throws Exception {
        String path = tmp.resolve("repl.bus").toString();
        new MappedBusWriter(path, 4096, 8).open().close();
        try (MappedBusReader r = new MappedBusReader(path, 4096, 8).open()) {
            assertFalse(r.next(), "empty");
            Files.delete(Path.of(path));
            new MappedBusWriter(path, 4096, 8).open().close();
            BusReplacedException e = null;
            long end = System.nanoTime() + 5_000_000_000L;
            while (e == null && System.nanoTime() < end) {
                try {
                    r.next();
                } catch (BusReplacedException x) {
                    e = x;
                }
            }
            assertTrue(e != null, "reported");
            assertContains(e.getMessage(), path);
        }
    }

    /** A crashed batch of 50 uncommitted slots costs about one timeout, not 50. */
    @Test
    @Timeout(60)
    public void crashedBatchCostsOneTimeout() throws Exception {
        String path = tmp.resolve("batch.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 1 << 16, 8).open();
             MappedBusReader r = new MappedBusReader(path, 1 << 16, 8).open()) {
            for (int i = 0; i < 50; i++) {
                Buses.allocateUncommitted(path, 1 << 16, 8, 0, (byte) 0);
            }
            w.write(new byte[] {7}, 0, 1);
            r.setTimeout(200);
            long start = System.nanoTime();
            assertTrue(Buses.await(r, 30_000), "record after the batch");
            long ms = (System.nanoTime() - start) / 1_000_000;
            assertEquals(50, r.rollbacks(), "rollbacks");
            assertTrue(ms >= 200 && ms < 5_000, "one timeout, not 50: " + ms + " ms");
        }
    }

    /** The clock stops when the awaited slot is committed: a slow live writer is never timed out. */
    @Test
    @Timeout(60)
    public void clockStopsWhenTheAwaitedSlotCommits() throws Exception {
        String path = tmp.resolve("slowlive.bus").toString();
        new MappedBusWriter(path, 1 << 16, 8).open().close();
        try (MappedBusReader r = new MappedBusReader(path, 1 << 16, 8).open();
             MemoryMappedFile m = new MemoryMappedFile(path, 1 << 16)) {
            r.setTimeout(300);
            long[] slots = new long[4];
            for (int i = 0; i < slots.length; i++) {
                slots[i] = Buses.allocateUncommitted(path, 1 << 16, 8, 0, (byte) 0);
            }
            // Each slot commits 200 ms after the previous one: 800 ms in all, each under the timeout.
            int got = 0;
            for (long s : slots) {
                long until = System.nanoTime() + 200_000_000L;
                while (System.nanoTime() < until) {
                    got += r.next() ? 1 : 0;
                    Thread.sleep(1);
                }
                m.casStatus(s, Layout.STATUS_NOT_SET, Layout.STATUS_COMMITTED);
            }
            while (r.next()) {
                got++;
            }
            assertEquals(0, r.rollbacks(), "rollbacks");
            assertEquals(4, got, "every slot delivered");
        }
    }

    /**
     * What a writer leaves between creating the file and sizing it under its lock is an empty file: a reader
     * opening then waits for the bus instead of calling it the wrong size, and gives up after its lock timeout.
     */
    @Test
    @Timeout(60)
    public void readerOpeningWhileAWriterCreatesTheBusWaitsForIt() throws Exception {
        String path = tmp.resolve("new.bus").toString();
        Files.createFile(Path.of(path), PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        String[] got = new String[1];
        Thread t = new Thread(() -> {
            try (MappedBusReader r = new MappedBusReader(path, 100_000, 12).setLockTimeout(20_000).open()) {
                got[0] = "id " + r.busId();
            } catch (Exception e) {
                got[0] = e.toString();
            }
        });
        t.start();
        Thread.sleep(200);
        assertTrue(t.isAlive(), "still waiting: an empty file is not a bus yet");
        try (MappedBusWriter w = new MappedBusWriter(path, 100_000, 12).open()) {
            t.join(20_000);
            assertEquals("id " + w.busId(), got[0]);
        }
        String empty = tmp.resolve("empty.bus").toString();
        Files.createFile(Path.of(empty), PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        long t0 = System.nanoTime();
        NoSuchFileException e = assertThrows(NoSuchFileException.class,
                () -> new MappedBusReader(empty, 100_000, 12).setLockTimeout(300).open());
        assertContains(e.getMessage(), "empty file");
        assertTrue(System.nanoTime() - t0 >= 300_000_000L, "waited the lock timeout");
        assertEquals(0, Files.size(Path.of(empty)));
    }
}
