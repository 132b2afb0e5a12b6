package io.mappedbuspy;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.ref.Reference;
import java.net.URISyntaxException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.CodeSource;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.LockSupport;

/**
 * The wake file beside a bus ({@code PATH.wake}, or {@code DIR/bus.wake} for a rolling bus; layout in
 * {@link Layout}): readers park on it, writers wake them. The protocol is written once, in C
 * ({@code mappedbus_py/_wake.h}), and called here through the JNI library {@value #LIBRARY_NAME}
 * ({@code interop/native/wake_jni.c}):
 *
 * <pre>
 *  reader: v = prepare()        its slot parked, parked += 1, full fence, v = seq
 *          look at the bus once more: a record -> done(), deliver it
 *          await(v, ns)         FUTEX_WAIT on seq while it holds v, at most ns
 *          done()               the slot idle again, parked -= 1
 *  writer: after its commit: if (wakeNeeded()) wake();   one volatile int load; seq += 1 and FUTEX_WAKE
 * </pre>
 *
 * <p>The library is loaded with {@link System#load} from the system property {@value #LIBRARY_PROPERTY} when set,
 * else from beside the jar this class came from, else from {@code build/jvm} of the checkout named by the
 * property {@code mappedbuspy.root}. Without it nothing fails: readers park with
 * {@link LockSupport#parkNanos} for the park bound and look again (a record waits at most that long, as from a
 * writer that wakes nobody), and writers wake nobody (readers of other processes then find the record at their
 * own park bound); one log line says so. A wake file that cannot be opened (a read-only directory, a link
 * planted in its place) does the same, logged once per path: it never fails the bus.
 *
 * <p>One parking reader per instance (its slot); not thread-safe. Closing frees the slot; the mapping is
 * released by the garbage collector once the instance is unreachable, so a late call never touches unmapped
 * memory.
 */
public final class WakeFile implements AutoCloseable {
    /** System property naming the JNI library file to load (only that one is tried when set). */
    public static final String LIBRARY_PROPERTY = "mappedbus.wakeLib";
    /** File name of the JNI library, looked for beside the jar. */
    public static final String LIBRARY_NAME = "libmappedbuswake.so";
    /** Wakes in a row that woke nobody before a writer looks for dead parkers (WAKE_FUTILE_RECLAIM in _wake.h). */
    static final int FUTILE_RECLAIM = 4096;
    // A parker looks for dead parkers at most this often (as the Python reader).
    private static final long RECLAIM_EVERY_NS = 1_000_000_000L;
    private static final System.Logger LOG = System.getLogger(WakeFile.class.getName());
    private static final int PID = (int) ProcessHandle.current().pid();
    // Paths whose wake file could not be opened, logged once each.
    private static final Set<String> WARNED = ConcurrentHashMap.newKeySet();

    // A page of zeros standing in for a wake file that could not be opened (or went bad): nobody is ever parked
    // on it and nothing writes to it, so wakeNeeded() stays one load with no branch of its own.
    private static final ByteBuffer ZEROS = ByteBuffer.allocateDirect(Layout.WAKE_FILE_SIZE);
    private static final long ZEROS_ADDRESS = MemoryMappedFile.addressOf(ZEROS);
    /** The wake file of no bus: wakes nobody, parks by polling. Closing it does nothing. */
    public static final WakeFile NONE = new WakeFile("<no wake file>", null, false);

    private final String path;
    private final MemoryMappedFile mem;
    // The buffers that keep the mapping alive as long as this instance is (its addresses go to native code).
    private final Object keep;
    private long base;
    private long armedAddress;     // what a writer loads after each commit
    // Parks and wakes through the library (false: polls, wakes nobody).
    private boolean nat;
    private int slot = -1;
    private long claimFailedNs;
    private boolean registered;
    private int futile;
    private long reclaimedNs = System.nanoTime();
    private boolean closed;

    private WakeFile(String path, MemoryMappedFile mem, boolean nat) {
        this.path = path;
        this.mem = mem;
        this.keep = mem == null ? ZEROS : mem.mapping();
        this.base = mem == null ? ZEROS_ADDRESS : mem.baseAddress();
        this.armedAddress = base + Layout.WAKE_ARMED_OFFSET;
        this.nat = nat;
    }

    // ---- opening ----

    /**
     * The wake file of a single-file bus, {@code busPath + WAKE_SUFFIX}, created (all zero, with the bus file's
     * read and write permissions) if absent. Never fails: a file that cannot be opened gives one that wakes
     * nobody and parks by polling (logged once per path).
     *
     * @param busPath      the bus file
     * @param allowForeign accept another owner, and group/other write permission, as for the bus
     * @return the wake file
     */
    public static WakeFile forBus(String busPath, boolean allowForeign) {
        return forBus(busPath, allowForeign, true);
    }

    static WakeFile forBus(String busPath, boolean allowForeign, boolean useNative) {
        return openOrNone(Paths.get(busPath + Layout.WAKE_SUFFIX), allowForeign, permsOf(Paths.get(busPath)),
                useNative);
    }

    /**
     * The wake file of a rolling bus, {@code dir/WAKE_FILE}, created (as its bus.meta: rw-------) if absent.
     * Never fails, as {@link #forBus}.
     *
     * @param dir          the bus directory
     * @param allowForeign accept another owner, and group/other write permission, as for the bus
     * @return the wake file
     */
    public static WakeFile forRollingBus(String dir, boolean allowForeign) {
        return forRollingBus(dir, allowForeign, true);
    }

    static WakeFile forRollingBus(String dir, boolean allowForeign, boolean useNative) {
        Path d = Paths.get(dir);
        return openOrNone(d.resolve(Layout.WAKE_FILE), allowForeign, permsOf(d.resolve(Layout.META_FILE)), useNative);
    }

    /**
     * Opens (creating if absent) and maps a wake file as bus files are opened: never through a link, only a
     * regular file, owner and mode checked unless {@code allowForeign}; a new one is created exclusively with
     * {@code perms}, {@value Layout#WAKE_FILE_SIZE} zero bytes, then given its magic and version.
     *
     * @param file         the wake file
     * @param allowForeign accept another owner, and group/other write permission
     * @param perms        permissions of a new file, e.g. "rw-------"
     * @return the wake file
     * @throws CorruptBusException    if the file holds something else than a wake file
     * @throws UnsafeBusFileException if the path is a link, not a regular file, or foreign
     * @throws IOException            if it cannot be opened or mapped
     */
    public static WakeFile open(Path file, boolean allowForeign, String perms) throws IOException {
        return open(file, allowForeign, perms, true);
    }

    static WakeFile open(Path file, boolean allowForeign, String perms, boolean useNative) throws IOException {
        boolean nat = useNative && Native.LOADED;
        MemoryMappedFile.OpenOptions o = new MemoryMappedFile.OpenOptions();
        o.create = true;
        o.grow = true;
        o.exclusive = true; // serialises growing a new file with zeros against another opener's initialisation
        o.allowForeign = allowForeign;
        o.perms = perms;
        o.afterMap = f -> {
            int rc = nat ? nInit(f.baseAddress()) : initJava(f);
            if (rc != 0) {
                throw new CorruptBusException(file + " is not a bus wake file: " + (rc == -1
                        ? "its magic is not a wake file's" : rc == -2 ? "its version is unknown"
                        : "its parked count is impossible"));
            }
        };
        return new WakeFile(file.toString(), MemoryMappedFile.open(file.toString(), Layout.WAKE_FILE_SIZE, o), nat);
    }

    // wake_init of _wake.h, for a JVM without the library: the same compare-and-swaps.
    private static int initJava(MemoryMappedFile f) {
        if (!f.compareAndSetLong(Layout.WAKE_MAGIC_OFFSET, 0, Layout.WAKE_MAGIC)
                && f.getLongAcquire(Layout.WAKE_MAGIC_OFFSET) != Layout.WAKE_MAGIC) {
            return -1;
        }
        if (!f.compareAndSetInt(Layout.WAKE_VERSION_OFFSET, 0, Layout.WAKE_VERSION)
                && f.getIntAcquire(Layout.WAKE_VERSION_OFFSET) != Layout.WAKE_VERSION) {
            return -2;
        }
        int parked = f.getIntAcquire(Layout.WAKE_PARKED_OFFSET);
        return parked < 0 || parked > Layout.WAKE_SLOT_COUNT ? -3 : 0;
    }

    private static WakeFile openOrNone(Path file, boolean allowForeign, String perms, boolean useNative) {
        try {
            return open(file, allowForeign, perms, useNative);
        } catch (IOException | UncheckedIOException | SecurityException e) {
            if (WARNED.size() < 1024 && WARNED.add(file.toString())) {
                LOG.log(System.Logger.Level.WARNING, "mappedbus: no wake file " + file + " (" + e.getMessage()
                        + "): readers of this bus here poll every " + Layout.DEFAULT_PARK_NS + " ns, writers wake nobody");
            }
            return NONE;
        }
    }

    // The read and write bits of the file a wake file goes beside (a group-shared bus gets a group-shared wake
    // file), at least rw for the owner; rw------- when it cannot be read.
    private static String permsOf(Path beside) {
        Set<PosixFilePermission> p = EnumSet.of(PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE);
        try {
            for (PosixFilePermission q : Files.getPosixFilePermissions(beside, LinkOption.NOFOLLOW_LINKS)) {
                if (q != PosixFilePermission.OWNER_EXECUTE && q != PosixFilePermission.GROUP_EXECUTE
                        && q != PosixFilePermission.OTHERS_EXECUTE) {
                    p.add(q);
                }
            }
        } catch (IOException | UnsupportedOperationException | SecurityException e) {
            // rw-------
        }
        return PosixFilePermissions.toString(p);
    }

    // ---- the writer's side ----

    /**
     * Whether a reader parked since the last wake: one volatile int load of the armed flag, what a writer does
     * after each commit.
     *
     * @return true if {@link #wake()} has someone to wake
     */
    public boolean wakeNeeded() {
        try {
            return MemoryMappedFile.getIntVolatileAt(armedAddress) != 0;
        } catch (InternalError e) {
            return fault(e);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * Wakes every reader parked on this file (after {@link #wakeNeeded()} said there is one). Wakes that woke
     * nobody {@value #FUTILE_RECLAIM} times in a row (readers killed while parked) make it free their slots.
     */
    public void wake() {
        if (!nat || closed) {
            return;
        }
        try {
            if (nWakeAll(base) == 0) {
                if (++futile >= FUTILE_RECLAIM) {
                    futile = 0;
                    nReclaim(base, PID, 1);
                }
            } else {
                futile = 0;
            }
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    // ---- the reader's side ----

    /**
     * Registers this instance as parked and returns the value to wait on; the caller then looks at the bus once
     * more and calls {@link #await} only if it found nothing, then {@link #done()} in any case.
     */
    int prepare() {
        registered = false;
        if (!nat || closed) {
            return 0;
        }
        try {
            long now = System.nanoTime();
            if (slot < 0) {
                if (claimFailedNs != 0 && now - claimFailedNs < RECLAIM_EVERY_NS) {
                    return 0;
                }
                slot = nClaim(base, PID, nProcStart(PID));
                if (slot < 0) {
                    claimFailedNs = now; // all slots taken: poll, and try again in a second
                    return 0;
                }
            }
            if (now - reclaimedNs > RECLAIM_EVERY_NS) {
                reclaimedNs = now;
                nReclaim(base, PID, 1);
            }
            int v = nPrepare(base, slot);
            registered = true;
            return v;
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * Sleeps while the wake word holds {@code v}, at most {@code ns} (a wake, a signal or the time ends it); without
     * the library (or a slot), for {@code ns}.
     *
     * @return true if a writer woke the file meanwhile (the wake word moved)
     */
    boolean await(int v, long ns) {
        if (!registered) {
            LockSupport.parkNanos(ns);
            return false;
        }
        try {
            return nWait(base, v, ns) != 0;
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** Ends a park begun by {@link #prepare()}. */
    void done() {
        if (registered) {
            registered = false;
            try {
                nDone(base, slot);
            } finally {
                Reference.reachabilityFence(this);
            }
        }
    }

    /**
     * Parks for at most {@code ns} nanoseconds unless woken (tests, and waits of one's own).
     *
     * @param ns the bound
     * @return true if a writer woke the file meanwhile (its wake word moved)
     */
    public boolean park(long ns) {
        int v = prepare();
        try {
            return await(v, ns);
        } finally {
            done();
        }
    }

    /**
     * A waiting reader's look at the file (with the bus's, every few milliseconds): one truncated under its
     * mapping is no longer used (a native call on a truncated page would crash the JVM).
     */
    void check() {
        if (nat && mem != null) {
            try {
                mem.checkLength();
            } catch (BusTruncatedException e) {
                disable(e.getMessage());
            }
        }
    }

    private boolean fault(InternalError e) {
        if (!MemoryMappedFile.isMappingFault(e)) {
            throw e;
        }
        disable(path + " was truncated under its mapping");
        return false;
    }

    private void disable(String why) {
        LOG.log(System.Logger.Level.WARNING, "mappedbus: " + why + ": the wake file is no longer used (readers "
                + "poll, writers wake nobody)");
        nat = false;
        registered = false;
        base = ZEROS_ADDRESS;
        armedAddress = ZEROS_ADDRESS + Layout.WAKE_ARMED_OFFSET;
    }

    // ---- state ----

    /**
     * How many readers are parked on this file now.
     *
     * @return the parked count
     */
    public int parked() {
        try {
            return MemoryMappedFile.getIntVolatileAt(base + Layout.WAKE_PARKED_OFFSET);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * Frees the slots of processes that are gone (undoing their parks).
     *
     * @return how many slots were freed
     */
    public int reclaim() {
        if (!nat || closed) {
            return 0;
        }
        try {
            return nReclaim(base, PID, 0);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * Whether this file parks and wakes through the kernel (false: no library, or no file).
     *
     * @return true when readers sleep until woken and writers wake them
     */
    public boolean isNative() {
        return nat;
    }

    /** @return the wake file's path */
    public String path() {
        return path;
    }

    /** Frees this instance's parking slot; later parks poll, later wakes do nothing. Idempotent. */
    @Override
    public void close() {
        if (closed || mem == null) {
            return;
        }
        try {
            if (nat && slot >= 0) {
                nRelease(base, slot, PID);
            }
        } finally {
            Reference.reachabilityFence(this);
        }
        closed = true;
        slot = -1;
        mem.close(); // the channel; the mapping stays while this instance is reachable (keep)
    }

    @Override
    public String toString() {
        return "WakeFile[" + path + (nat ? "" : ", polling") + (closed ? ", closed" : "") + "]";
    }

    // ---- the library ----

    /**
     * Whether the JNI library is loaded in this JVM (see the class comment for where it is looked for).
     *
     * @return true if readers can sleep until woken
     */
    public static boolean nativeLoaded() {
        return Native.LOADED;
    }

    /**
     * The library file loaded, or why none was.
     *
     * @return a path, or the reason
     */
    public static String nativeLibrary() {
        return Native.WHAT;
    }

    /**
     * The constants of {@code _wake.h} as the library was compiled, in this order: WAKE_FILE_SIZE, WAKE_MAGIC,
     * WAKE_VERSION, WAKE_MAGIC_OFFSET, WAKE_VERSION_OFFSET, WAKE_PARKED_OFFSET, WAKE_SEQ_OFFSET, WAKE_SLOTS_OFFSET,
     * WAKE_SLOT_SIZE, WAKE_SLOT_COUNT, WAKE_SLOT_PID_OFFSET, WAKE_SLOT_STATE_OFFSET, WAKE_SLOT_START_OFFSET,
     * WAKE_STATE_IDLE, WAKE_STATE_PARKED, WAKE_FUTILE_RECLAIM, WAKE_PIN_NS, WAKE_ARMED_OFFSET.
     */
    static long[] nativeConstants() {
        long[] c = new long[18];
        for (int i = 0; i < c.length; i++) {
            c[i] = nConstant(i);
        }
        return c;
    }

    /** What this class expects of the library: {@link #nativeConstants()}'s order. */
    static long[] expectedConstants() {
        return new long[] {Layout.WAKE_FILE_SIZE, Layout.WAKE_MAGIC, Layout.WAKE_VERSION, Layout.WAKE_MAGIC_OFFSET,
            Layout.WAKE_VERSION_OFFSET, Layout.WAKE_PARKED_OFFSET, Layout.WAKE_SEQ_OFFSET, Layout.WAKE_SLOTS_OFFSET,
            Layout.WAKE_SLOT_SIZE, Layout.WAKE_SLOT_COUNT, Layout.WAKE_SLOT_PID_OFFSET, Layout.WAKE_SLOT_STATE_OFFSET,
            Layout.WAKE_SLOT_START_OFFSET, 0, 1, FUTILE_RECLAIM, Waiter.PIN_NS, Layout.WAKE_ARMED_OFFSET};
    }

    // Loaded at the first wake file opened (a program that never parks nor wakes never loads it).
    private static final class Native {
        static final boolean LOADED;
        static final String WHAT;

        static {
            boolean ok = false;
            StringBuilder why = new StringBuilder();
            String loaded = null;
            for (Path p : candidates()) {
                if (!Files.isRegularFile(p)) {
                    why.append(why.length() == 0 ? "" : "; ").append(p).append(": no such file");
                    continue;
                }
                try {
                    System.load(p.toAbsolutePath().toString());
                    if (java.util.Arrays.equals(nativeConstants(), expectedConstants())) {
                        ok = true;
                        loaded = p.toAbsolutePath().toString();
                    } else {
                        why.append(why.length() == 0 ? "" : "; ").append(p)
                                .append(": built from another _wake.h (its constants differ from Layout's)");
                    }
                } catch (UnsatisfiedLinkError | SecurityException e) {
                    why.append(why.length() == 0 ? "" : "; ").append(p).append(": ").append(e.getMessage());
                }
                break; // the first file found is the one meant
            }
            LOADED = ok;
            WHAT = ok ? loaded : why.length() == 0 ? "not found" : why.toString();
            if (!ok) {
                LOG.log(System.Logger.Level.INFO, "mappedbus: no wake library (" + WHAT + "): readers park by polling "
                        + "every " + Layout.DEFAULT_PARK_NS + " ns instead of sleeping until woken, writers wake nobody");
            }
        }

        private static List<Path> candidates() {
            List<Path> c = new ArrayList<>();
            String prop = System.getProperty(LIBRARY_PROPERTY);
            if (prop != null && !prop.isEmpty()) {
                c.add(Paths.get(prop)); // an explicit choice: only it
                return c;
            }
            try {
                CodeSource cs = WakeFile.class.getProtectionDomain().getCodeSource();
                if (cs != null && cs.getLocation() != null && "file".equals(cs.getLocation().getProtocol())) {
                    Path where = Paths.get(cs.getLocation().toURI());
                    if (Files.isDirectory(where)) {          // build/jvm/classes
                        c.add(where.resolve(LIBRARY_NAME));
                        if (where.getParent() != null) {
                            c.add(where.getParent().resolve(LIBRARY_NAME));
                        }
                    } else if (where.getParent() != null) { // beside the jar
                        c.add(where.getParent().resolve(LIBRARY_NAME));
                    }
                }
            } catch (URISyntaxException | RuntimeException e) {
                // no usable location: the checkout's, if named
            }
            String root = System.getProperty("mappedbuspy.root");
            if (root != null && !root.isEmpty()) {
                c.add(Paths.get(root, "build", "jvm", LIBRARY_NAME));
            }
            return c;
        }
    }

    private static native int nInit(long w);

    private static native int nClaim(long w, int pid, long start);

    private static native void nRelease(long w, int slot, int pid);

    private static native int nPrepare(long w, int slot);

    private static native int nWait(long w, int v, long ns);

    private static native void nDone(long w, int slot);

    private static native int nWakeAll(long w);

    private static native int nReclaim(long w, int self, int parkedOnly);

    private static native long nProcStart(int pid);

    private static native long nConstant(int i);
}
