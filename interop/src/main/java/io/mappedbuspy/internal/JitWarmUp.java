package io.mappedbuspy.internal;

import java.lang.ref.Reference;
import java.nio.ByteBuffer;
import io.mappedbuspy.Layout;

/**
 * Compiles the atomic accessors before any file is mapped. An atomic read-modify-write that the interpreter runs (a
 * method not yet compiled) goes through a native {@code Unsafe} call that is not guarded against a fault: on a page
 * past the end of a truncated file it crashes the JVM (SIGBUS in {@code Unsafe_CompareAndSetLong}, JDK 17 and 21),
 * where compiled code raises an {@code InternalError} instead. So {@link MemoryMappedFile}'s class initialisation
 * runs them on a private direct buffer until the JIT has compiled them with the guarded intrinsics: the accessors of
 * a mapping and the raw-address read-modify-writes of the wake file ({@link WakeFile}).
 * <p>Internal: not a supported API.
 */
final class JitWarmUp {
    /** Rounds of the loop: about 50 ms, once per JVM. */
    private static final int ROUNDS = 30_000;

    private JitWarmUp() {
    }

    /** Runs every atomic accessor {@link #ROUNDS} times on a page of this process's own memory. */
    static void run() {
        MemoryMappedFile w = new MemoryMappedFile(ByteBuffer.allocateDirect(Layout.PAGE_SIZE));
        long a = w.baseAddress();
        for (int i = 0; i < ROUNDS; i++) {
            w.getAndAddLong(8, 1);
            w.compareAndSetLong(16, i, i + 1L);
            w.compareAndSetInt(24, i, i + 1);
            w.casStatus(33, 0, 0);
            w.casStatus(40, 0, 0);
            w.getLongAcquire(8);
            w.setIntRelease(48, i);
            MemoryMappedFile.compareAndSetIntAt(a + 56, i, i + 1);
            MemoryMappedFile.getAndAddIntAt(a + 60, 1);
            MemoryMappedFile.getAndSetIntAt(a + 64, i);
            MemoryMappedFile.putIntVolatileAt(a + 68, i);
            MemoryMappedFile.putLongReleaseAt(a + 72, i);
            MemoryMappedFile.getLongVolatileAt(a + 72);
        }
        Reference.reachabilityFence(w);
    }
}
