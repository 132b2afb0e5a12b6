package io.mappedbuspy.internal;

import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.lang.ref.Reference;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.ReadOnlyBufferException;
import java.nio.channels.FileChannel;
import java.util.Objects;

/**
 * A file's mapping as windows, with bounds checks and the plain (unordered) accessors, at any alignment.
 *
 * <p>A {@code FileChannel} maps at most 2 GiB at a time, so a mapping larger than {@link #WINDOW_SIZE} is split into
 * windows starting every {@code WINDOW_SIZE} bytes, each extending {@link #WINDOW_OVERLAP} bytes into the next: every
 * primitive access (at most 8 bytes wide) lies wholly inside the window {@code pos / WINDOW_SIZE}; byte-range copies
 * are split at window boundaries, so there is no limit on the record size. Aligned atomics never cross a window start
 * (windows start at multiples of 2^30). (A window is a piece of one mapping; a rolling bus's segment is a whole file.)
 *
 * <p>Every access is checked against {@code [0, size())}: a bad position throws {@link IndexOutOfBoundsException}
 * (or {@link IllegalStateException} once closed) instead of faulting, and keeps the windows' buffers reachable while
 * it runs ({@link Reference#reachabilityFence}), so it never touches memory outside a live mapping.
 * <p>Internal: not a supported API. Public so that its public accessors are called on it directly, never through
 * the bridge methods javac adds to a public subclass of a package-private class (an extra frame in the path of a
 * write, where a mapping fault's late report must surface: tests/jvm/test_java_safety.py).
 */
public abstract class MappedWindows {
    /** Distance between window starts: 1 GiB. */
    public static final long WINDOW_SIZE = 1L << 30;
    /** How far each window extends past the next window's start (must be at least 8). */
    public static final int WINDOW_OVERLAP = 4096;

    static final int WINDOW_SHIFT = 30;
    static final long WINDOW_MASK = WINDOW_SIZE - 1;
    static final VarHandle INT = MethodHandles.byteBufferViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
    static final VarHandle LONG = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    // The format is little-endian: on a big-endian host the accessors swap bytes.
    static final boolean SWAP = ByteOrder.nativeOrder() != ByteOrder.LITTLE_ENDIAN;

    public final String path;
    final boolean readOnly;
    // The address of each window's first byte (firstAddress: window 0), 0 when not mapped.
    long firstAddress;
    long[] addresses;
    boolean single;
    // Mapped bytes; set to 0 on close so every later access fails its bounds check.
    long size;
    // Window 0, the only one for files up to WINDOW_SIZE (the fast path).
    ByteBuffer first;
    ByteBuffer[] windows;
    boolean closed;

    MappedWindows(String path, boolean readOnly) {
        this.path = Objects.requireNonNull(path, "path");
        this.readOnly = readOnly;
    }

    // Maps [0, mapLen) of the file as windows (read-only when this is).
    final void mapWindows(FileChannel ch, long mapLen) throws IOException {
        FileChannel.MapMode mode = readOnly ? FileChannel.MapMode.READ_ONLY : FileChannel.MapMode.READ_WRITE;
        int n = (int) Math.max(1, (mapLen + WINDOW_MASK) >>> WINDOW_SHIFT);
        ByteBuffer[] wins = new ByteBuffer[n];
        for (int i = 0; i < n; i++) {
            long start = (long) i << WINDOW_SHIFT;
            long len = Math.max(0, Math.min(WINDOW_SIZE + WINDOW_OVERLAP, mapLen - start));
            wins[i] = ch.map(mode, start, len).order(ByteOrder.LITTLE_ENDIAN);
        }
        attach(wins, mapLen);
    }

    // Takes `wins` (each a direct buffer) as the windows of a mapping of `mapLen` bytes.
    final void attach(ByteBuffer[] wins, long mapLen) {
        long[] addrs = new long[wins.length];
        for (int i = 0; i < wins.length; i++) {
            addrs[i] = UnsafeAccess.bufferAddress(wins[i]);
        }
        this.windows = wins;
        this.first = wins[0];
        this.addresses = addrs;
        this.firstAddress = addrs[0];
        this.single = wins.length == 1;
        this.size = mapLen;
    }

    // Forgets the windows (the collector unmaps them): every later access fails its bounds check.
    final void dropWindows() {
        size = 0;
        first = null;
        windows = null;
    }

    /**
     * The number of mapped bytes (0 after {@code close()}).
     *
     * @return mapped size in bytes
     */
    public long size() {
        return size;
    }

    /**
     * Whether the file was opened read-only.
     *
     * @return true for a read-only mapping
     */
    public boolean isReadOnly() {
        return readOnly;
    }

    /**
     * The file path.
     *
     * @return the path given to the constructor
     */
    public String path() {
        return path;
    }

    /**
     * Whether {@code close()} was called.
     *
     * @return true once closed
     */
    public boolean isClosed() {
        return closed;
    }

    // ---- bounds and window lookup ----

    final ByteBuffer win(long pos, int width) {
        if (pos < 0 || pos > size - width) {
            throw outOfBounds(pos, width);
        }
        return single ? first : windows[(int) (pos >>> WINDOW_SHIFT)];
    }

    // The buffers of a live mapping, read once per access and kept reachable until it is done.
    final ByteBuffer[] live(long pos, int width) {
        ByteBuffer[] keep = windows;
        if (keep == null) {
            throw outOfBounds(pos, width);
        }
        return keep;
    }

    // live() for a store: a read-only mapping refuses it (as its ByteBuffer would) instead of faulting.
    final ByteBuffer[] writable(long pos, int width) {
        ByteBuffer[] keep = live(pos, width);
        if (readOnly) {
            throw new ReadOnlyBufferException();
        }
        return keep;
    }

    // Atomics need natural alignment (a split lock is slow on x86 and faults elsewhere); windows start
    // on page boundaries, so the position's alignment is the address's.
    final void aligned(long pos, int width) {
        if ((pos & (width - 1)) != 0) {
            if (windows == null || pos < 0 || pos > size - width) {
                throw outOfBounds(pos, width); // out of bounds (or closed) is the first error
            }
            throw new IllegalStateException("misaligned " + width + "-byte atomic access at position " + pos);
        }
    }

    // The address of [pos, pos + width) after its bounds check (the caller holds live()'s buffers).
    final long at(long pos, int width) {
        if (pos < 0 || pos > size - width) {
            throw outOfBounds(pos, width);
        }
        return address(pos);
    }

    // The address of pos in its window (unchecked).
    final long address(long pos) {
        return single ? firstAddress + pos : addresses[(int) (pos >>> WINDOW_SHIFT)] + (pos & WINDOW_MASK);
    }

    static int idx(long pos) {
        return (int) (pos & WINDOW_MASK);
    }

    final RuntimeException outOfBounds(long pos, long width) {
        if (closed) {
            return new IllegalStateException("memory-mapped file " + path + " is closed");
        }
        return new IndexOutOfBoundsException("access of " + width + " bytes at position " + pos
                + " is outside the mapped region [0, " + size + ") of " + path);
    }

    private void checkRange(long pos, int length) {
        if (pos < 0 || pos > size - length) {
            throw outOfBounds(pos, length);
        }
    }

    // Bytes from pos up to the next window start, at most length.
    private static int chunk(long pos, int length) {
        return (int) Math.min(length, WINDOW_SIZE - idx(pos));
    }

    // ---- plain accessors, any alignment ----

    /**
     * Plain int32 read.
     *
     * @param pos position
     * @return the value
     */
    public int getInt(long pos) {
        ByteBuffer[] keep = live(pos, 4);
        try {
            int v = (int) UnsafeAccess.GET_INT.invokeExact(at(pos, 4));
            return SWAP ? Integer.reverseBytes(v) : v;
        } catch (Throwable t) {
            throw UnsafeAccess.unexpected(t);
        } finally {
            Reference.reachabilityFence(keep);
        }
    }

    /**
     * Plain int32 write.
     *
     * @param pos   position
     * @param value the value
     */
    public void putInt(long pos, int value) {
        ByteBuffer[] keep = writable(pos, 4);
        try {
            UnsafeAccess.PUT_INT.invokeExact(at(pos, 4), SWAP ? Integer.reverseBytes(value) : value);
        } catch (Throwable t) {
            throw UnsafeAccess.unexpected(t);
        } finally {
            Reference.reachabilityFence(keep);
        }
    }

    /**
     * Plain int64 read.
     *
     * @param pos position
     * @return the value
     */
    public long getLong(long pos) {
        ByteBuffer[] keep = live(pos, 8);
        try {
            long v = (long) UnsafeAccess.GET_LONG.invokeExact(at(pos, 8));
            return SWAP ? Long.reverseBytes(v) : v;
        } catch (Throwable t) {
            throw UnsafeAccess.unexpected(t);
        } finally {
            Reference.reachabilityFence(keep);
        }
    }

    /**
     * Plain int64 write.
     *
     * @param pos   position
     * @param value the value
     */
    public void putLong(long pos, long value) {
        ByteBuffer[] keep = writable(pos, 8);
        try {
            UnsafeAccess.PUT_LONG.invokeExact(at(pos, 8), SWAP ? Long.reverseBytes(value) : value);
        } catch (Throwable t) {
            throw UnsafeAccess.unexpected(t);
        } finally {
            Reference.reachabilityFence(keep);
        }
    }

    /**
     * Plain float64 read.
     *
     * @param pos position
     * @return the value
     */
    public double getDouble(long pos) {
        return Double.longBitsToDouble(getLong(pos));
    }

    /**
     * Plain float64 write.
     *
     * @param pos   position
     * @param value the value
     */
    public void putDouble(long pos, double value) {
        putLong(pos, Double.doubleToRawLongBits(value));
    }

    /**
     * Plain byte read.
     *
     * @param pos position
     * @return the value
     */
    public byte getByte(long pos) {
        ByteBuffer[] keep = live(pos, 1);
        try {
            byte v = (byte) UnsafeAccess.GET_BYTE.invokeExact(at(pos, 1));
            return v;
        } catch (Throwable t) {
            throw UnsafeAccess.unexpected(t);
        } finally {
            Reference.reachabilityFence(keep);
        }
    }

    /**
     * Plain byte write.
     *
     * @param pos   position
     * @param value the value
     */
    public void putByte(long pos, byte value) {
        ByteBuffer[] keep = writable(pos, 1);
        try {
            UnsafeAccess.PUT_BYTE.invokeExact(at(pos, 1), value);
        } catch (Throwable t) {
            throw UnsafeAccess.unexpected(t);
        } finally {
            Reference.reachabilityFence(keep);
        }
    }

    /**
     * Copies bytes out of the file.
     *
     * @param pos    position of the first byte
     * @param dst    destination array
     * @param offset index of the first destination byte
     * @param length number of bytes
     */
    public void getBytes(long pos, byte[] dst, int offset, int length) {
        Objects.checkFromIndexSize(offset, length, dst.length);
        checkRange(pos, length);
        while (length > 0) {
            int n = chunk(pos, length);
            windows[(int) (pos >>> WINDOW_SHIFT)].get(idx(pos), dst, offset, n);
            pos += n;
            offset += n;
            length -= n;
        }
    }

    /**
     * Copies bytes into the file.
     *
     * @param pos    position of the first byte
     * @param src    source array
     * @param offset index of the first source byte
     * @param length number of bytes
     */
    public void putBytes(long pos, byte[] src, int offset, int length) {
        Objects.checkFromIndexSize(offset, length, src.length);
        checkRange(pos, length);
        while (length > 0) {
            int n = chunk(pos, length);
            windows[(int) (pos >>> WINDOW_SHIFT)].put(idx(pos), src, offset, n);
            pos += n;
            offset += n;
            length -= n;
        }
    }

    /**
     * Copies bytes of the file into {@code dst} at its position, which moves past them: a framed message read into a
     * caller's buffer with no copy between (a direct buffer: one memory copy).
     *
     * @param pos    position of the first byte
     * @param dst    destination buffer
     * @param length number of bytes, at most {@code dst.remaining()}
     */
    public void getBytes(long pos, ByteBuffer dst, int length) {
        if (length < 0 || length > dst.remaining()) {
            throw new IllegalArgumentException("no room for " + length + " bytes in a buffer with " + dst.remaining()
                    + " remaining");
        }
        checkRange(pos, length);
        while (length > 0) {
            int n = chunk(pos, length);
            dst.put(dst.position(), windows[(int) (pos >>> WINDOW_SHIFT)], idx(pos), n);
            dst.position(dst.position() + n);
            pos += n;
            length -= n;
        }
    }

    /**
     * Copies the remaining bytes of {@code src} into the file; its position moves past them.
     *
     * @param pos position of the first byte
     * @param src source buffer
     */
    public void putBytes(long pos, ByteBuffer src) {
        int length = src.remaining();
        checkRange(pos, length);
        if (readOnly) {
            throw new ReadOnlyBufferException();
        }
        while (length > 0) {
            int n = chunk(pos, length);
            windows[(int) (pos >>> WINDOW_SHIFT)].put(idx(pos), src, src.position(), n);
            src.position(src.position() + n);
            pos += n;
            length -= n;
        }
    }
}
