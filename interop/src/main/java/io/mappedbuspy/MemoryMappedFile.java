package io.mappedbuspy;

import java.io.IOException;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.invoke.VarHandle;
import java.lang.ref.Reference;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.FileSystemException;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFileAttributeView;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.lang.reflect.Field;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

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
 * Files are opened as {@code docs/files-and-rolling.md} says: never through a symbolic link, nothing but
 * regular files (checked before opening, so a FIFO never blocks), owner and mode checked, created only by
 * writers (exclusively, rw-------), under a bounded open lock. A writer grows the file to the mapping size,
 * never shrinks it; a reader never creates or grows one. The mapping is released by the
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

    // The hot accessors go through sun.misc.Unsafe on the mapping's address, as the original does: a
    // ByteBuffer or VarHandle access adds its own index, read-only and alignment checks and a scope check
    // to the bounds check below (measured: the Java port at 0.48 x the original's throughput). Every
    // access is still checked against [0, size) first, and keeps the buffers reachable while it runs
    // (Reference.reachabilityFence), so it never touches memory outside a live mapping. A fault on a
    // truncated page raises the same InternalError as through a ByteBuffer (the same intrinsics).
    // (Reached through constant method handles, which the JIT inlines, so that no source names the
    // proprietary class.)
    private static final MethodHandle GET_BYTE;
    private static final MethodHandle PUT_BYTE;
    private static final MethodHandle GET_INT;
    private static final MethodHandle PUT_INT;
    private static final MethodHandle GET_LONG;
    private static final MethodHandle PUT_LONG;
    private static final MethodHandle GET_INT_VOLATILE;
    private static final MethodHandle GET_LONG_VOLATILE;
    private static final MethodHandle PUT_INT_ORDERED;
    // Raw-address accessors of the wake file's words (WakeFile runs _wake.h's protocol through them).
    private static final MethodHandle PUT_INT_VOLATILE;
    private static final MethodHandle PUT_LONG_ORDERED;
    private static final MethodHandle GET_AND_ADD_INT;
    private static final MethodHandle GET_AND_SET_INT;
    private static final MethodHandle GET_AND_ADD_LONG;
    private static final MethodHandle CAS_INT;
    private static final MethodHandle CAS_LONG;
    private static final MethodHandle GET_LONG_FIELD;
    private static final MethodHandle INVOKE_CLEANER;
    private static final long BUFFER_ADDRESS;
    // The format is little-endian: on a big-endian host the plain accessors swap bytes.
    private static final boolean SWAP = ByteOrder.nativeOrder() != ByteOrder.LITTLE_ENDIAN;

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
            INVOKE_CLEANER = l.findVirtual(k, "invokeCleaner", MethodType.methodType(void.class, ByteBuffer.class))
                    .bindTo(u);
            BUFFER_ADDRESS = (long) l.findVirtual(k, "objectFieldOffset", MethodType.methodType(j, Field.class))
                    .bindTo(u).invokeExact(java.nio.Buffer.class.getDeclaredField("address"));
        } catch (Throwable e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private static long bufferAddress(ByteBuffer b) {
        try {
            return (long) GET_LONG_FIELD.invokeExact((Object) b, BUFFER_ADDRESS);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    // A method handle's invokeExact declares Throwable: errors (a fault's InternalError) and runtime
    // exceptions pass through unchanged; nothing else can come from these.
    private static RuntimeException unexpected(Throwable t) {
        if (t instanceof RuntimeException) {
            throw (RuntimeException) t;
        }
        if (t instanceof Error) {
            throw (Error) t;
        }
        throw new IllegalStateException(t);
    }

    // The address of each segment's first byte (firstAddress: segment 0), 0 when not mapped.
    private long firstAddress;
    private long[] addresses;

    private final String path;
    private final boolean readOnly;
    private boolean single;
    // Mapped bytes; set to 0 on close so every later access fails its bounds check.
    private long size;
    // Segment 0, the only one for files up to SEGMENT_SIZE (the fast path).
    private ByteBuffer first;
    private ByteBuffer[] segments;
    private boolean closed;

    // An atomic read-modify-write that the interpreter runs (a method not yet compiled) goes through a
    // native Unsafe call that is not guarded against a fault: on a page past the end of a truncated file it
    // crashes the JVM (SIGBUS in Unsafe_CompareAndSetLong, JDK 17 and 21), where compiled code raises an
    // InternalError instead. So the atomic accessors are run on a private direct buffer when this class is
    // loaded, until the JIT has compiled them (with the guarded intrinsics) before any file is mapped.
    // The same for the raw-address read-modify-writes of the wake file (WakeFile).
    static {
        MemoryMappedFile w = new MemoryMappedFile(ByteBuffer.allocateDirect(Layout.PAGE_SIZE));
        long a = w.firstAddress;
        for (int i = 0; i < 30_000; i++) { // about 50 ms, once per JVM
            w.getAndAddLong(8, 1);
            w.compareAndSetLong(16, i, i + 1L);
            w.compareAndSetInt(24, i, i + 1);
            w.casStatus(33, 0, 0);
            w.casStatus(40, 0, 0);
            w.getLongAcquire(8);
            w.setIntRelease(48, i);
            compareAndSetIntAt(a + 56, i, i + 1);
            getAndAddIntAt(a + 60, 1);
            getAndSetIntAt(a + 64, i);
            putIntVolatileAt(a + 68, i);
            putLongReleaseAt(a + 72, i);
            getLongVolatileAt(a + 72);
        }
        Reference.reachabilityFence(w);
    }

    // The warm-up instance.
    private MemoryMappedFile(ByteBuffer buf) {
        this.path = "<warm-up>";
        this.readOnly = false;
        this.first = buf.order(ByteOrder.LITTLE_ENDIAN);
        this.segments = new ByteBuffer[] {first};
        this.addresses = new long[] {bufferAddress(buf)};
        this.firstAddress = addresses[0];
        this.single = true;
        this.size = buf.capacity();
    }

    /** Serialises the open lock among the threads of this JVM (see {@link #lockFile}). */
    private static final Object OPEN_LOCK = new Object();
    /** Default bound on waiting for the open lock. */
    public static final long DEFAULT_LOCK_TIMEOUT_MS = 10_000;

    // Kept open for length checks (truncation); null once closed.
    private FileChannel channel;
    // st_ino and st_dev of the mapped file, taken at open.
    private long inode;
    private long device;
    private boolean created;

    /** How a file is opened; see {@link #open(String, long, OpenOptions)}. */
    static final class OpenOptions {
        /** Create the file if absent (writers only), exactly rw-------. */
        boolean create;
        /** Open and map read-only. */
        boolean readOnly;
        /** Grow a short file to the mapping (writers only). */
        boolean grow;
        /** Map only what exists of a short file (read-only scans) instead of refusing it. */
        boolean allowShort;
        /** Accept another owner, or group/other write permission. */
        boolean allowForeign;
        /** The permissions of a file this open creates (a wake file takes its bus's). */
        String perms = "rw-------";
        /** Take the open lock exclusive (writers) instead of shared. */
        boolean exclusive;
        long lockTimeoutMs = DEFAULT_LOCK_TIMEOUT_MS;
        /** Runs under the open lock before the file is grown or mapped: checks that write nothing. */
        Step beforeGrow;
        /** Runs under the open lock once mapped: initialisation. */
        Step afterMap;
    }

    /** A step of opening, run under the open lock. */
    interface Step {
        void run(MemoryMappedFile m) throws IOException;
    }

    /**
     * Opens (creating if absent) and maps a bus file for reading and writing, as a writer does: never
     * through a symbolic link, only a regular file owned by this user and not writable by group or others.
     *
     * @param path     file path
     * @param fileSize logical file size; the mapping is this rounded up to {@link Layout#PAGE_SIZE}
     * @throws IOException if the file cannot be opened, grown or mapped ({@link UnsafeBusFileException}
     *                     if it is not to be trusted)
     */
    public MemoryMappedFile(String path, long fileSize) throws IOException {
        this(path, fileSize, false);
    }

    /**
     * Opens and maps a bus file (safely, as {@link #MemoryMappedFile(String, long)}).
     *
     * @param path     file path
     * @param fileSize logical file size; the mapping is this rounded up to {@link Layout#PAGE_SIZE}
     * @param readOnly map read-only: the file must exist (else {@link NoSuchFileException}); it is never
     *                 grown, and only the part that exists is mapped. Otherwise it is created if absent
     *                 and grown to the mapping.
     * @throws IOException if the file cannot be opened, grown or mapped
     */
    public MemoryMappedFile(String path, long fileSize, boolean readOnly) throws IOException {
        this(path, fileSize, legacyOptions(readOnly));
    }

    private static OpenOptions legacyOptions(boolean readOnly) {
        OpenOptions o = new OpenOptions();
        o.readOnly = readOnly;
        o.create = !readOnly;
        o.grow = !readOnly;
        o.exclusive = !readOnly;
        o.allowShort = readOnly;
        return o;
    }

    static MemoryMappedFile open(String path, long fileSize, OpenOptions o) throws IOException {
        return new MemoryMappedFile(path, fileSize, o);
    }

    private MemoryMappedFile(String path, long fileSize, OpenOptions o) throws IOException {
        if (fileSize <= 0) {
            throw new IllegalArgumentException("fileSize must be > 0, got " + fileSize);
        }
        this.path = Objects.requireNonNull(path, "path");
        this.readOnly = o.readOnly;
        long want = Layout.mappedSize(fileSize);
        Path p = Paths.get(path);
        long emptyDeadline = 0;
        for (int attempt = 0; ; attempt++) {
            boolean made = false;
            FileChannel ch = null;
            try {
                long[] id = statTrusted(p, o.allowForeign); // refuses links, FIFOs, devices before opening
                if (id == null) {
                    if (!o.create) {
                        throw new NoSuchFileException(path, null, "no such bus file (readers never create one)");
                    }
                    ch = createExclusive(p, o.perms);
                    if (ch == null) {
                        continue; // another process created it first: open theirs
                    }
                    made = true;
                } else {
                    ch = openExisting(p, o.readOnly);
                }
                long[] opened = statTrusted(p, o.allowForeign);
                if (opened == null || (id != null && (opened[0] != id[0] || opened[1] != id[1]))) {
                    throw new Retry(); // replaced between the checks and the open
                }
                this.inode = opened[0];
                this.device = opened[1];
                FileLock lock = lockFile(ch, path, o, inode);
                try {
                    long[] now = statTrusted(p, o.allowForeign);
                    if (now == null || now[0] != inode || now[1] != device) {
                        throw new Retry(); // the creator removed a failed file meanwhile
                    }
                    mapLocked(ch, path, fileSize, want, o, made);
                } finally {
                    if (lock.isValid()) {
                        lock.release();
                    }
                }
                this.channel = ch;
                this.created = made;
                return;
            } catch (NotYet r) {
                // A writer created the file and has not sized it yet (it creates, then locks): not a bus
                // yet. Wait for it, bounded like the lock, as the Python reader does.
                close0(ch);
                long now = System.nanoTime();
                if (emptyDeadline == 0) {
                    emptyDeadline = now + o.lockTimeoutMs * 1_000_000L;
                }
                if (now - emptyDeadline >= 0) {
                    throw new NoSuchFileException(path, null, "an empty file, still not made a bus by any writer after "
                            + o.lockTimeoutMs + " ms (readers never create one)");
                }
                attempt--;
                try {
                    Thread.sleep(1);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new java.io.InterruptedIOException("interrupted while waiting for " + path + " to become a bus");
                }
            } catch (Retry r) {
                close0(ch);
                if (made) {
                    deleteIfSame(p, inode, device);
                }
                if (attempt >= 100) {
                    throw new IOException("cannot open " + path + ": it keeps being replaced while opening");
                }
            } catch (IOException | RuntimeException | Error e) {
                this.size = 0;
                this.first = null;
                this.segments = null;
                close0(ch);
                if (made) {
                    deleteIfSame(p, inode, device);
                    try {
                        Files.deleteIfExists(BusMeta.metaPath(path));
                    } catch (IOException ignored) {
                        // best effort: the metadata of a file that no longer exists is ignored anyway
                    }
                }
                throw e;
            }
        }
    }

    /** An empty file found by an open that may not grow it: a bus being created. */
    private static final class NotYet extends RuntimeException {
        private static final long serialVersionUID = 1L;

        NotYet() {
            super(null, null, false, false);
        }
    }

    /** Restart of an open whose path changed under it. */
    private static final class Retry extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Retry() {
            super(null, null, false, false);
        }
    }

    private void mapLocked(FileChannel ch, String path, long fileSize, long want, OpenOptions o, boolean made)
            throws IOException {
        if (o.beforeGrow != null) {
            o.beforeGrow.run(this);
        }
        long have = ch.size();
        long mapLen = want;
        if (have < want) {
            if (o.grow) {
                checkSpace(path, want - have);
                try {
                    reserve(ch, path, have, want);
                } catch (IOException e) {
                    throw new IOException("cannot grow " + path + " to " + want + " bytes: " + e.getMessage(), e);
                }
            } else if (have == 0) {
                throw new NotYet();
            } else if (o.allowShort) {
                mapLen = have;
            } else {
                throw new IOException(path + " is " + have + " bytes, shorter than the " + want
                        + " bytes fileSize=" + fileSize + " maps; a reader never grows a bus file "
                        + "(wrong fileSize, or no writer has opened the bus yet)");
            }
        }
        FileChannel.MapMode mode = o.readOnly ? FileChannel.MapMode.READ_ONLY : FileChannel.MapMode.READ_WRITE;
        int n = (int) Math.max(1, (mapLen + SEGMENT_MASK) >>> SEGMENT_SHIFT);
        ByteBuffer[] segs = new ByteBuffer[n];
        for (int i = 0; i < n; i++) {
            long start = (long) i << SEGMENT_SHIFT;
            long len = Math.max(0, Math.min(SEGMENT_SIZE + SEGMENT_OVERLAP, mapLen - start));
            segs[i] = ch.map(mode, start, len).order(ByteOrder.LITTLE_ENDIAN);
        }
        long[] addrs = new long[n];
        for (int i = 0; i < n; i++) {
            addrs[i] = bufferAddress(segs[i]);
        }
        this.segments = segs;
        this.first = segs[0];
        this.addresses = addrs;
        this.firstAddress = addrs[0];
        this.single = n == 1;
        this.size = mapLen;
        if (o.afterMap != null) {
            o.afterMap.run(this);
        }
    }

    // {st_ino, st_dev} of a trusted regular file at p (links are not followed), or null if there is none.
    private static long[] statTrusted(Path p, boolean allowForeign) throws IOException {
        Map<String, Object> a;
        try {
            a = Files.readAttributes(p, "unix:ino,dev", LinkOption.NOFOLLOW_LINKS);
        } catch (NoSuchFileException e) {
            return null;
        }
        try {
            BusFiles.checkTrusted(p, allowForeign);
        } catch (NoSuchFileException e) {
            return null;
        }
        return new long[] {(Long) a.get("ino"), (Long) a.get("dev")};
    }

    // A new file, exactly `mode` (rw-------) whatever the umask; null if it exists already.
    private static FileChannel createExclusive(Path p, String mode) throws IOException {
        Set<PosixFilePermission> perms = PosixFilePermissions.fromString(mode);
        FileChannel ch;
        try {
            ch = FileChannel.open(p, Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
                    StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS), PosixFilePermissions.asFileAttribute(perms));
        } catch (FileAlreadyExistsException e) {
            return null;
        } catch (NoSuchFileException e) {
            throw new NoSuchFileException(p.toString(), null, "cannot create the bus file: no such directory");
        } catch (AccessDeniedException e) {
            throw new AccessDeniedException(p.toString(), null, "cannot create the bus file: permission denied");
        }
        try {
            Files.getFileAttributeView(p, PosixFileAttributeView.class, LinkOption.NOFOLLOW_LINKS)
                    .setPermissions(perms);
        } catch (IOException | RuntimeException e) {
            close0(ch);
            throw e;
        }
        return ch;
    }

    private static FileChannel openExisting(Path p, boolean readOnly) throws IOException {
        try {
            return readOnly ? FileChannel.open(p, StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS)
                    : FileChannel.open(p, StandardOpenOption.READ, StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS);
        } catch (FileSystemException e) {
            if (e.getMessage() != null && e.getMessage().contains("Too many levels of symbolic links")) {
                throw new UnsafeBusFileException(p + " is a symbolic link: bus files are never opened through links");
            }
            throw e;
        }
    }

    // The POSIX record lock (what the Python side's fcntl takes), polled up to the lock timeout. A file
    // lock is held per JVM, not per thread, so threads of one JVM take turns on a monitor first instead
    // of failing with OverlappingFileLockException.
    private static FileLock lockFile(FileChannel ch, String path, OpenOptions o, long inode) throws IOException {
        long deadline = System.nanoTime() + o.lockTimeoutMs * 1_000_000L;
        long sleepMs = 1;
        synchronized (OPEN_LOCK) {
            for (;;) {
                FileLock lock;
                try {
                    lock = ch.tryLock(0, Long.MAX_VALUE, !o.exclusive);
                } catch (java.nio.channels.OverlappingFileLockException e) {
                    lock = null; // held by this JVM outside this monitor (a rolling bus's own lock): wait
                }
                if (lock != null) {
                    return lock;
                }
                if (System.nanoTime() - deadline >= 0) {
                    long pid = lockHolder(inode);
                    throw new BusLockTimeoutException("the open lock of " + path + " is held by "
                            + (pid > 0 ? "process " + pid : "another process") + " for more than " + o.lockTimeoutMs
                            + " ms (a process stopped while opening it? setLockTimeout changes the bound)", pid);
                }
                try {
                    Thread.sleep(sleepMs);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new java.io.InterruptedIOException("interrupted while waiting for the open lock of " + path);
                }
                sleepMs = Math.min(sleepMs * 2, 50);
            }
        }
    }

    /**
     * The pid of a process holding a POSIX lock on the file with this inode, from {@code /proc/locks}.
     *
     * @param inode st_ino of the file
     * @return the pid, or -1 if none is found
     */
    static long lockHolder(long inode) {
        try {
            for (String line : Files.readAllLines(Paths.get("/proc/locks"))) {
                String[] f = line.trim().split("\\s+");
                // "1: POSIX  ADVISORY  WRITE 1234 00:1a:5678 0 EOF"; waiters have a "->" field
                if (f.length < 6 || f[1].equals("->")) {
                    continue;
                }
                String[] id = f[5].split(":");
                if (id.length == 3 && id[2].equals(Long.toString(inode))) {
                    long pid = Long.parseLong(f[4]);
                    if (pid > 0) {
                        return pid;
                    }
                }
            }
        } catch (IOException | RuntimeException e) {
            return -1;
        }
        return -1;
    }

    private static void close0(FileChannel ch) {
        if (ch != null) {
            try {
                ch.close();
            } catch (IOException ignored) {
                // closing a channel we only read: nothing to lose
            }
        }
    }

    // Removes the file this open created, unless the path names another file by now.
    private static void deleteIfSame(Path p, long inode, long device) {
        try {
            Map<String, Object> a = Files.readAttributes(p, "unix:ino,dev", LinkOption.NOFOLLOW_LINKS);
            if ((Long) a.get("ino") == inode && (Long) a.get("dev") == device) {
                Files.deleteIfExists(p);
            }
        } catch (IOException ignored) {
            // gone already
        }
    }

    // Grows the file from `from` to exactly `to` bytes (`from` is its length: nothing there is in use).
    // Java has no posix_fallocate, which the Python side reserves a bus with. On tmpfs, where buses
    // live, writing zeros reserves the pages the same way: a device filled later cannot make a store to
    // the mapping fault (SIGBUS, an InternalError in the JVM), and a writer maps pages that exist instead
    // of allocating and zeroing each inside a write, 16 to a fault (MappedBusWriter.populate). It costs
    // the open about 0.4 ms a MiB. Elsewhere (a disk) the zeros would go to the device: it grows sparse.
    static void reserve(FileChannel ch, String path, long from, long to) throws IOException {
        if (to <= from) {
            return;
        }
        if (!onTmpfs(path)) {
            ch.write(ByteBuffer.allocate(1), to - 1);
            return;
        }
        ByteBuffer zeros = ByteBuffer.allocateDirect((int) Math.min(RESERVE_CHUNK, to - from));
        for (long pos = from; pos < to;) {
            zeros.clear().limit((int) Math.min(zeros.capacity(), to - pos));
            pos += ch.write(zeros, pos);
        }
    }

    private static final int RESERVE_CHUNK = 1 << 20;

    // Whether path's directory is on tmpfs. Asked at every open (a rolling writer opens a segment at every
    // roll), and the JDK reads the mount table for it (100-200 us): kept per directory.
    static boolean onTmpfs(String path) {
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

    private static final java.util.concurrent.ConcurrentHashMap<String, Boolean> TMPFS_DIRS =
            new java.util.concurrent.ConcurrentHashMap<>();

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

    // The address of byte 0 of a mapping of one segment (the wake file's, for its JNI calls), and the buffers that
    // keep it mapped: whoever uses the address holds them (close() leaves the unmapping to the collector).
    long baseAddress() {
        if (!single || segments == null) {
            throw new IllegalStateException("no single-segment mapping of " + path);
        }
        return firstAddress;
    }

    Object mapping() {
        return segments;
    }

    // The address of a direct buffer (WakeFile's page of zeros).
    static long addressOf(ByteBuffer b) {
        return bufferAddress(b);
    }

    // ---- raw-address accessors of the wake file (WakeFile) ----
    //
    // Unchecked, in the host's byte order (as _wake.h's C), on a mapping that WakeFile keeps alive itself: the
    // words of _wake.h's protocol, which WakeFile runs in Java so that no native code touches the mapping (a
    // fault there, on a page past the end of a file truncated under it, would be a SIGBUS ending the JVM). A
    // fault in these is the JVM's InternalError ("unsafe memory access"), which JDK 17 raises late: at the
    // thread's next entry into the VM, wherever that is. raiseFaultReports() makes that entry at once.
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

    // Raises here, as an InternalError, the report of a fault in an earlier Unsafe access of this thread that the
    // JVM still holds. JDK 17 turns such a fault (in compiled code, and in the interpreter's Unsafe calls) into a
    // pending report, raised at the thread's next entry into the VM from Java: not at a return from a native
    // method, nor at a safepoint poll unless one is pending, so perhaps far from the access, in a caller that
    // would take it for a fault of its own. A multi-dimensional array whose length the compiler cannot see is
    // made by a call into the VM in the interpreter, C1 and C2 alike: that call raises the report (40-100 ns).
    static void raiseFaultReports() {
        faultProbe = new int[faultProbeLength][0];
    }

    // Never changed (an empty array is the cheapest to make): not final, so no compiler takes the length for a
    // constant and makes the array inline, without a call into the VM.
    private static int faultProbeLength = 0;
    private static Object faultProbe;

    /** @return st_ino of the mapped file, taken at open */
    public long inode() {
        return inode;
    }

    /** @return st_dev of the mapped file, taken at open */
    public long device() {
        return device;
    }

    /** @return whether this open created the file */
    boolean created() {
        return created;
    }

    /**
     * Throws if the file shrank under the mapping (a later access would fault).
     *
     * @throws BusTruncatedException if the file is now shorter than the mapping
     */
    public void checkLength() {
        FileChannel ch = channel;
        if (ch == null) {
            return;
        }
        long len;
        try {
            len = ch.size();
        } catch (IOException e) {
            return;
        }
        if (len < size) {
            throw truncated(null);
        }
    }

    /**
     * The exception for a fault (or a length check) that found the file shorter than the mapping.
     *
     * @param cause the JVM's InternalError, or null
     * @return the exception to throw
     */
    BusTruncatedException truncated(Throwable cause) {
        return new BusTruncatedException(path + " was truncated under its " + size + "-byte mapping (shrunk, or "
                + "overwritten with cp): its records are gone", cause);
    }

    /**
     * Throws if the path no longer names the mapped file (removed, or another file put in its place).
     *
     * @throws BusReplacedException if so
     */
    public void checkPath() throws BusReplacedException {
        Path p = Paths.get(path);
        Map<String, Object> a;
        try {
            a = Files.readAttributes(p, "unix:ino,dev", LinkOption.NOFOLLOW_LINKS);
        } catch (NoSuchFileException e) {
            throw new BusReplacedException(path + " was removed while mapped: no process can open this bus any more");
        } catch (IOException e) {
            return;
        }
        if ((Long) a.get("ino") != inode || (Long) a.get("dev") != device) {
            throw new BusReplacedException(path + " now names another file (inode " + a.get("ino")
                    + ", mapped: " + inode + "): the bus was deleted and recreated, or replaced");
        }
    }

    /**
     * Whether a throwable is the JVM's report of a fault in a mapped page (the file was truncated).
     *
     * @param e the throwable
     * @return true for an InternalError about an unsafe memory access
     */
    static boolean isMappingFault(Throwable e) {
        return e instanceof InternalError && e.getMessage() != null
                && e.getMessage().contains("unsafe memory access");
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
        close0(channel);
        channel = null;
        size = 0;
        first = null;
        segments = null;
    }

    /**
     * {@link #close()}, then unmaps at once instead of when the garbage collector gets to the buffers. A rolling
     * bus's reader and writer close one segment after another: left to the collector, every segment they passed
     * (and, for segments retention removed, its tmpfs pages) would stay mapped until a collection happens, which a
     * process that allocates little may never do. Only for instances no other thread uses: an access racing the
     * unmap would touch unmapped memory.
     */
    void closeAndUnmap() {
        ByteBuffer[] segs = segments;
        close();
        if (segs != null) {
            for (ByteBuffer b : segs) {
                try {
                    INVOKE_CLEANER.invokeExact(b);
                } catch (Throwable t) {
                    throw unexpected(t);
                }
            }
        }
    }

    // ---- bounds and segment lookup ----

    private ByteBuffer seg(long pos, int width) {
        if (pos < 0 || pos > size - width) {
            throw outOfBounds(pos, width);
        }
        return single ? first : segments[(int) (pos >>> SEGMENT_SHIFT)];
    }

    // The buffers of a live mapping, read once per access and kept reachable until it is done.
    private ByteBuffer[] live(long pos, int width) {
        ByteBuffer[] keep = segments;
        if (keep == null) {
            throw outOfBounds(pos, width);
        }
        return keep;
    }

    // live() for a store: a read-only mapping refuses it (as its ByteBuffer would) instead of faulting.
    private ByteBuffer[] writable(long pos, int width) {
        ByteBuffer[] keep = live(pos, width);
        if (readOnly) {
            throw new java.nio.ReadOnlyBufferException();
        }
        return keep;
    }

    // Atomics need natural alignment (a split lock is slow on x86 and faults elsewhere); segments start
    // on page boundaries, so the position's alignment is the address's.
    private void aligned(long pos, int width) {
        if ((pos & (width - 1)) != 0) {
            if (segments == null || pos < 0 || pos > size - width) {
                throw outOfBounds(pos, width); // out of bounds (or closed) is the first error
            }
            throw new IllegalStateException("misaligned " + width + "-byte atomic access at position " + pos);
        }
    }

    // The address of [pos, pos + width) after its bounds check (the caller holds live()'s buffers).
    private long at(long pos, int width) {
        if (pos < 0 || pos > size - width) {
            throw outOfBounds(pos, width);
        }
        return address(pos);
    }

    // The address of pos in its segment (unchecked).
    private long address(long pos) {
        return single ? firstAddress + pos : addresses[(int) (pos >>> SEGMENT_SHIFT)] + (pos & SEGMENT_MASK);
    }

    // A writer's own stores into a record it allocated, whose bounds it checked once (offset + slot <=
    // fileSize <= size): no check per access, so that MappedBusWriter.write stays small enough for the
    // JIT to inline it into the caller's loop. Still only through a live mapping.
    void putIntInRecord(long pos, int value) {
        ByteBuffer[] keep = segments;
        if (keep == null | SWAP) {
            putInt(pos, value);
            return;
        }
        try {
            PUT_INT.invokeExact(address(pos), value);
        } catch (Throwable t) {
            throw unexpected(t);
        }
        Reference.reachabilityFence(keep);
    }

    // casStatus(recordPos, 0, 1) for the record a writer allocated (see putIntInRecord).
    boolean commitInRecord(long recordPos) {
        ByteBuffer[] keep = segments;
        if (keep == null | SWAP | (recordPos & 3) != 0) {
            return casStatus(recordPos, Layout.STATUS_NOT_SET, Layout.STATUS_COMMITTED);
        }
        boolean v;
        try {
            v = (boolean) CAS_INT.invokeExact((Object) null, address(recordPos), Layout.STATUS_NOT_SET,
                    Layout.STATUS_COMMITTED);
        } catch (Throwable t) {
            throw unexpected(t);
        }
        Reference.reachabilityFence(keep);
        return v;
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
        aligned(pos, 8);
        ByteBuffer[] keep = live(pos, 8);
        try {
            long v = (long) GET_LONG_VOLATILE.invokeExact((Object) null, at(pos, 8));
            return SWAP ? Long.reverseBytes(v) : v;
        } catch (Throwable t) {
            throw unexpected(t);
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
            return (long) LONG.getAndAdd(seg(pos, 8), idx(pos), delta);
        }
        aligned(pos, 8);
        ByteBuffer[] keep = writable(pos, 8);
        try {
            long v = (long) GET_AND_ADD_LONG.invokeExact((Object) null, at(pos, 8), delta);
            return v;
        } catch (Throwable t) {
            throw unexpected(t);
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
            return LONG.compareAndSet(seg(pos, 8), idx(pos), expected, desired);
        }
        aligned(pos, 8);
        ByteBuffer[] keep = writable(pos, 8);
        try {
            boolean v = (boolean) CAS_LONG.invokeExact((Object) null, at(pos, 8), expected, desired);
            return v;
        } catch (Throwable t) {
            throw unexpected(t);
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
            int v = (int) GET_INT_VOLATILE.invokeExact((Object) null, at(pos, 4));
            return SWAP ? Integer.reverseBytes(v) : v;
        } catch (Throwable t) {
            throw unexpected(t);
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
            PUT_INT_ORDERED.invokeExact((Object) null, at(pos, 4), SWAP ? Integer.reverseBytes(value) : value);
        } catch (Throwable t) {
            throw unexpected(t);
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
            return INT.compareAndSet(seg(pos, 4), idx(pos), expected, desired);
        }
        aligned(pos, 4);
        ByteBuffer[] keep = writable(pos, 4);
        try {
            boolean v = (boolean) CAS_INT.invokeExact((Object) null, at(pos, 4), expected, desired);
            return v;
        } catch (Throwable t) {
            throw unexpected(t);
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
        ByteBuffer[] keep = live(pos, 4);
        try {
            int v = (int) GET_INT.invokeExact(at(pos, 4));
            return SWAP ? Integer.reverseBytes(v) : v;
        } catch (Throwable t) {
            throw unexpected(t);
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
            PUT_INT.invokeExact(at(pos, 4), SWAP ? Integer.reverseBytes(value) : value);
        } catch (Throwable t) {
            throw unexpected(t);
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
            long v = (long) GET_LONG.invokeExact(at(pos, 8));
            return SWAP ? Long.reverseBytes(v) : v;
        } catch (Throwable t) {
            throw unexpected(t);
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
            PUT_LONG.invokeExact(at(pos, 8), SWAP ? Long.reverseBytes(value) : value);
        } catch (Throwable t) {
            throw unexpected(t);
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
            byte v = (byte) GET_BYTE.invokeExact(at(pos, 1));
            return v;
        } catch (Throwable t) {
            throw unexpected(t);
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
            PUT_BYTE.invokeExact(at(pos, 1), value);
        } catch (Throwable t) {
            throw unexpected(t);
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
