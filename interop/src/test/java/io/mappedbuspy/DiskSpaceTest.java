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

/** Pages mapped ahead through the JNI library's madvise. */
public final class DiskSpaceTest {
    private Path file;

    @BeforeEach
    void make() throws Exception {
        Path dir = Files.isDirectory(Paths.get("/dev/shm")) ? Paths.get("/dev/shm") : Paths.get("/tmp");
        file = Files.createTempFile(dir, "diskspace", ".bus");
    }

    @AfterEach
    void remove() throws Exception {
        Files.deleteIfExists(file);
    }

    /**
     * A writer's pages are mapped ahead with one madvise; on a file truncated under the mapping the call fails
     * (EFAULT, no SIGBUS) and the caller falls back to loads, which report the truncation as ever.
     */
    @Test
    public void populateWriteMapsPagesAndFailsCleanlyPastATruncation() throws Exception {
        Files.delete(file);
        new MappedBusWriter(file.toString(), 1 << 20, 8).open().close();
        MemoryMappedFile.OpenOptions o = new MemoryMappedFile.OpenOptions();
        MemoryMappedFile m = MemoryMappedFile.open(file.toString(), 1 << 20, o);
        assertTrue(WakeLibrary.LOADED, WakeLibrary.WHAT); // the suite's JVM names the checkout: it has the library
        try {
            assertTrue(DiskSpace.populateWrite(m, 0, 1 << 20), "populated");
            try (FileChannel ch = FileChannel.open(file, StandardOpenOption.WRITE)) {
                ch.truncate(8192);
            }
            assertFalse(DiskSpace.populateWrite(m, 0, 1 << 20), "past the end: refused, the JVM alive");
        } finally {
            m.closeAndUnmap();
            Files.deleteIfExists(BusMeta.metaPath(file.toString()));
            Files.deleteIfExists(Paths.get(file + Layout.WAKE_SUFFIX));
        }
    }
}
