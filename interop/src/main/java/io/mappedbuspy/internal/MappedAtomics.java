package io.mappedbuspy.internal;

import java.lang.ref.Reference;
import java.nio.ByteBuffer;
import io.mappedbuspy.Layout;

/**
 * The atomic accessors of a mapping, each named by its memory order and paired with the accessor that reads (or
 * writes) the other side, as Agrona's {@code AtomicBuffer} names them; the records' status field at any alignment;
 * and a writer's unchecked stores into a record it allocated. Aligned positions only, except for statuses.
 * <p>Internal: not a supported API. Public so that its public accessors are called on it directly, never through
 * the bridge methods javac adds to a public subclass of a package-private class (an extra frame in the path of a
 * write, where a mapping fault's late report must surface: tests/jvm/test_java_safety.py).
 */
public abstract class MappedAtomics extends MappedWindows {
    MappedAtomics(String path, boolean readOnly) {
        super(path, readOnly);
    }

    /**
     * Reads an int64 with acquire semantics; pairs with {@link #getAndAddLong} and
     * {@link #compareAndSetLong}.
     *
     * @param pos 8-byte aligned position
     * @return the value
     */
    public long getLongAcquire(long pos) {
        aligned(pos, 8);
        ByteBuffer[] keep = live(pos, 8);
        try {
            long v = (long) UnsafeAccess.GET_LONG_VOLATILE.invokeExact((Object) null, at(pos, 8));
            return SWAP ? Long.reverseBytes(v) : v;
        } catch (Throwable t) {
            throw UnsafeAccess.unexpected(t);
        } finally {
            Reference.reachabilityFence(keep);
        }
    }

    /**
     * Atomically adds to an int64 (volatile semantics).
     *
     * @param pos   8-byte aligned position
     * @param delta amount to add
     * @return the previous value
     */
    public long getAndAddLong(long pos, long delta) {
        if (SWAP) {
            return (long) LONG.getAndAdd(win(pos, 8), idx(pos), delta);
        }
        aligned(pos, 8);
        ByteBuffer[] keep = writable(pos, 8);
        try {
            long v = (long) UnsafeAccess.GET_AND_ADD_LONG.invokeExact((Object) null, at(pos, 8), delta);
            return v;
        } catch (Throwable t) {
            throw UnsafeAccess.unexpected(t);
        } finally {
            Reference.reachabilityFence(keep);
        }
    }

    /**
     * Atomically sets an int64 if it holds the expected value (volatile semantics).
     *
     * @param pos      8-byte aligned position
     * @param expected expected value
     * @param desired  new value
     * @return true if the swap happened
     */
    public boolean compareAndSetLong(long pos, long expected, long desired) {
        if (SWAP) {
            return LONG.compareAndSet(win(pos, 8), idx(pos), expected, desired);
        }
        aligned(pos, 8);
        ByteBuffer[] keep = writable(pos, 8);
        try {
            boolean v = (boolean) UnsafeAccess.CAS_LONG.invokeExact((Object) null, at(pos, 8), expected, desired);
            return v;
        } catch (Throwable t) {
            throw UnsafeAccess.unexpected(t);
        } finally {
            Reference.reachabilityFence(keep);
        }
    }

    /**
     * Reads an int32 with acquire semantics; pairs with {@link #setIntRelease} and
     * {@link #compareAndSetInt}.
     *
     * @param pos 4-byte aligned position
     * @return the value
     */
    public int getIntAcquire(long pos) {
        aligned(pos, 4);
        ByteBuffer[] keep = live(pos, 4);
        try {
            int v = (int) UnsafeAccess.GET_INT_VOLATILE.invokeExact((Object) null, at(pos, 4));
            return SWAP ? Integer.reverseBytes(v) : v;
        } catch (Throwable t) {
            throw UnsafeAccess.unexpected(t);
        } finally {
            Reference.reachabilityFence(keep);
        }
    }

    /**
     * Writes an int32 with release semantics; read it with {@link #getIntAcquire}.
     *
     * @param pos   4-byte aligned position
     * @param value the value
     */
    public void setIntRelease(long pos, int value) {
        aligned(pos, 4);
        ByteBuffer[] keep = writable(pos, 4);
        try {
            UnsafeAccess.PUT_INT_ORDERED.invokeExact((Object) null, at(pos, 4),
                    SWAP ? Integer.reverseBytes(value) : value);
        } catch (Throwable t) {
            throw UnsafeAccess.unexpected(t);
        } finally {
            Reference.reachabilityFence(keep);
        }
    }

    /**
     * Atomically sets an int32 if it holds the expected value (volatile semantics).
     *
     * @param pos      4-byte aligned position
     * @param expected expected value
     * @param desired  new value
     * @return true if the swap happened
     */
    public boolean compareAndSetInt(long pos, int expected, int desired) {
        if (SWAP) {
            return INT.compareAndSet(win(pos, 4), idx(pos), expected, desired);
        }
        aligned(pos, 4);
        ByteBuffer[] keep = writable(pos, 4);
        try {
            boolean v = (boolean) UnsafeAccess.CAS_INT.invokeExact((Object) null, at(pos, 4), expected, desired);
            return v;
        } catch (Throwable t) {
            throw UnsafeAccess.unexpected(t);
        } finally {
            Reference.reachabilityFence(keep);
        }
    }

    // ---- record status, any alignment ----

    /**
     * Reads a record's int32 status with acquire semantics, at any alignment. For a status that is not
     * 4-byte aligned, the low byte (the only one statuses 0/1/2 use) is read with an acquire load of the
     * aligned int32 holding it and the other three bytes are read plainly; any nonzero upper byte shows in
     * the result (a corrupt status).
     *
     * @param recordPos position of the record (its status field)
     * @return the status value
     */
    public int getStatus(long recordPos) {
        if ((recordPos & 3) == 0) {
            return getIntAcquire(recordPos);
        }
        win(recordPos, 4); // bounds check of the whole field
        long wordPos = recordPos & ~3L;
        int shift = (int) (recordPos & 3) << 3;
        int word = (int) INT.getAcquire(win(wordPos, 4), idx(wordPos));
        int low = (word >>> shift) & 0xFF;
        return (getInt(recordPos) & ~0xFF) | low;
    }

    /**
     * Atomically changes a record's int32 status from {@code expected} to {@code desired}, at any
     * alignment (volatile semantics). For a status that is not 4-byte aligned, both values must fit in
     * the low byte; the aligned int32 holding that byte is swapped with only that byte changed, retrying
     * while the neighbouring bytes change, and the swap fails if the status's upper bytes are not zero.
     *
     * @param recordPos position of the record (its status field)
     * @param expected  expected status
     * @param desired   new status
     * @return true if the swap happened
     */
    public boolean casStatus(long recordPos, int expected, int desired) {
        if ((recordPos & 3) == 0) {
            return compareAndSetInt(recordPos, expected, desired);
        }
        if (((expected | desired) & ~0xFF) != 0) {
            throw new IllegalArgumentException("a misaligned status CAS supports values 0..255, got "
                    + expected + " -> " + desired);
        }
        if ((getInt(recordPos) & ~0xFF) != 0) {
            return false; // the full int32 cannot equal expected
        }
        long wordPos = recordPos & ~3L;
        ByteBuffer buf = win(wordPos, 4);
        int i = idx(wordPos);
        int shift = (int) (recordPos & 3) << 3;
        int mask = 0xFF << shift;
        for (;;) {
            int word = (int) INT.getVolatile(buf, i);
            if (((word >>> shift) & 0xFF) != expected) {
                return false;
            }
            if (INT.compareAndSet(buf, i, word, (word & ~mask) | (desired << shift))) {
                return true;
            }
            // A neighbouring byte (payload or header of an adjacent record) changed: retry.
        }
    }

    // ---- a writer's own record ----

    // A writer's own stores into a record it allocated, whose bounds it checked once (offset + slot <=
    // fileSize <= size): no check per access, so that MappedBusWriter.write stays small enough for the
    // JIT to inline it into the caller's loop. Still only through a live mapping.
    public void putIntInRecord(long pos, int value) {
        ByteBuffer[] keep = windows;
        if (keep == null | SWAP) {
            putInt(pos, value);
            return;
        }
        try {
            UnsafeAccess.PUT_INT.invokeExact(address(pos), value);
        } catch (Throwable t) {
            throw UnsafeAccess.unexpected(t);
        }
        Reference.reachabilityFence(keep);
    }

    // casStatus(recordPos, 0, 1) for the record a writer allocated (see putIntInRecord).
    public boolean commitInRecord(long recordPos) {
        ByteBuffer[] keep = windows;
        if (keep == null | SWAP | (recordPos & 3) != 0) {
            return casStatus(recordPos, Layout.STATUS_NOT_SET, Layout.STATUS_COMMITTED);
        }
        boolean v;
        try {
            v = (boolean) UnsafeAccess.CAS_INT.invokeExact((Object) null, address(recordPos), Layout.STATUS_NOT_SET,
                    Layout.STATUS_COMMITTED);
        } catch (Throwable t) {
            throw UnsafeAccess.unexpected(t);
        }
        Reference.reachabilityFence(keep);
        return v;
    }
}
