package io.mappedbuspy.internal;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.reflect.Field;
import java.nio.ByteBuffer;

/**
 * The {@code sun.misc.Unsafe} bootstrap: its memory operations as constant method handles, and the raw-address
 * accessors built on them.
 *
 * <p>The hot accessors of {@link MemoryMappedFile} go through {@code sun.misc.Unsafe} on the mapping's address, as
 * the original does: a {@code ByteBuffer} or {@code VarHandle} access adds its own index, read-only and alignment
 * checks and a scope check to the bounds check {@code MemoryMappedFile} makes anyway (measured: the Java port at
 * 0.48 x the original's throughput). {@code Unsafe} lives in the {@code jdk.unsupported} module, which every JDK
 * 17+ exports, so no {@code --add-opens} flag is needed. It is reached through method handles held in
 * {@code static final} fields, which the JIT treats as constants and inlines. A fault on a truncated page raises the
 * same {@code InternalError} as through a {@code ByteBuffer} (the same intrinsics).
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
 */
public final class UnsafeAccess {
    static final MethodHandle GET_BYTE;
    static final MethodHandle PUT_BYTE;
    static final MethodHandle GET_INT;
    static final MethodHandle PUT_INT;
    static final MethodHandle GET_LONG;
    static final MethodHandle PUT_LONG;
    static final MethodHandle GET_INT_VOLATILE;
    static final MethodHandle GET_LONG_VOLATILE;
    static final MethodHandle PUT_INT_ORDERED;
    static final MethodHandle PUT_INT_VOLATILE;
    static final MethodHandle PUT_LONG_ORDERED;
    static final MethodHandle GET_AND_ADD_INT;
    static final MethodHandle GET_AND_SET_INT;
    static final MethodHandle GET_AND_ADD_LONG;
    static final MethodHandle CAS_INT;
    static final MethodHandle CAS_LONG;
    private static final MethodHandle GET_LONG_FIELD;
    private static final MethodHandle GET_INT_FIELD;
    private static final MethodHandle GET_OBJECT_FIELD;
    private static final MethodHandle FIELD_OFFSET;
    private static final MethodHandle INVOKE_CLEANER;
    private static final long BUFFER_ADDRESS;

    static {
        try {
            Class<?> k = Class.forName("sun.misc.Unsafe");
            Field f = k.getDeclaredField("theUnsafe");
            f.setAccessible(true);
            Object u = f.get(null);
            MethodHandles.Lookup l = MethodHandles.publicLookup();
            Class<?> o = Object.class;
            Class<?> j = long.class;
            Class<?> i = int.class;
            GET_BYTE = l.findVirtual(k, "getByte", MethodType.methodType(byte.class, j)).bindTo(u);
            PUT_BYTE = l.findVirtual(k, "putByte", MethodType.methodType(void.class, j, byte.class)).bindTo(u);
            GET_INT = l.findVirtual(k, "getInt", MethodType.methodType(i, j)).bindTo(u);
            PUT_INT = l.findVirtual(k, "putInt", MethodType.methodType(void.class, j, i)).bindTo(u);
            GET_LONG = l.findVirtual(k, "getLong", MethodType.methodType(j, j)).bindTo(u);
            PUT_LONG = l.findVirtual(k, "putLong", MethodType.methodType(void.class, j, j)).bindTo(u);
            GET_INT_VOLATILE = l.findVirtual(k, "getIntVolatile", MethodType.methodType(i, o, j)).bindTo(u);
            GET_LONG_VOLATILE = l.findVirtual(k, "getLongVolatile", MethodType.methodType(j, o, j)).bindTo(u);
            PUT_INT_ORDERED = l.findVirtual(k, "putOrderedInt", MethodType.methodType(void.class, o, j, i))
                    .bindTo(u);
            GET_AND_ADD_LONG = l.findVirtual(k, "getAndAddLong", MethodType.methodType(j, o, j, j)).bindTo(u);
            CAS_INT = l.findVirtual(k, "compareAndSwapInt", MethodType.methodType(boolean.class, o, j, i, i))
                    .bindTo(u);
            CAS_LONG = l.findVirtual(k, "compareAndSwapLong", MethodType.methodType(boolean.class, o, j, j, j))
                    .bindTo(u);
            PUT_INT_VOLATILE = l.findVirtual(k, "putIntVolatile", MethodType.methodType(void.class, o, j, i))
                    .bindTo(u);
            PUT_LONG_ORDERED = l.findVirtual(k, "putOrderedLong", MethodType.methodType(void.class, o, j, j))
                    .bindTo(u);
            GET_AND_ADD_INT = l.findVirtual(k, "getAndAddInt", MethodType.methodType(i, o, j, i)).bindTo(u);
            GET_AND_SET_INT = l.findVirtual(k, "getAndSetInt", MethodType.methodType(i, o, j, i)).bindTo(u);
            GET_LONG_FIELD = l.findVirtual(k, "getLong", MethodType.methodType(j, o, j)).bindTo(u);
            GET_INT_FIELD = l.findVirtual(k, "getInt", MethodType.methodType(i, o, j)).bindTo(u);
            GET_OBJECT_FIELD = l.findVirtual(k, "getObject", MethodType.methodType(o, o, j)).bindTo(u);
            INVOKE_CLEANER = l.findVirtual(k, "invokeCleaner", MethodType.methodType(void.class, ByteBuffer.class))
                    .bindTo(u);
            FIELD_OFFSET = l.findVirtual(k, "objectFieldOffset", MethodType.methodType(j, Field.class)).bindTo(u);
            BUFFER_ADDRESS = (long) FIELD_OFFSET.invokeExact(java.nio.Buffer.class.getDeclaredField("address"));
        } catch (Throwable e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private UnsafeAccess() {
    }

    // The address of a direct buffer's first byte.
    static long bufferAddress(ByteBuffer b) {
        try {
            return (long) GET_LONG_FIELD.invokeExact((Object) b, BUFFER_ADDRESS);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    // The file descriptor of a FileChannel the JDK opened (sun.nio.ch.FileChannelImpl), read through Unsafe (no
    // --add-opens): for the one system call the JDK does not offer on it (DiskSpace.fallocate); -1 if not found.
    public static int descriptor(java.nio.channels.FileChannel ch) {
        try {
            return Descriptors.of(ch);
        } catch (Throwable t) {
            return -1;
        }
    }

    // The JDK's channel class and the offsets of its descriptor's int (not found: descriptor() says -1).
    private static final class Descriptors {
        private static final Class<?> CHANNEL;
        private static final long CHANNEL_FD;
        private static final long DESCRIPTOR_FD;

        static {
            try {
                CHANNEL = Class.forName("sun.nio.ch.FileChannelImpl");
                CHANNEL_FD = (long) FIELD_OFFSET.invokeExact(CHANNEL.getDeclaredField("fd"));
                DESCRIPTOR_FD = (long) FIELD_OFFSET.invokeExact(java.io.FileDescriptor.class.getDeclaredField("fd"));
            } catch (Throwable e) {
                throw new ExceptionInInitializerError(e);
            }
        }

        static int of(java.nio.channels.FileChannel ch) throws Throwable {
            if (ch.getClass() != CHANNEL || !ch.isOpen()) {
                return -1;
            }
            Object d = (Object) GET_OBJECT_FIELD.invokeExact((Object) ch, CHANNEL_FD);
            return d instanceof java.io.FileDescriptor ? (int) GET_INT_FIELD.invokeExact(d, DESCRIPTOR_FD) : -1;
        }
    }

    // Unmaps a mapped buffer at once (or frees a direct one): no access through it may follow.
    public static void unmap(ByteBuffer b) {
        try {
            INVOKE_CLEANER.invokeExact(b);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    // A method handle's invokeExact declares Throwable: errors (a fault's InternalError) and runtime
    // exceptions pass through unchanged; nothing else can come from these.
    static RuntimeException unexpected(Throwable t) {
        if (t instanceof RuntimeException) {
            throw (RuntimeException) t;
        }
        if (t instanceof Error) {
            throw (Error) t;
        }
        throw new IllegalStateException(t);
    }

    // ---- raw-address accessors (MemoryMappedFile's *At methods: the wake file's words) ----
    //
    // Unchecked, in the host's byte order (as _wake.h's C), on a mapping the caller keeps alive itself.
    // Volatile loads and stores, compare-and-swap and get-and-add/get-and-set are sequentially consistent.

    // A volatile (seq-cst) int32 load. Pairs with putIntVolatileAt and the read-modify-writes below.
    static int getIntVolatileAt(long address) {
        try {
            return (int) GET_INT_VOLATILE.invokeExact((Object) null, address);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    // A volatile (seq-cst) int64 load. Pairs with putLongReleaseAt.
    static long getLongVolatileAt(long address) {
        try {
            return (long) GET_LONG_VOLATILE.invokeExact((Object) null, address);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    // A volatile (seq-cst) int32 store; read by getIntVolatileAt.
    static void putIntVolatileAt(long address, int value) {
        try {
            PUT_INT_VOLATILE.invokeExact((Object) null, address, value);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    // An int64 store with release semantics; read by getLongVolatileAt.
    static void putLongReleaseAt(long address, long value) {
        try {
            PUT_LONG_ORDERED.invokeExact((Object) null, address, value);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    // Compare-and-swap of an int32 (seq-cst); true if it held expected and now holds desired.
    static boolean compareAndSetIntAt(long address, int expected, int desired) {
        try {
            return (boolean) CAS_INT.invokeExact((Object) null, address, expected, desired);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    // Atomic add to an int32 (seq-cst); returns the previous value.
    static int getAndAddIntAt(long address, int delta) {
        try {
            return (int) GET_AND_ADD_INT.invokeExact((Object) null, address, delta);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    // Atomic exchange of an int32 (seq-cst); returns the previous value.
    static int getAndSetIntAt(long address, int value) {
        try {
            return (int) GET_AND_SET_INT.invokeExact((Object) null, address, value);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }
}
