package io.mappedbuspy.perf;

import io.mappedbuspy.internal.MemoryMappedFile;

import java.lang.reflect.Field;

/** Benchmark helper: maps every page of a writer's or reader's mapping in before the timing. */
final class Prefault {
    private Prefault() {
    }

    /**
     * Reads one byte of every page of {@code owner}'s mapping, so no page fault falls inside the
     * timing (the Python side's {@code prefault=True}).
     *
     * @param owner    an open MappedBusWriter or MappedBusReader
     * @param fileSize the bus's file size
     * @throws ReflectiveOperationException if the owner has no mapping field
     */
    static void touch(Object owner, long fileSize) throws ReflectiveOperationException {
        // The benchmark reaches the private mapping: the library has no public prefault option.
        Field f = owner.getClass().getDeclaredField("mem");
        f.setAccessible(true);
        MemoryMappedFile mem = (MemoryMappedFile) f.get(owner);
        long sum = 0;
        for (long p = 0; p < fileSize; p += 4096) {
            sum += mem.getByte(p);
        }
        if (sum == Long.MIN_VALUE) {
            System.err.println(sum);
        }
    }
}
