package io.mappedbuspy.internal;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Where a bus file's pages come from: whether its directory is tmpfs, whether the device has room, and
 * preallocating the pages of a file as it grows (Java's stand-in for the Python side's {@code posix_fallocate}).
 * Used when a bus file is opened ({@link SafeOpen}) and when a rolling bus makes a segment ({@link RollingDir}).
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
 */
public final class DiskSpace {
    private static final int ZEROS_CHUNK = 1 << 20;
    private static final ConcurrentHashMap<String, Boolean> TMPFS_DIRS = new ConcurrentHashMap<>();

    private DiskSpace() {
    }

    // Grows the file from `from` to exactly `to` bytes (`from` is its length: nothing there is in use).
    // Java has no posix_fallocate, which the Python side preallocates a bus with. On tmpfs, where buses
    // live, writing zeros preallocates the pages the same way: a device filled later cannot make a store to
    // the mapping fault (SIGBUS, an InternalError in the JVM), and a writer maps pages that exist instead
    // of allocating and zeroing each inside a write, 16 to a fault (MappedBusWriter.populate). It costs
    // the open about 0.4 ms a MiB. Elsewhere (a disk) the zeros would go to the device: it grows sparse.
    // (posix_fallocate leaves tmpfs pages not up to date, and a load maps one of those a fault: preallocateSegment.)
    public static void preallocate(FileChannel ch, String path, long from, long to) throws IOException {
        if (to <= from) {
            return;
        }
        if (!onTmpfs(path)) {
            ch.write(ByteBuffer.allocate(1), to - 1);
            return;
        }
        ByteBuffer zeros = ByteBuffer.allocateDirect((int) Math.min(ZEROS_CHUNK, to - from));
        for (long pos = from; pos < to;) {
            zeros.clear().limit((int) Math.min(zeros.capacity(), to - pos));
            pos += ch.write(zeros, pos);
        }
    }

    /**
     * Grows a side file that several processes open and grow without a lock (the writers and topics files) to
     * {@code to} bytes without writing over a byte: posix_fallocate through the JNI library (blocks allocated, so a
     * full tmpfs is an error here, not a fault later), else ftruncate (through {@code /proc/self/fd}: the same file).
     * {@link #preallocate}'s zeros would wipe what a racing opener wrote after growing the file first (its
     * initialisation, a topic it named, a writer's claim): only an opener that holds the open lock may write them.
     *
     * @param ch   the file, opened for writing
     * @param path its path, for messages
     * @param to   the size it must have at least
     * @throws IOException if it cannot be grown (no space)
     */
    public static void growShared(FileChannel ch, String path, long to) throws IOException {
        int err = fallocate(ch, 0, to);
        if (err == 0) {
            return;
        }
        if (err == ENOSPC) {
            throw new IOException("no space to grow " + path + " to " + to + " bytes (the device is full or too small)");
        }
        int fd = UnsafeAccess.descriptor(ch);
        if (err > 0 && err != EINVAL && err != ENOSYS && err != EOPNOTSUPP || fd < 0) {
            throw new IOException("cannot grow " + path + " to " + to + " bytes"
                    + (err > 0 ? ": posix_fallocate failed with error " + err : ": no descriptor to ftruncate"));
        }
        try (java.io.RandomAccessFile same = new java.io.RandomAccessFile("/proc/self/fd/" + fd, "rw")) {
            if (same.length() < to) {
                same.setLength(to); // ftruncate: zeros past the end only, never over a byte already there
            }
        }
    }

    // A rolling segment's file (RollingDir.makeTemporary), preallocated with posix_fallocate through the JNI library
    // where it can (64 MiB on tmpfs: 20 ms of CPU against 40 for zeros), else as preallocate does. tmpfs leaves
    // fallocated pages not up to date, so a load maps one of them a fault, not 16 (preallocate writes zeros for the
    // loads of a single file's writers): fine here, where the maker's helper maps every page of the segment
    // (populate) right after making it, which brings them up to date for every other process.
    static void preallocateSegment(FileChannel ch, String path, long size) throws IOException {
        int err = fallocate(ch, 0, size);
        if (err == 0) {
            return;
        }
        if (err == ENOSPC) {
            throw new IOException("no space to preallocate " + size + " bytes for " + path
                    + " (the device is full or too small)");
        }
        if (err > 0 && err != EINVAL && err != ENOSYS && err != EOPNOTSUPP) {
            throw new IOException("cannot preallocate " + size + " bytes for " + path + ": posix_fallocate failed "
                    + "with error " + err);
        }
        preallocate(ch, path, 0, size); // no library, or not supported here
    }

    // Linux's error numbers: no room; not supported by this file system (then as without the library).
    private static final int ENOSPC = 28;
    private static final int EINVAL = 22;
    private static final int ENOSYS = 38;
    private static final int EOPNOTSUPP = 95;

    // posix_fallocate of the channel's file through the JNI library (WakeLibrary, loaded here if not yet): 0, an
    // error number, or -1 without the library or the channel's descriptor (UnsafeAccess.descriptor).
    public static int fallocate(FileChannel ch, long from, long len) {
        if (!WakeLibrary.LOADED) {
            return -1;
        }
        int fd = UnsafeAccess.descriptor(ch);
        return fd < 0 ? -1 : nFallocate(fd, from, len);
    }

    static native int nFallocate(int fd, long from, long len);

    // Maps bytes [from, to) of a writer's mapping with madvise through the JNI library, one call per window: true if
    // done. MADV_POPULATE_WRITE (`write`) where the pages may not be up to date yet (the segment's maker, right after
    // fallocate: it zeroes them; 64 MiB on tmpfs, 20 ms against 40 for loads); MADV_POPULATE_READ where they are
    // (a segment another process made and mapped): the kernel's fault-around maps 16 pages a fault, writable (a
    // shared tmpfs mapping tracks no dirty pages), 7 ms for 64 MiB against 13 for POPULATE_WRITE (the AMD EPYC of
    // perf/). False without the library, on an old kernel or a truncated file: the caller loads.
    public static boolean populate(MemoryMappedFile m, long from, long to, boolean write) {
        if (!WakeLibrary.LOADED || populateUnsupported) {
            return false;
        }
        for (long p = from; p < to;) {
            long end = Math.min(to, (p / MappedWindows.WINDOW_SIZE + 1) * MappedWindows.WINDOW_SIZE);
            int err = nPopulate(m.address(p), end - p, write);
            if (err != 0) {
                if (err == EINVAL) {
                    populateUnsupported = true;
                }
                return false;
            }
            p = end;
        }
        return true;
    }

    private static volatile boolean populateUnsupported;

    static native int nPopulate(long address, long len, boolean write);

    // Whether path's directory is on tmpfs. Asked at every open (a rolling writer opens a segment at every
    // roll), and the JDK reads the mount table for it (100-200 us): kept per directory.
    public static boolean onTmpfs(String path) {
        Path dir = Paths.get(path).toAbsolutePath().getParent(); // a file's: never null
        Boolean known = TMPFS_DIRS.get(dir.toString());
        if (known != null) {
            return known;
        }
        boolean tmpfs;
        try {
            tmpfs = "tmpfs".equals(Files.getFileStore(dir).type());
        } catch (IOException e) {
            return false;
        }
        if (TMPFS_DIRS.size() < 1024) {
            TMPFS_DIRS.put(dir.toString(), tmpfs);
        }
        return tmpfs;
    }

    // Where the file grows sparse (not tmpfs) a store to a page the device has no room for would fault
    // (SIGBUS, an InternalError in the JVM) long after open. Refusing to grow past the free space turns
    // the common case, a full disk, into an IOException here (also before a rolling segment is made).
    static void checkSpace(String path, long grow) throws IOException {
        long free;
        try {
            free = Files.getFileStore(Paths.get(path)).getUsableSpace();
        } catch (IOException e) {
            return; // unknown: let the write decide
        }
        if (free < grow) {
            throw new IOException("no space to grow " + path + " by " + grow + " bytes: " + free
                    + " bytes free on its device (the device is full or too small)");
        }
    }
}
