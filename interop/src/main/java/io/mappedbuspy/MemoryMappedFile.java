package io.mappedbuspy;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Paths;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Objects;

/**
 * A bus file mapped into memory, with bounds-checked plain and atomic little-endian accessors.
 *
 * <p>Only public JDK API is used: {@link FileChannel#map} and byte-buffer view {@link VarHandle}s. A
 * mapping larger than {@link #SEGMENT_SIZE} is split into segments starting every {@code SEGMENT_SIZE}
 * bytes, each extending {@link #SEGMENT_OVERLAP} bytes into the next, so every primitive access (at most
 * 8 bytes wide) lies wholly inside the segment {@code pos / SEGMENT_SIZE}; byte-range copies are split at
 * segment boundaries, so there is no limit on the record size. Aligned atomics never cross a segment
 * start (segments start at multiples of 2^30).
 *
 * <p>Every access is checked against {@code [0, size())}: a bad position throws
 * {@link IndexOutOfBoundsException} (or {@link IllegalStateException} once closed) instead of faulting.
 * The file is grown to the mapping size if it is shorter, never shrunk. The mapping is released by the
 * garbage collector after {@link #close()} (public API has no explicit unmap), so a stale reference can
 * never touch unmapped memory.
 */
public final class MemoryMappedFile implements AutoCloseable {
    /** Distance between segment starts: 1 GiB. */
    public static final long SEGMENT_SIZE = 1L << 30;
    /** How far each segment extends past the next segment's start (must be at least 8). */
    public static final int SEGMENT_OVERLAP = 4096;

    private static final int SEGMENT_SHIFT = 30;
    private static final long SEGMENT_MASK = SEGMENT_SIZE - 1;
    private static final VarHandle INT =
            MethodHandles.byteBufferViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle LONG =
            MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);

    private final String path;
    private final boolean readOnly;
    private final boolean single;
    // Mapped bytes; set to 0 on close so every later access fails its bounds check.
    private long size;
    // Segment 0, the only one for files up to SEGMENT_SIZE (the fast path).
    private ByteBuffer first;
    private ByteBuffer[] segments;
    private boolean closed;

    /** Serialises file growth among the threads of this JVM (see the constructor). */
    private static final Object GROW_LOCK = new Object();

    /**
     * Opens (creating if absent) and maps a bus file for reading and writing.
     *
     * @param path     file path
     * @param fileSize logical file size; the mapping is this rounded up to {@link Layout#PAGE_SIZE}
     * @throws IOException if the file cannot be opened, grown or mapped
     */
    public MemoryMappedFile(String path, long fileSize) throws IOException {
        this(path, fileSize, false);
    }

    /**
     * Opens and maps a bus file.
     *
     * @param path     file path
     * @param fileSize logical file size; the mapping is this rounded up to {@link Layout#PAGE_SIZE}
     * @param readOnly open with mode "r" and map read-only (the file must exist; it is never grown, and
     *                 only the part that exists is mapped)
     * @throws IOException if the file cannot be opened, grown or mapped
     */
    public MemoryMappedFile(String path, long fileSize, boolean readOnly) throws IOException {
        if (fileSize <= 0) {
            throw new IllegalArgumentException("fileSize must be > 0, got " + fileSize);
        }
        this.path = Objects.requireNonNull(path, "path");
        this.readOnly = readOnly;
        long want = Layout.mappedSize(fileSize);
        if (!readOnly) {
            createPrivate(path);
        }
        try (RandomAccessFile raf = new RandomAccessFile(path, readOnly ? "r" : "rw");
             FileChannel ch = raf.getChannel()) {
            long mapLen = want;
            if (readOnly) {
                mapLen = Math.min(want, ch.size());
            } else if (ch.size() < want) {
                // The file lock keeps two processes growing at once from shrinking each other's
                // length; a file lock is held per JVM, not per thread, so threads of one JVM (two
                // Spark tasks, say) take turns on a monitor first instead of failing with
                // OverlappingFileLockException.
                synchronized (GROW_LOCK) {
                    FileLock lock = ch.lock();
                    try {
                        long grow = want - ch.size();
                        if (grow > 0) {
                            checkSpace(path, grow);
                            try {
                                raf.setLength(want);
                            } catch (IOException e) {
                                throw new IOException("cannot grow " + path + " to " + want + " bytes: "
                                        + e.getMessage(), e);
                            }
                        }
                    } finally {
                        lock.release();
                    }
                }
            }
            FileChannel.MapMode mode = readOnly ? FileChannel.MapMode.READ_ONLY : FileChannel.MapMode.READ_WRITE;
            int n = (int) Math.max(1, (mapLen + SEGMENT_MASK) >>> SEGMENT_SHIFT);
            ByteBuffer[] segs = new ByteBuffer[n];
            for (int i = 0; i < n; i++) {
                long start = (long) i << SEGMENT_SHIFT;
                long len = Math.min(SEGMENT_SIZE + SEGMENT_OVERLAP, mapLen - start);
                segs[i] = ch.map(mode, start, len).order(ByteOrder.LITTLE_ENDIAN);
            }
            this.segments = segs;
            this.first = segs[0];
            this.single = n == 1;
            this.size = mapLen;
        }
    }

    // A new bus file is private to its owner (rw-------), as the Python side creates it.
    private static void createPrivate(String path) throws IOException {
        try {
            Files.createFile(Paths.get(path),
                    PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        } catch (FileAlreadyExistsException | UnsupportedOperationException e) {
            // exists already, or a file system without POSIX permissions: RandomAccessFile creates it
        } catch (NoSuchFileException e) {
            throw new FileNotFoundException(path + " (No such file or directory)");
        } catch (AccessDeniedException e) {
            throw new FileNotFoundException(path + " (Permission denied)");
        }
    }

    // The file grows sparse (Java has no posix_fallocate): a store to a page the device has no room for
    // would fault (SIGBUS, an InternalError in the JVM) long after open. Refusing to grow past the free
    // space turns the common case, a full tmpfs or disk, into an IOException here.
    private static void checkSpace(String path, long grow) throws IOException {
        long free;
        try {
            free = Files.getFileStore(Paths.get(path)).getUsableSpace();
        } catch (IOException e) {
            return; // unknown: let setLength decide
        }
        if (free < grow) {
            throw new IOException("no space to grow " + path + " by " + grow + " bytes: " + free
                    + " bytes free on its device (the device is full or too small)");
        }
    }

    /**
     * The number of mapped bytes (0 after {@link #close()}).
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
     * Whether {@link #close()} was called.
     *
     * @return true once closed
     */
    public boolean isClosed() {
        return closed;
    }

    /** Drops the mapping; every later access throws {@link IllegalStateException}. */
    @Override
    public void close() {
        closed = true;
        size = 0;
        first = null;
        segments = null;
    }

    // ---- bounds and segment lookup ----

    private ByteBuffer seg(long pos, int width) {
        if (pos < 0 || pos > size - width) {
            throw outOfBounds(pos, width);
        }
        return single ? first : segments[(int) (pos >>> SEGMENT_SHIFT)];
    }

    private static int idx(long pos) {
        return (int) (pos & SEGMENT_MASK);
    }

    private RuntimeException outOfBounds(long pos, long width) {
        if (closed) {
            return new IllegalStateException("memory-mapped file " + path + " is closed");
        }
        return new IndexOutOfBoundsException("access of " + width + " bytes at position " + pos
                + " is outside the mapped region [0, " + size + ") of " + path);
    }

    // ---- atomic accessors (aligned positions only) ----

    /**
     * Reads an int64 with acquire semantics; pairs with {@link #getAndAddLong} and
     * {@link #compareAndSetLong}.
     *
     * @param pos 8-byte aligned position
     * @return the value
     */
    public long getLongAcquire(long pos) {
        return (long) LONG.getAcquire(seg(pos, 8), idx(pos));
    }

    /**
     * Atomically adds to an int64 (volatile semantics).
     *
     * @param pos   8-byte aligned position
     * @param delta amount to add
     * @return the previous value
     */
    public long getAndAddLong(long pos, long delta) {
        return (long) LONG.getAndAdd(seg(pos, 8), idx(pos), delta);
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
        return LONG.compareAndSet(seg(pos, 8), idx(pos), expected, desired);
    }

    /**
     * Reads an int32 with acquire semantics; pairs with {@link #setIntRelease} and
     * {@link #compareAndSetInt}.
     *
     * @param pos 4-byte aligned position
     * @return the value
     */
    public int getIntAcquire(long pos) {
        return (int) INT.getAcquire(seg(pos, 4), idx(pos));
    }

    /**
     * Writes an int32 with release semantics; read it with {@link #getIntAcquire}.
     *
     * @param pos   4-byte aligned position
     * @param value the value
     */
    public void setIntRelease(long pos, int value) {
        INT.setRelease(seg(pos, 4), idx(pos), value);
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
        return INT.compareAndSet(seg(pos, 4), idx(pos), expected, desired);
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
        seg(recordPos, 4); // bounds check of the whole field
        long wordPos = recordPos & ~3L;
        int shift = (int) (recordPos & 3) << 3;
        int word = (int) INT.getAcquire(seg(wordPos, 4), idx(wordPos));
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
        ByteBuffer buf = seg(wordPos, 4);
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

    // ---- plain accessors, any alignment ----

    /**
     * Plain int32 read.
     *
     * @param pos position
     * @return the value
     */
    public int getInt(long pos) {
        return seg(pos, 4).getInt(idx(pos));
    }

    /**
     * Plain int32 write.
     *
     * @param pos   position
     * @param value the value
     */
    public void putInt(long pos, int value) {
        seg(pos, 4).putInt(idx(pos), value);
    }

    /**
     * Plain int64 read.
     *
     * @param pos position
     * @return the value
     */
    public long getLong(long pos) {
        return seg(pos, 8).getLong(idx(pos));
    }

    /**
     * Plain int64 write.
     *
     * @param pos   position
     * @param value the value
     */
    public void putLong(long pos, long value) {
        seg(pos, 8).putLong(idx(pos), value);
    }

    /**
     * Plain float64 read.
     *
     * @param pos position
     * @return the value
     */
    public double getDouble(long pos) {
        return seg(pos, 8).getDouble(idx(pos));
    }

    /**
     * Plain float64 write.
     *
     * @param pos   position
     * @param value the value
     */
    public void putDouble(long pos, double value) {
        seg(pos, 8).putDouble(idx(pos), value);
    }

    /**
     * Plain byte read.
     *
     * @param pos position
     * @return the value
     */
    public byte getByte(long pos) {
        return seg(pos, 1).get(idx(pos));
    }

    /**
     * Plain byte write.
     *
     * @param pos   position
     * @param value the value
     */
    public void putByte(long pos, byte value) {
        seg(pos, 1).put(idx(pos), value);
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
            segments[(int) (pos >>> SEGMENT_SHIFT)].get(idx(pos), dst, offset, n);
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
            segments[(int) (pos >>> SEGMENT_SHIFT)].put(idx(pos), src, offset, n);
            pos += n;
            offset += n;
            length -= n;
        }
    }

    private void checkRange(long pos, int length) {
        if (pos < 0 || pos > size - length) {
            throw outOfBounds(pos, length);
        }
    }

    // Bytes from pos up to the next segment start, at most length.
    private static int chunk(long pos, int length) {
        return (int) Math.min(length, SEGMENT_SIZE - idx(pos));
    }

    @Override
    public String toString() {
        return "MemoryMappedFile[" + path + ", size=" + size + (readOnly ? ", read-only" : "")
                + (closed ? ", closed" : "") + "]";
    }
}
