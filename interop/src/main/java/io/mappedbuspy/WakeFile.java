package io.mappedbuspy;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.invoke.VarHandle;
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
 * {@link Layout}): readers park on it, writers wake them. The protocol is {@code mappedbus_py/_wake.h}'s, ported
 * here statement by statement with the same memory orders (each step names the C function it mirrors): every
 * access to the file goes through {@link MemoryMappedFile}'s Unsafe accessors, and the JNI library
 * {@value #LIBRARY_NAME} ({@code interop/native/wake_jni.c}) only makes the system calls: FUTEX_WAIT and FUTEX_WAKE
 * on the futex word's address, {@code kill(pid, 0)} and the read of {@code /proc/PID/stat}.
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
    // A writer's look (wakeNeeded) is one load, with no raiseFaultReports of its own (a call into the VM: more than
    // a write costs): one look in LOOK_CHECK_MASK + 1 raises a report the JVM may still hold from a look that
    // faulted and checks the file's length, so that a file truncated under a writer is no longer looked at even
    // if the reports of its looks were raised elsewhere.
    private static final int LOOK_CHECK_MASK = 4095;
    private static final System.Logger LOG = System.getLogger(WakeFile.class.getName());
    private static final int PID = (int) ProcessHandle.current().pid();
    // Paths whose wake file could not be opened, logged once each.
    private static final Set<String> WARNED = ConcurrentHashMap.newKeySet();

    // _wake.h's WAKE_STATE_IDLE and WAKE_STATE_PARKED: a slot's state.
    private static final int STATE_IDLE = 0;
    private static final int STATE_PARKED = 1;

    // A page of zeros standing in for a wake file that could not be opened (or went bad): nobody is ever parked
    // on it and nothing writes to it, so wakeNeeded() stays one load with no branch of its own.
    private static final ByteBuffer ZEROS = ByteBuffer.allocateDirect(Layout.WAKE_FILE_SIZE);
    private static final long ZEROS_ADDRESS = MemoryMappedFile.addressOf(ZEROS);
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
            int rc;
            try {
                rc = wakeInit(f);
                MemoryMappedFile.raiseFaultReports();
            } catch (InternalError e) {
                if (!MemoryMappedFile.isMappingFault(e)) {
                    throw e;
                }
                throw new IOException(file + " was truncated while being opened", e);
            }
            if (rc != 0) {
                throw new CorruptBusException(file + " is not a bus wake file: " + (rc == -1
                        ? "its magic is not a wake file's" : rc == -2 ? "its version is unknown"
                        : "its parked count is impossible"));
            }
        };
        return new WakeFile(file.toString(), MemoryMappedFile.open(file.toString(), Layout.WAKE_FILE_SIZE, o), nat);
    }

    // wake_init: the magic and the version set by compare-and-swap from 0 (seq-cst; a failed swap loads the value
    // it found, as cas_i64/cas_i32 return it), then the parked count checked. 0, or -1/-2/-3 as in C.
    private static int wakeInit(MemoryMappedFile f) {
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
    void wakeIfNeeded() {
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
            if (wakeAll(base) == 0) {
                if (++futile >= FUTILE_RECLAIM) {
                    futile = 0;
                    wakeReclaim(base, PID, true);
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
                int claimed = wakeClaim(base, PID, nProcStart(PID));
                MemoryMappedFile.raiseFaultReports(); // before the slot is used
                slot = claimed;
                if (slot < 0) {
                    claimFailedNs = now; // all slots taken: poll, and try again in a second
                    return 0;
                }
            }
            if (now - reclaimedNs > RECLAIM_EVERY_NS) {
                reclaimedNs = now;
                wakeReclaim(base, PID, true);
            }
            int v = wakePrepare(base, slot);
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
    boolean await(int v, long ns) {
        if (!registered) {
            LockSupport.parkNanos(ns);
            return false;
        }
        try {
            wakeWait(base, v, ns);
            boolean woken = wakeSeq(base) != v; // the wake word moved: wake_backoff_after's `woken`
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
    void done() {
        if (registered) {
            registered = false;
            try {
                wakeDone(base, slot);
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
    void check() {
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
            int freed = wakeReclaim(base, PID, false);
            MemoryMappedFile.raiseFaultReports();
            return freed;
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
            if (nat && slot >= 0) {
                wakeRelease(base, slot, PID);
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

    // ---- the protocol: _wake.h, statement by statement ----
    //
    // Each takes the address w of the mapped file (or of ZEROS), as the C functions take its char *. The memory
    // orders are _atomic.h's: its seq-cst compare-and-swap, fetch-add, exchange, load and store are Unsafe's
    // compareAndSwapInt, getAndAddInt, getAndSetInt, getIntVolatile and putIntVolatile (all sequentially
    // consistent); an acquire load is a volatile load (as strong); a release store is putOrderedLong (release).
    // Nothing here checks for a fault: the public steps above raise its report (raiseFaultReports) before they
    // use what came of it, and then stop using the file.

    // wake_slot: the address of slot i.
    private static long wakeSlot(long w, int i) {
        return w + Layout.WAKE_SLOTS_OFFSET + (long) i * Layout.WAKE_SLOT_SIZE;
    }

    // wake_alive: false if the process is gone (kill(pid, 0) fails with ESRCH), or if its start time is known
    // (start > 0) and /proc/PID/stat now gives another (the pid was reused).
    private static boolean wakeAlive(int pid, long start) {
        if (nNoSuchProcess(pid) != 0) {
            return false;
        }
        if (start > 0) {
            long now = nProcStart(pid);
            if (now >= 0 && now != start) {
                return false; // the pid was reused
            }
        }
        return true;
    }

    // wake_done: undo a parked slot, state 1 -> 0 (cas_i32), then parked -= 1 (fetch_add_i32). Exactly one caller
    // wins.
    private static void wakeDone(long w, int i) {
        if (MemoryMappedFile.compareAndSetIntAt(wakeSlot(w, i) + Layout.WAKE_SLOT_STATE_OFFSET, STATE_PARKED,
                STATE_IDLE)) {
            MemoryMappedFile.getAndAddIntAt(w + Layout.WAKE_PARKED_OFFSET, -1);
        }
    }

    // wake_reclaim: slots of processes that are gone, parked ones undone, all freed. parkedOnly looks only at
    // parked slots and asks only kill(). Returns how many slots it freed.
    private static int wakeReclaim(long w, int selfPid, boolean parkedOnly) {
        int freed = 0;
        for (int i = 0; i < Layout.WAKE_SLOT_COUNT; i++) {
            long s = wakeSlot(w, i);
            int pid = MemoryMappedFile.getIntVolatileAt(s + Layout.WAKE_SLOT_PID_OFFSET); // load_acquire_i32
            if (pid <= 0 || pid == selfPid) {
                continue;
            }
            if (parkedOnly && MemoryMappedFile.getIntVolatileAt(s + Layout.WAKE_SLOT_STATE_OFFSET) // load_acquire_i32
                    != STATE_PARKED) {
                continue;
            }
            long start = parkedOnly ? 0                                                           // load_acquire_i64
                    : MemoryMappedFile.getLongVolatileAt(s + Layout.WAKE_SLOT_START_OFFSET);
            if (wakeAlive(pid, start)) {
                continue;
            }
            wakeDone(w, i);
            if (MemoryMappedFile.compareAndSetIntAt(s + Layout.WAKE_SLOT_PID_OFFSET, pid, 0)) { // cas_i32
                freed++;
            }
        }
        return freed;
    }

    // wake_claim: a slot for this process (pid, start), or -1 if all are taken (after one reclaim that freed some).
    private static int wakeClaim(long w, int pid, long start) {
        for (int pass = 0; pass < 2; pass++) {
            for (int i = 0; i < Layout.WAKE_SLOT_COUNT; i++) {
                long s = wakeSlot(w, i);
                if (MemoryMappedFile.getIntVolatileAt(s + Layout.WAKE_SLOT_PID_OFFSET) != 0) { // load_acquire_i32
                    continue;
                }
                if (MemoryMappedFile.compareAndSetIntAt(s + Layout.WAKE_SLOT_PID_OFFSET, 0, pid)) { // cas_i32
                    MemoryMappedFile.putLongReleaseAt(s + Layout.WAKE_SLOT_START_OFFSET, start); // store_release_i64
                    return i;
                }
            }
            if (wakeReclaim(w, pid, false) == 0) {
                break;
            }
        }
        return -1;
    }

    // wake_release: undo a park left open, clear the start time (store_release_i64), free the slot if still ours
    // (cas_i32).
    private static void wakeRelease(long w, int i, int pid) {
        long s = wakeSlot(w, i);
        wakeDone(w, i);
        MemoryMappedFile.putLongReleaseAt(s + Layout.WAKE_SLOT_START_OFFSET, 0);
        MemoryMappedFile.compareAndSetIntAt(s + Layout.WAKE_SLOT_PID_OFFSET, pid, 0);
    }

    // wake_prepare: register as parked, returning the seq value to wait on. state 0 -> 1 (cas_i32) and if so
    // parked += 1 (fetch_add_i32); armed = 1 (store_seq_cst_i32); a full fence (fence_seq_cst), which orders the
    // caller's look at the bus after the registration; seq (load_acquire_i32).
    private static int wakePrepare(long w, int i) {
        if (MemoryMappedFile.compareAndSetIntAt(wakeSlot(w, i) + Layout.WAKE_SLOT_STATE_OFFSET, STATE_IDLE,
                STATE_PARKED)) {
            MemoryMappedFile.getAndAddIntAt(w + Layout.WAKE_PARKED_OFFSET, 1);
        }
        MemoryMappedFile.putIntVolatileAt(w + Layout.WAKE_ARMED_OFFSET, 1);
        VarHandle.fullFence();
        return MemoryMappedFile.getIntVolatileAt(w + Layout.WAKE_SEQ_OFFSET);
    }

    // wake_seq: the futex word (load_acquire_i32), as the same 32 bits.
    private static int wakeSeq(long w) {
        return MemoryMappedFile.getIntVolatileAt(w + Layout.WAKE_SEQ_OFFSET);
    }

    // wake_wait: a parker's sleep, after wakePrepare and its look at the bus. If a writer took the arming meanwhile
    // (armed is 0: load_seq_cst_i32), return at once: its wake may be for a record the look missed, bumped before
    // v; the caller looks and parks again. Otherwise FUTEX_WAIT while seq holds v, at most ns (wake_wait_raw).
    private static void wakeWait(long w, int v, long ns) {
        if (MemoryMappedFile.getIntVolatileAt(w + Layout.WAKE_ARMED_OFFSET) == 0) {
            return;
        }
        nFutexWait(w, v, ns);
    }

    // wake_bump: seq += 1 (fetch_add_i32), then FUTEX_WAKE every waiter on it; how many the kernel woke (0 on an
    // error, as a truncated page's EFAULT).
    private static int wakeBump(long w) {
        MemoryMappedFile.getAndAddIntAt(w + Layout.WAKE_SEQ_OFFSET, 1);
        return nFutexWake(w);
    }

    // wake_all: a writer's wake after wakeNeeded said armed. -1 if another writer took the arming first
    // (exchange_i32 armed 1 -> 0 found 0: its wake serves us), else how many the kernel woke.
    private static int wakeAll(long w) {
        if (MemoryMappedFile.getAndSetIntAt(w + Layout.WAKE_ARMED_OFFSET, 0) == 0) {
            return -1;
        }
        return wakeBump(w);
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
                boolean opened = false;
                try {
                    System.load(p.toAbsolutePath().toString());
                    opened = true;
                    if (java.util.Arrays.equals(nativeConstants(), expectedConstants())) {
                        // Each function bound now (JNI binds at the first call): a library from before the
                        // protocol moved to Java lacks these, and must not fail a reader's park later.
                        nNoSuchProcess(PID);
                        nFutexWake(ZEROS_ADDRESS); // nobody waits on the page of zeros
                        nFutexWait(ZEROS_ADDRESS, 1, 0); // it does not hold 1: returns at once
                        nProcStart(PID);
                        ok = true;
                        loaded = p.toAbsolutePath().toString();
                    } else {
                        why.append(why.length() == 0 ? "" : "; ").append(p)
                                .append(": built from another _wake.h (its constants differ from Layout's)");
                    }
                } catch (UnsatisfiedLinkError | SecurityException e) {
                    why.append(why.length() == 0 ? "" : "; ").append(p).append(": ").append(e.getMessage())
                            .append(opened ? " (built from another wake_jni.c: interop/build_native.sh rebuilds it)"
                                    : "");
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

    // The system calls (wake_jni.c). None reads or writes the mapping from user space: a futex call on an address
    // past the end of a truncated file fails with EFAULT, where a load or store would fault.

    // FUTEX_WAIT on the futex word of the file at w while it holds v, at most ns (wake_wait_raw).
    private static native void nFutexWait(long w, int v, long ns);

    // FUTEX_WAKE of every waiter on the futex word of the file at w; how many were woken, 0 on an error.
    private static native int nFutexWake(long w);

    // 1 if kill(pid, 0) fails with ESRCH: no such process.
    private static native int nNoSuchProcess(int pid);

    // wake_proc_start: the start time of process pid (clock ticks since boot), or -1 if there is none.
    private static native long nProcStart(int pid);

    private static native long nConstant(int i);
}
