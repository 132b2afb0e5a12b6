package io.mappedbuspy;

import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import io.mappedbuspy.internal.DiskSpace;
import io.mappedbuspy.internal.MemoryMappedFile;
import io.mappedbuspy.internal.WakeLibrary;

/** Preallocation through the JNI library's posix_fallocate, on the channel's own descriptor. */
public final class DiskSpaceTest {
    private Path file;

    @BeforeEach
    void make() throws Exception {
        Path dir = Files.isDirectory(Paths.get("/dev/shm")) ? Paths.get("/dev/shm") : Paths.get("/tmp");
        // The JVM's pid in the name, as the Python tests' names carry theirs (tests/support/leftovers.py).
        file = Files.createTempFile(dir, "diskspace-" + ProcessHandle.current().pid() + "-", ".bus");
    }

    @AfterEach
    void remove() throws Exception {
        Layout.removeBus(file.toString());   // the bus and every side file (the writers file too)
    }

    /** The suite's JVM loads the library (interop/test.sh names the checkout): preallocation is a system call. */
    @Test
    public void fallocateGrowsTheChannelsFile() throws Exception {
        assertTrue(WakeLibrary.LOADED, WakeLibrary.WHAT);
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.WRITE)) {
            assertEquals(0, DiskSpace.fallocate(ch, 0, 3 << 20));
            assertEquals(3 << 20, ch.size());
            DiskSpace.preallocate(ch, file.toString(), 3 << 20, 5 << 20);
            assertEquals(5 << 20, ch.size());
        }
    }

    /**
     * A writer's pages are mapped ahead with one madvise, for writing or reading; on a file truncated under the
     * mapping the call fails (EFAULT, no SIGBUS) and the caller falls back to loads, which report the truncation
     * as ever.
     */
    @Test
    public void populateMapsPagesAndFailsCleanlyPastATruncation() throws Exception {
        Files.delete(file);
        new MappedBusWriter(file.toString(), 1 << 20, 8).open().close();
        MemoryMappedFile.OpenOptions o = new MemoryMappedFile.OpenOptions();
        MemoryMappedFile m = MemoryMappedFile.open(file.toString(), 1 << 20, o);
        try {
            assertTrue(DiskSpace.populate(m, 0, 1 << 20, true), "populated for writing");
            assertTrue(DiskSpace.populate(m, 0, 1 << 20, false), "populated for reading");
            try (FileChannel ch = FileChannel.open(file, StandardOpenOption.WRITE)) {
                ch.truncate(8192);
            }
            assertFalse(DiskSpace.populate(m, 0, 1 << 20, true), "past the end: refused, the JVM alive");
            assertFalse(DiskSpace.populate(m, 0, 1 << 20, false), "past the end, reading: refused too");
        } finally {
            m.closeAndUnmap();
        }
    }

    /**
     * A rolling writer's spare is mapped ahead a step at a time, and a roll into it stops that between two steps
     * (SegmentRoller): the writes then map the rest as they go, and every record lands.
     */
    @Test
    public void populateAllStopsBetweenStepsAndTheWritesMapTheRest() throws Exception {
        Files.delete(file);
        long size = 4 * MappedBusWriter.POPULATE_STEP;
        int[] looks = {0};
        long n = 0;
        try (MappedBusWriter w = new MappedBusWriter(file.toString(), size, 8).open()) {
            w.populateAll(false, () -> looks[0]++ > 0);
            assertEquals(MappedBusWriter.POPULATE_STEP, w.populatedTo(), "one step, then stopped");
            byte[] rec = new byte[8];
            try {
                for (;;) {
                    rec[0] = (byte) n;
                    w.write(rec, 0, 8);
                    n++;
                }
            } catch (java.io.EOFException full) {
                // every slot written
            }
        }
        assertEquals((size - Layout.FIRST_RECORD_OFFSET) / Layout.slotSize(8), n, "the whole file written");
        try (MappedBusReader r = new MappedBusReader(file.toString(), size, 8).open()) {
            byte[] got = new byte[8];
            for (long i = 0; i < n; i++) {
                assertTrue(r.next(), "record " + i);
                r.readBuffer(got, 0);
                assertEquals((byte) i, got[0]);
            }
        }
    }

    /** The descriptor is the channel's: one opened read-only cannot be grown (EBADF), and a closed one is none. */
    @Test
    public void fallocateUsesTheChannelsDescriptor() throws Exception {
        FileChannel ch = FileChannel.open(file, StandardOpenOption.READ);
        try (ch) {
            assertEquals(9, DiskSpace.fallocate(ch, 0, 4096), "EBADF");
            assertEquals(0, ch.size());
        }
        assertEquals(-1, DiskSpace.fallocate(ch, 0, 4096), "closed: no descriptor");
    }
}
