package io.mappedbuspy.internal;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Map;
import java.util.function.Consumer;
import io.mappedbuspy.BusReplacedException;
import io.mappedbuspy.BusTruncatedException;
import io.mappedbuspy.Layout;
import io.mappedbuspy.UnsafeBusFileException;

/**
 * A bus file mapped into memory, with bounds-checked plain and atomic little-endian accessors.
 *
 * <p>The accessors go through {@code sun.misc.Unsafe} on the mapping's address, as the original does
 * ({@link UnsafeAccess}: no {@code --add-opens} needed), after a bounds check against {@code [0, size())}: a bad
 * position throws {@link IndexOutOfBoundsException} (or {@link IllegalStateException} once closed) instead of
 * faulting. The plain accessors and the windows of a mapping over 1 GiB are {@link MappedWindows}'s; the atomic ones,
 * named by their memory order, {@link MappedAtomics}'; both are this class's public API. The file is opened as
 * {@link SafeOpen} says (never through a link, owner and mode checked, under a bounded open lock, created and grown
 * only by writers); it stays open for the truncation and replacement checks. The mapping is released by the garbage
 * collector after {@link #close()}, so a stale reference can never touch unmapped memory ({@link #closeAndUnmap()}
 * unmaps at once, for instances no other thread uses). Loading this class compiles the atomic accessors first
 * ({@link JitWarmUp}).
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
 */
public final class MemoryMappedFile extends MappedAtomics implements AutoCloseable {
    /** Default bound on waiting for the open lock. */
    public static final long DEFAULT_LOCK_TIMEOUT_MS = 10_000;

    // Kept open for length checks (truncation); null once closed.
    private FileChannel channel;
    // st_ino and st_dev of the mapped file, taken at open.
    private long inode;
    private long device;
    private boolean created;
    // Bytes held in memory, not a mapping of a file (inMemory).
    private boolean inMemory;
    // Takes the buffer of bytes held in memory back at the close, instead of freeing it (or null).
    private Consumer<ByteBuffer> release;

    /** How a file is opened; see {@link #open(String, long, OpenOptions)} and {@link SafeOpen}. */
    public static final class OpenOptions {
        /** Create the file if absent (writers only), exactly rw-------. */
        public boolean create;
        /** Open and map read-only. */
        public boolean readOnly;
        /** Grow a short file to the mapping (writers only). */
        public boolean grow;
        /** Map only what exists of a short file (read-only scans) instead of refusing it. */
        public boolean allowShort;
        /** Accept another owner, or group/other write permission. */
        public boolean allowForeign;
        /** The permissions of a file this open creates (a wake file takes its bus's). */
        String perms = "rw-------";
        /** Take the open lock exclusive (writers) instead of shared. */
        public boolean exclusive;
        /**
         * Take the POSIX open lock at all. False for a side file whose slots are held by OFD locks (the writers
         * file, {@link WritersFile}): the two kinds conflict, so a whole-file lock would wait for every holder.
         */
        public boolean lock = true;
        public long lockTimeoutMs = DEFAULT_LOCK_TIMEOUT_MS;
        /**
         * Take the open lock on this one byte instead of the whole file (-1): the side files whose slots carry OFD
         * liveness locks ({@link Liveness}), which a whole-file lock would wait on.
         */
        long lockOffset = -1;
        /** Runs under the open lock before the file is grown or mapped: checks that write nothing. */
        Step beforeGrow;
        /** Runs under the open lock once mapped: initialisation. */
        public Step afterMap;
    }

    /** A step of opening, run under the open lock. */
    public interface Step {
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

    public static MemoryMappedFile open(String path, long fileSize, OpenOptions o) throws IOException {
        return new MemoryMappedFile(path, fileSize, o);
    }

    private MemoryMappedFile(String path, long fileSize, OpenOptions o) throws IOException {
        super(path, o.readOnly);
        if (fileSize <= 0) {
            throw new IllegalArgumentException("fileSize must be > 0, got " + fileSize);
        }
        SafeOpen.open(this, fileSize, o);
    }

    // A mapping of a direct buffer of this process (JitWarmUp's).
    MemoryMappedFile(ByteBuffer buf) {
        this("<warm-up>", buf);
    }

    private MemoryMappedFile(String path, ByteBuffer buf) {
        super(path, false);
        attach(new ByteBuffer[] {buf.order(ByteOrder.LITTLE_ENDIAN)}, buf.capacity());
        inMemory = true;
    }

    /**
     * The bytes of a file held in this process's memory instead of mapped (an archived segment decompressed,
     * {@link ArchiveFiles#open}): read like a mapping; no file under it to check ({@link #checkLength()},
     * {@link #checkPath()} do nothing). {@link #closeAndUnmap()} frees the buffer.
     *
     * @param path the file the bytes came from, for messages
     * @param buf  a direct buffer, all of it the bytes
     * @return them
     */
    public static MemoryMappedFile inMemory(String path, ByteBuffer buf) {
        if (!buf.isDirect()) {
            throw new IllegalArgumentException("not a direct buffer");
        }
        return new MemoryMappedFile(path, buf);
    }

    /**
     * As {@link #inMemory(String, ByteBuffer)}, but {@link #close()} hands the buffer to {@code release} instead of
     * freeing it (a reader's {@link ArchiveFiles.SegmentBuffers}: the next archived segment decompressed into the same
     * pages, no allocation, no page faults). Every access after the close fails its bounds check, as for any closed
     * mapping, before the buffer is used again.
     *
     * @param path    the file the bytes came from, for messages
     * @param buf     a direct buffer, all of it the bytes
     * @param release takes the buffer back when this is closed
     * @return them
     */
    public static MemoryMappedFile inMemory(String path, ByteBuffer buf, Consumer<ByteBuffer> release) {
        MemoryMappedFile m = inMemory(path, buf);
        m.release = release;
        return m;
    }

    /**
     * Writes the pages of {@code [from, from + length)} that changed to the file and waits for the device
     * ({@code msync(MS_SYNC)} of that range, through {@link MappedByteBuffer#force(int, int)}), then the file's data
     * ({@code fdatasync}, through {@link FileChannel#force}(false)). Nothing for bytes held in memory.
     *
     * @param from   first byte
     * @param length bytes from there (clipped to the mapping)
     * @throws IOException if the file's data cannot be synced
     */
    public void force(long from, long length) throws IOException {
        ByteBuffer[] wins = windows;
        if (inMemory || wins == null || length <= 0) {
            return;
        }
        long end = Math.min(size, from + length);
        for (long pos = Math.max(0, from); pos < end; ) {
            int w = (int) (pos >>> WINDOW_SHIFT);
            long winStart = (long) w << WINDOW_SHIFT;
            long winEnd = Math.min(end, Math.min(winStart + wins[w].capacity(), winStart + WINDOW_SIZE));
            if (wins[w] instanceof MappedByteBuffer mb) {
                mb.force((int) (pos - winStart), (int) (winEnd - pos));
            }
            pos = winEnd;
        }
        FileChannel ch = channel;
        if (ch != null) {
            ch.force(false);
        }
    }

    // SafeOpen: the file being opened (before its lock is taken and the steps run).
    void identify(long inode, long device) {
        this.inode = inode;
        this.device = device;
    }

    // SafeOpen: the file is mapped; the channel stays open for the length checks.
    void opened(FileChannel ch, boolean made) {
        this.channel = ch;
        this.created = made;
    }

    // The address of byte 0 of a mapping of one window (the wake file's, for its JNI calls), and the buffers that
    // keep it mapped: whoever uses the address holds them (close() leaves the unmapping to the collector).
    public long baseAddress() {
        if (!single || windows == null) {
            throw new IllegalStateException("no single-window mapping of " + path);
        }
        return firstAddress;
    }

    Object mapping() {
        return windows;
    }

    // The address of a direct buffer (WakeFile's page of zeros).
    static long addressOf(ByteBuffer b) {
        return UnsafeAccess.bufferAddress(b);
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
    public static int getIntVolatileAt(long address) {
        return UnsafeAccess.getIntVolatileAt(address);
    }

    // A volatile (seq-cst) int64 load. Pairs with putLongReleaseAt.
    public static long getLongVolatileAt(long address) {
        return UnsafeAccess.getLongVolatileAt(address);
    }

    // A volatile (seq-cst) int32 store; read by getIntVolatileAt.
    public static void putIntVolatileAt(long address, int value) {
        UnsafeAccess.putIntVolatileAt(address, value);
    }

    // An int64 store with release semantics; read by getLongVolatileAt.
    public static void putLongReleaseAt(long address, long value) {
        UnsafeAccess.putLongReleaseAt(address, value);
    }

    // Compare-and-swap of an int32 (seq-cst); true if it held expected and now holds desired.
    static boolean compareAndSetIntAt(long address, int expected, int desired) {
        return UnsafeAccess.compareAndSetIntAt(address, expected, desired);
    }

    // Atomic add to an int32 (seq-cst); returns the previous value.
    static int getAndAddIntAt(long address, int delta) {
        return UnsafeAccess.getAndAddIntAt(address, delta);
    }

    // Atomic exchange of an int32 (seq-cst); returns the previous value.
    static int getAndSetIntAt(long address, int value) {
        return UnsafeAccess.getAndSetIntAt(address, value);
    }

    // Raises here, as an InternalError, the report of a fault in an earlier Unsafe access of this thread that the
    // JVM still holds. JDK 17 turns such a fault (in compiled code, and in the interpreter's Unsafe calls) into a
    // pending report, raised at the thread's next entry into the VM from Java: not at a return from a native
    // method, nor at a safepoint poll unless one is pending, so perhaps far from the access, in a caller that
    // would take it for a fault of its own. A multi-dimensional array whose length the compiler cannot see is
    // made by a call into the VM in the interpreter, C1 and C2 alike: that call raises the report (40-100 ns).
    public static void raiseFaultReports() {
        faultProbe = new int[faultProbeLength][0];
    }

    // Never changed (an empty array is the cheapest to make): not final, so no compiler takes the length for a
    // constant and makes the array inline, without a call into the VM.
    private static int faultProbeLength = 0;
    private static Object faultProbe;

    /**
     * Whether a throwable is the JVM's report of a fault in a mapped page (the file was truncated).
     *
     * @param e the throwable
     * @return true for an InternalError about an unsafe memory access
     */
    public static boolean isMappingFault(Throwable e) {
        return e instanceof InternalError && e.getMessage() != null
                && e.getMessage().contains("unsafe memory access");
    }

    // ---- the file under the mapping ----

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
        if (ch == null || inMemory) {
            return;
        }
        long len;
        try {
            len = ch.size();
        } catch (IOException e) {
            return;
        }
        if (len < size) {
            try {
                raiseFaultReports(); // an access's fault report still pending is this truncation's: raised now
            } catch (InternalError e) {
                if (isMappingFault(e)) {
                    throw truncated(e);
                }
                throw e;
            }
            throw truncated(null);
        }
    }

    /**
     * The exception for a fault (or a length check) that found the file shorter than the mapping.
     *
     * @param cause the JVM's InternalError, or null
     * @return the exception to throw
     */
    public BusTruncatedException truncated(Throwable cause) {
        return new BusTruncatedException(path + " was truncated under its " + size + "-byte mapping (shrunk, or "
                + "overwritten with cp): its records are gone", cause);
    }

    /**
     * Throws if the path no longer names the mapped file (removed, or another file put in its place).
     *
     * @throws BusReplacedException if so
     */
    public void checkPath() throws BusReplacedException {
        checkPath(false);
    }

    /**
     * Throws if the path names another file than the mapped one, or none unless {@code removalOk} (a rolling bus's
     * segment, which retention may remove while it is read).
     *
     * @param removalOk whether a path that names no file is fine
     * @throws BusReplacedException if not
     */
    public void checkPath(boolean removalOk) throws BusReplacedException {
        if (inMemory) {
            return;
        }
        Path p = Paths.get(path);
        Map<String, Object> a;
        try {
            a = Files.readAttributes(p, "unix:ino,dev", LinkOption.NOFOLLOW_LINKS);
        } catch (NoSuchFileException e) {
            if (removalOk) {
                return;
            }
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
     * The channel this instance opened (its own open file description: what {@link Liveness} holds and probes
     * through: the wake file, the registry, WritersFile), or null once closed.
     */
    FileChannel channel() {
        return channel;
    }

    /** Drops the mapping; every later access throws {@link IllegalStateException}. */
    @Override
    public void close() {
        closed = true;
        SafeOpen.close0(channel);
        channel = null;
        ByteBuffer[] wins = windows;
        dropWindows();
        if (inMemory && wins != null && path != null && !path.equals("<warm-up>")) {
            // An archived segment's bytes: freed now (64 MiB a segment), not when the collector gets to them, or
            // handed back for the next segment. Every later access fails its bounds check first (dropWindows).
            Consumer<ByteBuffer> back = release;
            release = null;
            for (ByteBuffer b : wins) {
                if (back != null) {
                    back.accept(b);
                } else {
                    UnsafeAccess.unmap(b);
                }
            }
        }
    }

    /**
     * {@link #close()}, then unmaps at once instead of when the garbage collector gets to the buffers. A rolling
     * bus's reader and writer close one segment after another: left to the collector, every segment they passed
     * (and, for segments retention removed, its tmpfs pages) would stay mapped until a collection happens, which a
     * process that allocates little may never do. Only for instances no other thread uses: an access racing the
     * unmap would touch unmapped memory.
     */
    public void closeAndUnmap() {
        ByteBuffer[] wins = inMemory ? null : windows; // close() frees bytes held in memory
        close();
        if (wins != null) {
            for (ByteBuffer b : wins) {
                UnsafeAccess.unmap(b);
            }
        }
    }

    @Override
    public String toString() {
        return "MemoryMappedFile[" + path + ", size=" + size + (readOnly ? ", read-only" : "")
                + (closed ? ", closed" : "") + "]";
    }

    // Last, after every other static field of this class is set: see JitWarmUp.
    static {
        JitWarmUp.run();
    }
}
