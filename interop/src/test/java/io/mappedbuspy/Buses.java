package io.mappedbuspy;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Paths;

import static org.junit.jupiter.api.Assertions.assertTrue;
import io.mappedbuspy.internal.MemoryMappedFile;

/** Helpers shared by the tests. */
final class Buses {
    private Buses() {
    }

    /** Allocates a record and fills it without committing, as a writer that crashed mid-write. */
    static long allocateUncommitted(String path, long fileSize, int recordSize, int meta, byte fill)
            throws IOException {
        try (MemoryMappedFile mem = new MemoryMappedFile(path, fileSize)) {
            mem.compareAndSetLong(Layout.LIMIT_OFFSET, 0, Layout.FIRST_RECORD_OFFSET);
            long offset = mem.getAndAddLong(Layout.LIMIT_OFFSET, Layout.slotSize(recordSize));
            mem.putInt(offset + Layout.METADATA_OFFSET, meta);
            for (int i = 0; i < recordSize; i++) {
                mem.putByte(offset + Layout.PAYLOAD_OFFSET + i, fill);
            }
            return offset;
        }
    }

    /** Fails unless {@code text} contains {@code part}, showing both (JUnit has no such assertion). */
    static void assertContains(String text, String part) {
        assertTrue(text != null && text.contains(part), () -> "expected <" + text + "> to contain <" + part + ">");
    }

    static byte[] bytes(String path) throws IOException {
        return Files.readAllBytes(Paths.get(path));
    }

    static byte[] pattern(int length, int seed) {
        byte[] b = new byte[length];
        for (int i = 0; i < length; i++) {
            b[i] = (byte) (seed * 31 + i);
        }
        return b;
    }

    /** Polls next() until it returns true, for at most timeoutMs. */
    static boolean await(MappedBusReader r, long timeoutMs) throws IOException {
        long end = System.nanoTime() + timeoutMs * 1_000_000L;
        while (System.nanoTime() < end) {
            if (r.next()) {
                return true;
            }
            Thread.onSpinWait();
        }
        return false;
    }
}
