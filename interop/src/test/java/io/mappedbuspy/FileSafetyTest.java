package io.mappedbuspy;

import static io.mappedbuspy.testing.Assert.assertContains;
import static io.mappedbuspy.testing.Assert.assertEquals;
import static io.mappedbuspy.testing.Assert.assertFalse;
import static io.mappedbuspy.testing.Assert.assertThrows;
import static io.mappedbuspy.testing.Assert.assertTrue;

import io.mappedbuspy.testing.Test;
import io.mappedbuspy.testing.TestFiles;

import java.io.File;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.concurrent.TimeUnit;

/** Opening a bus file safely (docs/files-and-rolling.md): what the Java reader and writer refuse. */
public class FileSafetyTest {

    private static void mkfifo(String path) throws Exception {
        Process p = new ProcessBuilder("mkfifo", path).inheritIO().start();
        assertTrue("mkfifo", p.waitFor(10, TimeUnit.SECONDS) && p.exitValue() == 0);
    }

    /** A FIFO is refused before it is opened, so neither a reader nor a writer blocks on it. */
    @Test(timeoutSeconds = 30)
    public void readerAndWriterRefuseAFifoWithoutBlocking() throws Exception {
        String path = TestFiles.newPath("fifo.bus");
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
        String target = TestFiles.newPath("target.bus");
        new MappedBusWriter(target, 4096, 8).open().close();
        byte[] before = Files.readAllBytes(Path.of(target));
        String link = TestFiles.newPath("link.bus");
        Files.createSymbolicLink(Path.of(link), Path.of(target));
        UnsafeBusFileException e = assertThrows(UnsafeBusFileException.class,
                () -> new MappedBusWriter(link, 8192, 8).open());
        assertContains(e.getMessage(), link);
        assertContains(e.getMessage(), "symbolic link");
        assertThrows(UnsafeBusFileException.class, () -> new MappedBusReader(link, 4096, 8).open());
        assertThrows(UnsafeBusFileException.class, () -> new MappedBusReader(link, 4096, 8, true).open());
        assertTrue("target unchanged", java.util.Arrays.equals(before, Files.readAllBytes(Path.of(target))));
        assertFalse("no metadata beside the link", new File(link + ".meta").exists());
    }

    /** A file writable by group or others is refused unless setAllowForeign(true). */
    @Test
    public void sharedWritableFileIsRefusedUnlessAllowForeign() throws Exception {
        String path = TestFiles.newPath("shared.bus");
        new MappedBusWriter(path, 4096, 8).open().close();
        Files.setPosixFilePermissions(Path.of(path), PosixFilePermissions.fromString("rw-rw-rw-"));
        UnsafeBusFileException e = assertThrows(UnsafeBusFileException.class,
                () -> new MappedBusReader(path, 4096, 8).open());
        assertContains(e.getMessage(), path);
        assertContains(e.getMessage(), "writable by group or others");
        assertThrows(UnsafeBusFileException.class, () -> new MappedBusWriter(path, 4096, 8).open());
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 8).setAllowForeign(true).open();
             MappedBusReader r = new MappedBusReader(path, 4096, 8).setAllowForeign(true).open()) {
            assertTrue("write", w.write(new byte[] {1}, 0, 1));
            assertTrue("read", r.next());
        }
    }

    /** Readers never create or grow: a missing file is NoSuchFileException, a short one is refused as is. */
    @Test
    public void readersNeverCreateOrGrowAFile() throws Exception {
        String missing = TestFiles.newPath("nobus.bus");
        assertContains(assertThrows(NoSuchFileException.class,
                () -> new MappedBusReader(missing, 4096, 8).open()).getMessage(), missing);
        assertFalse("not created", new File(missing).exists());
        String shortFile = TestFiles.newPath("short.bus");
        Files.write(Path.of(shortFile), new byte[100]);
        Files.setPosixFilePermissions(Path.of(shortFile), PosixFilePermissions.fromString("rw-------"));
        for (boolean ro : new boolean[] {true, false}) {
            Exception e = assertThrows(java.io.IOException.class, () -> new MappedBusReader(shortFile, 4096, 8, ro).open());
            assertContains(e.getMessage(), "shorter than");
            assertEquals("not grown", 100, new File(shortFile).length());
        }
    }

    /** A writer creates its file exactly rw-------, whatever the umask, with metadata beside it. */
    @Test
    public void writerCreatesThePrivateFileAndItsMetadata() throws Exception {
        String path = TestFiles.newPath("private.bus");
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 8).open()) {
            assertEquals("mode", "rw-------",
                    PosixFilePermissions.toString(Files.getPosixFilePermissions(Path.of(path), LinkOption.NOFOLLOW_LINKS)));
            assertEquals("meta mode", "rw-------", PosixFilePermissions.toString(
                    Files.getPosixFilePermissions(BusMeta.metaPath(path), LinkOption.NOFOLLOW_LINKS)));
            assertTrue("an id", w.busId() != null && w.busId().length() == 32);
        }
    }

    /** A writer whose open fails after it created the file removes the file and its metadata. */
    @Test
    public void failedOpenLeavesNothingBehind() throws Exception {
        String path = TestFiles.newPath("failed.bus");
        // A size no device can hold: growing fails after the file was created.
        assertThrows(java.io.IOException.class, () -> new MappedBusWriter(path, Long.MAX_VALUE / 4, 8).open());
        assertFalse("file removed", new File(path).exists());
        assertFalse("metadata removed", new File(path + ".meta").exists());
    }

    /** Another process holding the open lock: BusLockTimeoutException after the bound, naming its pid. */
    @Test(timeoutSeconds = 60)
    public void openLockHeldElsewhereTimesOutWithTheHoldersPid() throws Exception {
        String path = TestFiles.newPath("locked.bus");
        new MappedBusWriter(path, 4096, 8).open().close();
        Process holder = new ProcessBuilder("python3", "-c",
                "import fcntl,os,sys,time\nfd=os.open(sys.argv[1],os.O_RDWR)\nfcntl.lockf(fd,fcntl.LOCK_EX)\n"
                        + "print('locked',flush=True)\ntime.sleep(60)", path).start();
        try {
            assertEquals("holder", "locked",
                    new java.io.BufferedReader(new java.io.InputStreamReader(holder.getInputStream())).readLine());
            long start = System.nanoTime();
            BusLockTimeoutException e = assertThrows(BusLockTimeoutException.class,
                    () -> new MappedBusReader(path, 4096, 8).setLockTimeout(300).open());
            long ms = (System.nanoTime() - start) / 1_000_000;
            assertTrue("waited the bound, " + ms + " ms", ms >= 300);
            assertEquals("holder pid", holder.pid(), e.holderPid());
            assertContains(e.getMessage(), path);
            assertContains(e.getMessage(), "" + holder.pid());
            assertThrows(BusLockTimeoutException.class, () -> new MappedBusWriter(path, 4096, 8).setLockTimeout(100).open());
        } finally {
            holder.destroyForcibly().waitFor();
        }
        new MappedBusReader(path, 4096, 8).setLockTimeout(300).open().close(); // released: opens
    }

    /** Truncated under a reader's and a writer's mapping: BusTruncatedException naming the path, no crash. */
    @Test
    public void truncationIsReportedByReaderAndWriter() throws Exception {
        String path = TestFiles.newPath("trunc.bus");
        try (MappedBusWriter w = new MappedBusWriter(path, 1 << 16, 8).open();
             MappedBusReader r = new MappedBusReader(path, 1 << 16, 8).open()) {
            w.write(new byte[] {1}, 0, 1);
            assertTrue("first", r.next());
            try (RandomAccessFile f = new RandomAccessFile(path, "rw")) {
                f.setLength(0);
            }
            // The JVM reports a fault at its next safepoint or native call, which may lie just outside the
            // bus's methods (a raw InternalError there); the bus's own checks then report the truncation.
            BusTruncatedException re = null;
            for (int i = 0; i < 1_000_000 && re == null; i++) {
                try {
                    r.next();
                } catch (BusTruncatedException e) {
                    re = e;
                } catch (InternalError e) {
                    assertContains(e.getMessage(), "unsafe memory access");
                }
            }
            assertTrue("reader reported", re != null);
            assertContains(re.getMessage(), path);
            BusTruncatedException we = null;
            for (int i = 0; i < 100_000 && we == null; i++) {
                try {
                    w.write(new byte[] {2}, 0, 1);
                } catch (BusTruncatedException e) {
                    we = e;
                } catch (InternalError e) {
                    assertContains(e.getMessage(), "unsafe memory access");
                }
            }
            assertTrue("writer reported", we != null);
            assertContains(we.getMessage(), path);
            assertThrows(BusTruncatedException.class, r::next); // dead from then on
        }
    }

    /** A caught-up reader notices its path now names another file. */
    @Test
    public void caughtUpReaderNoticesReplacement() throws Exception {
        String path = TestFiles.newPath("repl.bus");
        new MappedBusWriter(path, 4096, 8).open().close();
        try (MappedBusReader r = new MappedBusReader(path, 4096, 8).open()) {
            assertFalse("empty", r.next());
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
            assertTrue("reported", e != null);
            assertContains(e.getMessage(), path);
        }
    }

    /** A crashed batch of 50 uncommitted slots costs about one timeout, not 50. */
    @Test(timeoutSeconds = 60)
    public void crashedBatchCostsOneTimeout() throws Exception {
        String path = TestFiles.newPath("batch.bus");
        try (MappedBusWriter w = new MappedBusWriter(path, 1 << 16, 8).open();
             MappedBusReader r = new MappedBusReader(path, 1 << 16, 8).open()) {
            for (int i = 0; i < 50; i++) {
                Buses.allocateUncommitted(path, 1 << 16, 8, 0, (byte) 0);
            }
            w.write(new byte[] {7}, 0, 1);
            r.setTimeout(200);
            long start = System.nanoTime();
            assertTrue("record after the batch", Buses.await(r, 30_000));
            long ms = (System.nanoTime() - start) / 1_000_000;
            assertEquals("rollbacks", 50, r.rollbacks());
            assertTrue("one timeout, not 50: " + ms + " ms", ms >= 200 && ms < 5_000);
        }
    }

    /** The clock stops when the awaited slot is committed: a slow live writer is never timed out. */
    @Test(timeoutSeconds = 60)
    public void clockStopsWhenTheAwaitedSlotCommits() throws Exception {
        String path = TestFiles.newPath("slowlive.bus");
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
            assertEquals("rollbacks", 0, r.rollbacks());
            assertEquals("every slot delivered", 4, got);
        }
    }
}
