package io.mappedbuspy.internal;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.ref.Reference;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.LockSupport;
import io.mappedbuspy.BusTruncatedException;
import io.mappedbuspy.CorruptBusException;
import io.mappedbuspy.Layout;
import io.mappedbuspy.UnsafeBusFileException;

/**
 * The wake file beside a bus ({@code PATH.wake}, or {@code DIR/bus.wake} for a rolling bus; layout in
 * {@link Layout}): readers park on it, writers wake them. The protocol is {@code mappedbus_py/_core/_wake.h}'s, ported
 * here statement by statement with the same memory orders (each step names the C function it mirrors): every
 * access to the file goes through {@link MemoryMappedFile}'s Unsafe accessors, and the JNI library
 * {@value #LIBRARY_NAME} ({@code interop/native/wake_jni.c}) only makes the system calls: FUTEX_WAIT and FUTEX_WAKE
 * on the futex word's address, and the OFD locks by which a parker holds its slot ({@link Liveness}: the slot's
 * first byte, locked through this instance's own channel; the kernel drops it when the process dies, so a killed
 * parker's slot is reclaimed at once, a zombie's included, and parkers in other pid namespaces are seen alive).
 *
 * <pre>
 *  reader: v = prepare()        its slot parked, parked += 1, armed = 1, full fence, v = seq
 *          look at the bus once more: a record -> done(), deliver it
 *          await(v, ns)         if armed: FUTEX_WAIT on seq while it holds v, at most ns
 *          done()               the slot idle again, parked -= 1
 *  writer: after its commit: if (wakeNeeded()) wake();   one volatile int load; armed 1 -> 0, seq += 1, FUTEX_WAKE
 * </pre>
 *
 * <p>Why in Java: a wake file truncated under its mapping (by another process) faults at every access to a page
 * past its new end. A fault in native code is a SIGBUS that ends the JVM; one in an Unsafe access is reported by
 * the JVM as an {@link InternalError}, after which this instance no longer uses the file (readers poll, writers
 * wake nobody; logged). A futex call on such an address fails (EFAULT) instead. JDK 17 raises a fault's report
 * late, at the thread's next entry into the VM: each step ends with {@code MemoryMappedFile.raiseFaultReports()} so
 * that it comes here, not in the bus reader's code; only the writer's one load after each commit (wakeNeeded) goes
 * without, being too hot for it.
 *
 * <p>The protocol's steps are {@link WakeProtocol}'s; the library is loaded by {@link WakeLibrary} (from the system
 * property {@value #LIBRARY_PROPERTY} when set, else from beside the jar this class came from, else from
 * {@code build/jvm} of the checkout named by the property {@code mappedbuspy.root}). Without it nothing fails: readers park with
 * {@link LockSupport#parkNanos} for the park bound and look again (a record waits at most that long, as from a
 * writer that wakes nobody), and writers wake nobody (readers of other processes then find the record at their
 * own park bound); one log line says so. A wake file that cannot be opened (a read-only directory, a link
 * planted in its place) does the same, logged once per path: it never fails the bus.
 *
 * <p>One parking reader per instance (its slot); not thread-safe. Closing frees the slot; the mapping is
 * released by the garbage collector once the instance is unreachable, so a late call never touches unmapped
 * memory.
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
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
    // A writer's look (wakeNeeded) is one load, with no raiseFaultReports of its own (a call into the VM: more than
    // a write costs): one look in LOOK_CHECK_MASK + 1 raises a report the JVM may still hold from a look that
    // faulted and checks the file's length, so that a file truncated under a writer is no longer looked at even
    // if the reports of its looks were raised elsewhere.
    private static final int LOOK_CHECK_MASK = 4095;
    static final System.Logger LOG = System.getLogger(WakeFile.class.getName());
    public static final int PID = (int) ProcessHandle.current().pid();
    // Paths whose wake file could not be opened, logged once each.
    private static final Set<String> WARNED = ConcurrentHashMap.newKeySet();

    // A page of zeros standing in for a wake file that could not be opened (or went bad): nobody is ever parked
    // on it and nothing writes to it, so wakeNeeded() stays one load with no branch of its own.
    private static final ByteBuffer ZEROS = ByteBuffer.allocateDirect(Layout.WAKE_FILE_SIZE);
    static final long ZEROS_ADDRESS = MemoryMappedFile.addressOf(ZEROS);
    private static final long ZEROS_ARMED = ZEROS_ADDRESS + Layout.WAKE_ARMED_OFFSET;
    /** The wake file of no bus: wakes nobody, parks by polling. Closing it does nothing. */
    public static final WakeFile NONE = new WakeFile("<no wake file>", null, false);

    private final String path;
    private final MemoryMappedFile mem;
    // The buffers that keep the mapping alive as long as this instance is (accessed by address).
    private final Object keep;
    private long base;
    private long armedAddress;     // what a writer loads after each commit
    // Parks and wakes (the library's futex calls; false: polls, wakes nobody).
    private boolean nat;
    private int slot = -1;
    private long claimFailedNs;
    private boolean registered;
    private int futile;
    private int looks;             // wakeNeeded() calls, for LOOK_CHECK_MASK
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

    public static WakeFile forBus(String busPath, boolean allowForeign, boolean useNative) {
        return openOrNone(Paths.get(busPath + Layout.WAKE_SUFFIX), allowForeign,
                BusFiles.permsBeside(Paths.get(busPath)), useNative);
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

    public static WakeFile forRollingBus(String dir, boolean allowForeign, boolean useNative) {
        Path d = Paths.get(dir);
        return openOrNone(d.resolve(Layout.WAKE_FILE), allowForeign, BusFiles.permsBeside(d.resolve(Layout.META_FILE)),
                useNative);
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

    public static WakeFile open(Path file, boolean allowForeign, String perms, boolean useNative) throws IOException {
        return new WakeFile(file.toString(), WakeProtocol.map(file, allowForeign, perms), useNative && WakeLibrary.LOADED);
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

    // ---- the writer's side ----

    /**
     * Whether a reader parked since the last wake: one volatile int load of the armed flag, what a writer does
     * after each commit.
     *
     * @return true if {@link #wake()} has someone to wake
     */
    public boolean wakeNeeded() {
        try {
            long a = armedAddress;
            boolean armed = MemoryMappedFile.getIntVolatileAt(a) != 0; // wake_needed: load_seq_cst_i32(armed)
            if (a != ZEROS_ARMED && (++looks & LOOK_CHECK_MASK) == 0) { // (NONE is shared: no count there)
                MemoryMappedFile.raiseFaultReports();
                check();
            }
            return armed;
        } catch (InternalError e) {
            return fault(e);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * The writers' step after each commit: {@code if (wakeNeeded()) wake();}, with the branch inside: a fault's
     * report raised there (the first wake may recompile the caller, which enters the VM) comes here, not in the
     * writer's code, where it would pass for its bus's.
     */
    public void wakeIfNeeded() {
        try {
            if (wakeNeeded()) {
                wake();
            }
        } catch (InternalError e) {
            fault(e);
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
            if (WakeProtocol.wakeAll(base) == 0) {
                if (++futile >= FUTILE_RECLAIM) {
                    futile = 0;
                    reclaimDead(true);
                }
            } else {
                futile = 0;
            }
            MemoryMappedFile.raiseFaultReports();
        } catch (InternalError e) {
            fault(e);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    // ---- the reader's side ----

    /**
     * Registers this instance as parked and returns the value to wait on; the caller then looks at the bus once
     * more and calls {@link #await} only if it found nothing, then {@link #done()} in any case.
     */
    public int prepare() {
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
                int claimed = WakeProtocol.wakeClaim(base, mem.channel(), PID); // held through our own description
                MemoryMappedFile.raiseFaultReports(); // before the slot is used
                slot = claimed < 0 ? -1 : claimed;
                if (slot < 0) {
                    claimFailedNs = now; // all slots taken: poll, and try again in a second
                    return 0;
                }
            }
            if (now - reclaimedNs > RECLAIM_EVERY_NS) {
                reclaimedNs = now;
                reclaimDead(true);
            }
            int v = WakeProtocol.wakePrepare(base, slot);
            MemoryMappedFile.raiseFaultReports();
            registered = true;
            return v;
        } catch (InternalError e) {
            fault(e);
            return 0;
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
    public boolean await(int v, long ns) {
        if (!registered) {
            LockSupport.parkNanos(ns);
            return false;
        }
        try {
            WakeProtocol.wakeWait(base, v, ns);
            boolean woken = WakeProtocol.wakeSeq(base) != v; // the wake word moved: wake_backoff_after's `woken`
            MemoryMappedFile.raiseFaultReports();
            return woken;
        } catch (InternalError e) {
            fault(e);
            return false;
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** Ends a park begun by {@link #prepare()}. */
    public void done() {
        if (registered) {
            registered = false;
            try {
                WakeProtocol.wakeDone(base, slot);
                MemoryMappedFile.raiseFaultReports();
            } catch (InternalError e) {
                fault(e);
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
     * A look at the file's length, by a waiting reader (with the bus's, every few milliseconds) and a writer (every
     * {@code LOOK_CHECK_MASK + 1} looks): one truncated under its mapping is no longer used (its pages past the new
     * end would fault; a file cut inside its first page, which stays mapped, has its words zeroed under the protocol
     * by each truncation).
     */
    public void check() {
        if (mem != null && base != ZEROS_ADDRESS) {
            try {
                mem.checkLength();
            } catch (BusTruncatedException e) {
                disable(e.getMessage());
            }
        }
    }

    // A fault report raised in a step of the protocol: a page of this file was gone (a report that the JVM held
    // from an access of this thread elsewhere, a bus's, is taken for this file's too: the bus's own length checks
    // see its truncation). Anything else is not ours.
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
        armedAddress = ZEROS_ARMED;
    }

    // Undoes the slots of dead parkers (wake_reclaim) through a channel of its own that holds no slot: through this
    // instance's channel, which holds ours, our own slot's byte would look free (a lock never conflicts with its own
    // description). The channel is opened by path and must be the mapped file. How many were freed, -1 if none could
    // be asked.
    private int reclaimDead(boolean parkedOnly) {
        Path p = Paths.get(path);
        try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ, StandardOpenOption.WRITE,
                LinkOption.NOFOLLOW_LINKS)) {
            Map<String, Object> a = Files.readAttributes(p, "unix:ino,dev", LinkOption.NOFOLLOW_LINKS);
            if ((Long) a.get("ino") != mem.inode() || (Long) a.get("dev") != mem.device()) {
                return -1; // replaced since it was opened: its parkers are another file's
            }
            return WakeProtocol.wakeReclaim(base, ch, parkedOnly);
        } catch (IOException | UnsupportedOperationException | SecurityException e) {
            return -1;
        }
    }

    // ---- state ----

    /**
     * How many readers are parked on this file now.
     *
     * @return the parked count
     */
    public int parked() {
        try {
            int n = MemoryMappedFile.getIntVolatileAt(base + Layout.WAKE_PARKED_OFFSET);
            MemoryMappedFile.raiseFaultReports();
            return n;
        } catch (InternalError e) {
            fault(e);
            return 0;
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
            int freed = reclaimDead(false);
            MemoryMappedFile.raiseFaultReports();
            return Math.max(0, freed);
        } catch (InternalError e) {
            fault(e);
            return 0;
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
            if (nat && slot >= 0 && mem.channel() != null) {
                WakeProtocol.wakeRelease(base, mem.channel(), slot);
                MemoryMappedFile.raiseFaultReports();
            }
        } catch (InternalError e) {
            fault(e);
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
        return WakeLibrary.LOADED;
    }

    /**
     * The library file loaded, or why none was.
     *
     * @return a path, or the reason
     */
    public static String nativeLibrary() {
        return WakeLibrary.WHAT;
    }

    /**
     * The constants of {@code _wake.h} as the library was compiled (see {@link WakeLibrary#nativeConstants()}).
     *
     * @return the constants
     */
    public static long[] nativeConstants() {
        return WakeLibrary.nativeConstants();
    }

    /** What this class expects of the library: {@link #nativeConstants()}'s order. */
    public static long[] expectedConstants() {
        return WakeLibrary.expectedConstants();
    }

    // The system calls (wake_jni.c), called by WakeProtocol and WakeLibrary. None reads or writes the mapping from user space: a futex call on an address
    // past the end of a truncated file fails with EFAULT, where a load or store would fault.

    // FUTEX_WAIT on the futex word of the file at w while it holds v, at most ns (wake_wait_raw).
    static native void nFutexWait(long w, int v, long ns);

    // FUTEX_WAKE of every waiter on the futex word of the file at w; how many were woken, 0 on an error.
    static native int nFutexWake(long w);

    static native long nConstant(int i);
}
