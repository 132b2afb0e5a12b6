package io.mappedbuspy.internal;

import java.io.IOException;
import java.lang.ref.Reference;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.LockSupport;
import io.mappedbuspy.BusLockTimeoutException;
import io.mappedbuspy.BusTruncatedException;
import io.mappedbuspy.ConsumerInUseException;
import io.mappedbuspy.CorruptBusException;
import io.mappedbuspy.Layout;

/**
 * The consumer registry beside a bus ({@code PATH.consumers}, or {@code DIR/bus.consumers}; layout in {@link Layout}).
 * The protocol is {@code mappedbus_py/_core/_consumers.h}'s, ported step by step with the same memory orders (each step
 * names the C function it mirrors), through {@link MemoryMappedFile}'s Unsafe accessors as {@link WakeFile} ports
 * {@code _wake.h}. Liveness is {@link Liveness}'s: the structural lock and each held entry are OFD locks on one byte
 * (the lock word's first, the entry's first) taken through this instance's own channel, which the kernel drops when
 * the process dies (a SIGKILL, a zombie) and which any pid namespace sees. They need the JNI library; without it,
 * changes to the registry fail with an {@link IOException} saying so (entries are still read).
 *
 * <p>Structural changes (an entry made, removed, claimed, released, expired) run under the file's lock word
 * ({@link #locked}); a commit is the holder's one ordered 8-byte store ({@link ConsumerHold#commit}); readers of the registry
 * take no lock ({@link #entries()}: an entry is taken between two equal odd generations). A file truncated under the
 * mapping is a {@link BusTruncatedException}, never a crash: each step raises the JVM's late fault report itself.
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
 */
public final class ConsumerRegistry implements AutoCloseable {
    /** Bound on waiting for the registry's lock. */
    static final long LOCK_TIMEOUT_MS = 10_000;
    static final int PID = (int) ProcessHandle.current().pid();
    private static final System.Logger LOG = System.getLogger(ConsumerRegistry.class.getName());
    // Names held by readers of this process, as "dev:ino:name" of the registry: the file only knows the process.
    static final Set<String> HELD = ConcurrentHashMap.newKeySet();
    // Threads of this process take the lock word one at a time (they share its value).
    private static final Object JVM_LOCK = new Object();

    final String path;
    private final MemoryMappedFile mem;   // its channel is this instance's description: its holds and probes
    final Object keep;              // the buffers that keep the mapping alive (accessed by address)
    private final long base;
    private boolean closed;

    private ConsumerRegistry(String path, MemoryMappedFile mem) {
        this.path = path;
        this.mem = mem;
        this.keep = mem.mapping();
        this.base = mem.baseAddress();
    }

    /**
     * Opens and maps a registry as bus files are opened (never through a link, a regular file, owner and mode checked
     * unless {@code allowForeign}); a short one is grown with zeros, a new one (if {@code create}) made all zero with
     * {@code perms}, then given its magic and version. {@code readOnly} maps it read-only and writes nothing (an
     * all-zero file is an empty registry): for {@link #entries()} only.
     *
     * @throws java.nio.file.NoSuchFileException if absent and not {@code create}
     * @throws CorruptBusException               if the file holds something else (its magic or version), or is
     *                                           shorter than a registry ({@code readOnly})
     */
    public static ConsumerRegistry open(Path file, boolean allowForeign, String perms, boolean create, boolean readOnly)
            throws IOException {
        if (readOnly) {
            long size = Files.size(file); // NoSuchFileException when absent
            if (size < Layout.CONSUMERS_FILE_SIZE) {
                throw new CorruptBusException(file + " is not a consumer registry: it is " + size + " bytes, not "
                        + Layout.CONSUMERS_FILE_SIZE + " (truncated?)");
            }
        } else if (!create) {
            Files.readAttributes(file, "unix:ino", java.nio.file.LinkOption.NOFOLLOW_LINKS); // NoSuchFileException
        }
        MemoryMappedFile.OpenOptions o = new MemoryMappedFile.OpenOptions();
        // Whoever may write sizes a short file (a first opener killed before it did) under the open lock.
        o.create = !readOnly;
        o.lockOffset = Layout.CONSUMERS_OPEN_LOCK_OFFSET; // a whole-file lock would wait on the holders' locks
        o.readOnly = readOnly;
        o.allowShort = readOnly;
        o.grow = !readOnly;
        o.exclusive = !readOnly;
        o.allowForeign = allowForeign;
        o.perms = perms;
        o.afterMap = f -> {
            int rc;
            try {
                rc = readOnly ? check(f) : init(f);
                MemoryMappedFile.raiseFaultReports();
            } catch (InternalError e) {
                if (!MemoryMappedFile.isMappingFault(e)) {
                    throw e;
                }
                throw new java.io.IOException(file + " was truncated while being opened", e);
            }
            if (rc != 0) {
                throw new CorruptBusException(file + " is not a consumer registry: " + (rc == -1
                        ? "its magic is not a registry's (\"MBUSCON1\")" : "its version is "
                        + f.getIntAcquire(Layout.CONSUMERS_VERSION_OFFSET) + ", this reads " + Layout.CONSUMERS_VERSION
                        + " (an older one is of a release that told holders by pid)"));
            }
        };
        return new ConsumerRegistry(file.toString(), MemoryMappedFile.open(file.toString(), Layout.CONSUMERS_FILE_SIZE, o));
    }

    // ---- what readers of the registry and a reader's consumer use ----

    /**
     * Whether a registry file is shorter than a registry and all zero: one whose first opener died before sizing it,
     * an empty registry to a reader (anything else short is corrupt).
     */
    public static boolean shortAndEmpty(Path file) throws IOException {
        if (Files.size(file) >= Layout.CONSUMERS_FILE_SIZE) {
            return false;
        }
        for (byte b : Files.readAllBytes(file)) {
            if (b != 0) {
                return false;
            }
        }
        return true;
    }

    /**
     * Every entry in use, lock-free: each taken only when its generation is the same odd value before and after.
     *
     * @throws BusTruncatedException if the file was truncated under the mapping
     */
    public List<ConsumerEntry> entries() {
        mem.checkLength();
        List<ConsumerEntry> out = new ArrayList<>();
        try {
            for (int i = 0; i < Layout.CONSUMER_ENTRY_COUNT; i++) {
                ConsumerEntry e = read(i);
                if (e != null) {
                    out.add(e);
                }
            }
            MemoryMappedFile.raiseFaultReports();
        } catch (InternalError x) {
            throw fault(x);
        } finally {
            Reference.reachabilityFence(keep);
        }
        return out;
    }

    private ConsumerEntry read(int i) {
        long e = entry(i);
        for (int attempt = 0; attempt < 16; attempt++) {
            int gen = MemoryMappedFile.getIntVolatileAt(e + Layout.CONSUMER_GEN_OFFSET);
            if ((gen & 1) == 0) {
                return null;
            }
            int flags = MemoryMappedFile.getIntVolatileAt(e + Layout.CONSUMER_FLAGS_OFFSET);
            int pid = MemoryMappedFile.getIntVolatileAt(e + Layout.CONSUMER_PID_OFFSET);
            long start = MemoryMappedFile.getLongVolatileAt(e + Layout.CONSUMER_START_OFFSET);
            long position = MemoryMappedFile.getLongVolatileAt(e + Layout.CONSUMER_POSITION_OFFSET);
            long committed = MemoryMappedFile.getLongVolatileAt(e + Layout.CONSUMER_COMMITTED_NS_OFFSET);
            long created = MemoryMappedFile.getLongVolatileAt(e + Layout.CONSUMER_CREATED_NS_OFFSET);
            byte[] id = new byte[Layout.CONSUMER_BUS_ID_SIZE];
            mem.getBytes(offset(i) + Layout.CONSUMER_BUS_ID_OFFSET, id, 0, id.length);
            byte[] n = new byte[Layout.CONSUMER_NAME_MAX];
            mem.getBytes(offset(i) + Layout.CONSUMER_NAME_OFFSET, n, 0, n.length);
            if (MemoryMappedFile.getIntVolatileAt(e + Layout.CONSUMER_GEN_OFFSET) == gen) {
                int len = 0;
                while (len < n.length && n[len] != 0) {
                    len++;
                }
                return new ConsumerEntry(i, gen, flags, pid, start, position, committed, created, id,
                        new String(n, 0, len, StandardCharsets.UTF_8), pid == 0 ? Liveness.DEAD : holder(i));
            }
        }
        return null; // made and removed over and over meanwhile: not there for this look
    }

    /** A step run under the lock. */
    interface Step<T> {
        T run() throws IOException;
    }

    /**
     * Runs {@code step} under the registry's lock word (and this process's monitor: its threads share the word).
     *
     * @throws BusLockTimeoutException if another live process held the lock for {@link #LOCK_TIMEOUT_MS}
     * @throws BusTruncatedException   if the file was truncated under the mapping
     */
    <T> T locked(Step<T> step) throws IOException {
        synchronized (JVM_LOCK) {
            if (closed) {
                throw new IllegalStateException("consumer registry " + path + " is closed");
            }
            mem.checkLength();
            int rc;
            try {
                rc = lock(LOCK_TIMEOUT_MS * 1_000_000L);
                MemoryMappedFile.raiseFaultReports();
            } catch (InternalError e) {
                throw fault(e);
            }
            if (rc == 1) {
                int holder = (int) mem.getLongAcquire(Layout.CONSUMERS_LOCK_OFFSET);
                throw new BusLockTimeoutException(path + ": a live process (pid " + holder + " where it runs) held the "
                        + "consumer registry's lock for longer than " + LOCK_TIMEOUT_MS + " ms", holder);
            }
            if (rc != 0) {
                throw new IOException(path + ": no OFD lock can be taken on the consumer registry (" + (Liveness
                        .available() ? "a file system without them?" : "the JNI library is not loaded: "
                        + WakeFile.nativeLibrary()) + ")");
            }
            try {
                T v = step.run();
                MemoryMappedFile.raiseFaultReports();
                return v;
            } catch (InternalError e) {
                throw fault(e);
            } finally {
                try {
                    unlock();
                    MemoryMappedFile.raiseFaultReports();
                } catch (InternalError e) {
                    if (!MemoryMappedFile.isMappingFault(e)) {
                        throw e;
                    }
                }
                Reference.reachabilityFence(keep);
            }
        }
    }

    /**
     * Opens consumer {@code name} for this process (docs/files-and-rolling.md, "Open by name"): found, or made at
     * {@code start}; a name of another bus id is made anew (logged); a second live holder is refused.
     *
     * @param busIdHex the bus's id (32 hex digits), or null for a file without metadata
     * @throws ConsumerInUseException if another live process, or another reader of this one, holds it
     */
    public ConsumerHold acquire(String name, String busIdHex, long start) throws IOException {
        byte[] n = ConsumerEntry.nameBytes(name);
        byte[] id = ConsumerEntry.busIdBytes(busIdHex);
        String key = mem.device() + ":" + mem.inode() + ":" + name;
        return locked(() -> {
            int i = find(n);
            if (i >= 0) {
                byte[] had = new byte[Layout.CONSUMER_BUS_ID_SIZE];
                mem.getBytes(offset(i) + Layout.CONSUMER_BUS_ID_OFFSET, had, 0, had.length);
                if (!Arrays.equals(had, id)) {
                    if (holder(i) == Liveness.ALIVE) {
                        int other = pidOf(i);
                        throw new ConsumerInUseException("consumer '" + name + "' of " + path + " (of another bus, "
                                + "since deleted and recreated) is held by pid " + other + " (a live process)", other);
                    }
                    LOG.log(System.Logger.Level.WARNING, "mappedbus: consumer '" + name + "' of " + path
                            + " belonged to another bus (deleted and recreated since): made anew at " + start);
                    remove(i);
                    i = -1;
                }
            }
            if (i < 0) {
                i = make(n, id, start, ConsumerEntry.nowNs());
                if (i < 0) {
                    throw new IOException(path + ": no free entry for consumer '" + name + "': all "
                            + Layout.CONSUMER_ENTRY_COUNT + " are in use (Consumers.removeConsumer frees one)");
                }
            } else {
                if (HELD.contains(key)) {
                    throw new ConsumerInUseException("consumer '" + name + "' of " + path + " is held by another "
                            + "reader of this process (pid " + PID + "): one holder per name", PID);
                }
            }
            Liveness.Hold h = claim(i, PID);
            if (h == Liveness.Hold.BUSY) {
                int other = pidOf(i);
                throw new ConsumerInUseException("consumer '" + name + "' of " + path + " is held by pid "
                        + other + " (a live process): one holder per name", other);
            }
            if (h != Liveness.Hold.TAKEN) {
                throw new IOException(path + ": no OFD lock can be taken on the consumer registry's entry");
            }
            HELD.add(key);
            return new ConsumerHold(this, name, i, key);
        });
    }

    /**
     * The entry {@code name} of this bus, made at {@code position} if absent, claimed by nobody
     * ({@code ensure_shared} of _consumers.pyx): a work group's ({@code group:NAME}, {@link GroupHold}), whose members
     * commit its position in turn. An entry of the name left by another bus id is replaced unless a live process
     * holds it.
     *
     * @return its index
     * @throws ConsumerInUseException if a live process holds an entry of the name of another bus
     */
    public int ensureShared(String name, String busIdHex, long position) throws IOException {
        byte[] n = ConsumerEntry.nameBytes(name);
        byte[] id = ConsumerEntry.busIdBytes(busIdHex);
        return locked(() -> {
            int i = find(n);
            if (i >= 0) {
                byte[] had = new byte[Layout.CONSUMER_BUS_ID_SIZE];
                mem.getBytes(offset(i) + Layout.CONSUMER_BUS_ID_OFFSET, had, 0, had.length);
                if (!Arrays.equals(had, id)) {
                    if (holder(i) == Liveness.ALIVE) {
                        int other = pidOf(i);
                        throw new ConsumerInUseException("'" + name + "' of " + path + " (of another bus, "
                                + HexFormat.of().formatHex(had) + ") is held by live process " + other, other);
                    }
                    remove(i);
                    i = -1;
                }
            }
            if (i < 0) {
                i = make(n, id, position, ConsumerEntry.nowNs());
                if (i < 0) {
                    throw new IOException(path + ": all " + Layout.CONSUMER_ENTRY_COUNT + " consumer entries are "
                            + "in use (Consumers.removeConsumer frees one)");
                }
            }
            return i;
        });
    }

    /** Whether entry {@code i} is (still) the in-use entry named {@code name} ({@code is_entry}). */
    public boolean isEntry(int i, String name) {
        if (closed || i < 0 || i >= Layout.CONSUMER_ENTRY_COUNT) {
            return false;
        }
        byte[] n = ConsumerEntry.nameBytes(name);
        try {
            boolean same = inUse(i) && find(n) == i;
            MemoryMappedFile.raiseFaultReports();
            return same;
        } catch (InternalError e) {
            throw fault(e);
        } finally {
            Reference.reachabilityFence(keep);
        }
    }

    /** Commits {@code position} to entry {@code i}, held by nobody ({@code consumer_commit}): a shared entry's. */
    public void commitShared(int i, long position) {
        try {
            ConsumerHold.store(entry(i), position, ConsumerEntry.nowNs());
            MemoryMappedFile.raiseFaultReports();
        } catch (InternalError e) {
            throw fault(e);
        } finally {
            Reference.reachabilityFence(keep);
        }
    }

    /**
     * Removes consumer {@code name}; one with a live holder is refused.
     *
     * @throws java.util.NoSuchElementException if there is no such consumer
     * @throws ConsumerInUseException           if a live process (this one included) holds it
     */
    public void removeConsumer(String name) throws IOException {
        byte[] n = ConsumerEntry.nameBytes(name);
        locked(() -> {
            int i = find(n);
            if (i < 0) {
                throw new java.util.NoSuchElementException("no consumer '" + name + "' in " + path);
            }
            if (holder(i) == Liveness.ALIVE) {
                int holder = pidOf(i);
                throw new ConsumerInUseException("consumer '" + name + "' of " + path + " is held by pid " + holder
                        + " (a live process): close its reader first", holder);
            }
            remove(i);
            return null;
        });
    }

    /** A writer's retention: flags entry {@code e} expired, if it is still the same entry. */
    void expire(ConsumerEntry e) throws IOException {
        locked(() -> {
            if (MemoryMappedFile.getIntVolatileAt(entry(e.index) + Layout.CONSUMER_GEN_OFFSET) == e.gen) {
                expire(e.index);
                LOG.log(System.Logger.Level.INFO, "mappedbus: consumer '" + e.name + "' of " + path + " expired at "
                        + "position " + e.position + ": it lagged more than max_consumer_lag segments");
            }
            return null;
        });
    }


    /** Closes the file; the mapping goes with this instance (garbage collected). Idempotent. */
    @Override
    public void close() {
        synchronized (JVM_LOCK) {
            if (!closed) {
                closed = true;
                mem.close();
            }
        }
    }


    /**
     * Releases entry {@code i} held through this instance: no lock needed, the pid is cleared before the byte goes,
     * and nobody else takes the entry while this description holds it.
     */
    void release(int i) throws IOException {
        synchronized (JVM_LOCK) {
            if (closed) {
                return;
            }
            try {
                releaseEntry(i);
                MemoryMappedFile.raiseFaultReports();
            } catch (InternalError e) {
                throw fault(e);
            } finally {
                Reference.reachabilityFence(keep);
            }
        }
    }

    /** @throws BusTruncatedException if the file is now shorter than the mapping */
    void checkLength() {
        mem.checkLength();
    }

    // A fault report raised in a step: the file was truncated under the mapping. Anything else is not ours.
    BusTruncatedException fault(InternalError e) {
        if (!MemoryMappedFile.isMappingFault(e)) {
            throw e;
        }
        return new BusTruncatedException(path + " (a consumer registry) was truncated under its mapping", e);
    }

    // ---- the protocol: _consumers.h, step by step ----
    //
    // Memory orders as in WakeFile: an acquire load is a volatile load, a release store of an int64 is putOrderedLong
    // (putLongReleaseAt), of an int32 setIntRelease; compare-and-swap is seq-cst.

    long entry(int i) {
        return base + offset(i);
    }

    private static long offset(int i) {
        return Layout.CONSUMERS_ENTRIES_OFFSET + (long) i * Layout.CONSUMER_ENTRY_SIZE;
    }

    // consumers_init: magic and version set by compare-and-swap from 0. 0, or -1 (magic) / -2 (version).
    private static int init(MemoryMappedFile f) {
        if (!f.compareAndSetLong(Layout.CONSUMERS_MAGIC_OFFSET, 0, Layout.CONSUMERS_MAGIC)
                && f.getLongAcquire(Layout.CONSUMERS_MAGIC_OFFSET) != Layout.CONSUMERS_MAGIC) {
            return -1;
        }
        if (!f.compareAndSetInt(Layout.CONSUMERS_VERSION_OFFSET, 0, Layout.CONSUMERS_VERSION)
                && f.getIntAcquire(Layout.CONSUMERS_VERSION_OFFSET) != Layout.CONSUMERS_VERSION) {
            return -2;
        }
        return 0;
    }

    // consumers_init without writing: 0 if the magic and version are a registry's or still zero, else -1 / -2.
    private static int check(MemoryMappedFile f) {
        long magic = f.getLongAcquire(Layout.CONSUMERS_MAGIC_OFFSET);
        if (magic != 0 && magic != Layout.CONSUMERS_MAGIC) {
            return -1;
        }
        int version = f.getIntAcquire(Layout.CONSUMERS_VERSION_OFFSET);
        return version != 0 && version != Layout.CONSUMERS_VERSION ? -2 : 0;
    }

    // consumer_entry_byte: entry i's liveness byte (its first).
    private static long entryByte(int i) {
        return offset(i);
    }

    // consumers_lock: the OFD lock on the lock word's first byte through this instance's channel, taken without
    // blocking and retried every 20 us for at most timeoutNs (a holder that dies lets go at once); the word then shows
    // this pid (store_release_i64). 0 once held, 1 if a live holder kept it, -1 if no lock can be taken.
    private int lock(long timeoutNs) {
        long deadline = System.nanoTime() + timeoutNs;
        for (;;) {
            Liveness.Hold h = Liveness.hold(mem.channel(), Layout.CONSUMERS_LOCK_OFFSET);
            if (h == Liveness.Hold.TAKEN) {
                MemoryMappedFile.putLongReleaseAt(base + Layout.CONSUMERS_LOCK_OFFSET, PID & 0xFFFFFFFFL);
                return 0;
            }
            if (h != Liveness.Hold.BUSY) {
                return -1;
            }
            if (System.nanoTime() - deadline >= 0) {
                return 1;
            }
            LockSupport.parkNanos(20_000);
            MemoryMappedFile.raiseFaultReports();
        }
    }

    // consumers_unlock: the word cleared, then the byte let go.
    private void unlock() {
        MemoryMappedFile.putLongReleaseAt(base + Layout.CONSUMERS_LOCK_OFFSET, 0);
        Liveness.release(mem.channel(), Layout.CONSUMERS_LOCK_OFFSET);
    }

    // consumer_holder: whether another description than this instance's holds entry i.
    private Liveness holder(int i) {
        FileChannel ch = mem.channel();
        return ch == null ? Liveness.UNKNOWN : Liveness.probe(ch, entryByte(i));
    }

    // The pid entry i shows (for people: where its holder runs, perhaps another pid namespace).
    private int pidOf(int i) {
        return MemoryMappedFile.getIntVolatileAt(entry(i) + Layout.CONSUMER_PID_OFFSET);
    }

    // consumer_in_use: the generation is odd (load_acquire_i32).
    private boolean inUse(int i) {
        return (MemoryMappedFile.getIntVolatileAt(entry(i) + Layout.CONSUMER_GEN_OFFSET) & 1) != 0;
    }

    // consumers_find: the entry named `name`, or -1.
    private int find(byte[] name) {
        byte[] n = new byte[Layout.CONSUMER_NAME_MAX];
        int len = name.length;
        for (int i = 0; i < Layout.CONSUMER_ENTRY_COUNT; i++) {
            if (!inUse(i)) {
                continue;
            }
            mem.getBytes(offset(i) + Layout.CONSUMER_NAME_OFFSET, n, 0, n.length);
            if (Arrays.equals(n, 0, len, name, 0, len) && (len == Layout.CONSUMER_NAME_MAX || n[len] == 0)) {
                return i;
            }
        }
        return -1;
    }

    // consumers_make: under the lock, an entry (no holder, not expired) at `position`; its index or -1. The fields are
    // written while the generation is even (nobody reads them), then the generation is published odd.
    private int make(byte[] name, byte[] busId, long position, long nowNs) {
        for (int i = 0; i < Layout.CONSUMER_ENTRY_COUNT; i++) {
            long e = entry(i);
            long o = offset(i);
            int gen = MemoryMappedFile.getIntVolatileAt(e + Layout.CONSUMER_GEN_OFFSET);  // load_acquire_i32
            if ((gen & 1) != 0 || holder(i) == Liveness.ALIVE) { // still held: a name removed by force
                continue;
            }
            mem.setIntRelease(o + Layout.CONSUMER_FLAGS_OFFSET, 0);
            mem.setIntRelease(o + Layout.CONSUMER_PID_OFFSET, 0);
            MemoryMappedFile.putLongReleaseAt(e + Layout.CONSUMER_START_OFFSET, 0);
            MemoryMappedFile.putLongReleaseAt(e + Layout.CONSUMER_POSITION_OFFSET, position);
            MemoryMappedFile.putLongReleaseAt(e + Layout.CONSUMER_COMMITTED_NS_OFFSET, nowNs);
            MemoryMappedFile.putLongReleaseAt(e + Layout.CONSUMER_CREATED_NS_OFFSET, nowNs);
            mem.putBytes(o + Layout.CONSUMER_BUS_ID_OFFSET, busId, 0, Layout.CONSUMER_BUS_ID_SIZE);
            mem.putBytes(o + Layout.CONSUMER_NAME_OFFSET, new byte[Layout.CONSUMER_NAME_MAX], 0, Layout.CONSUMER_NAME_MAX);
            mem.putBytes(o + Layout.CONSUMER_NAME_OFFSET, name, 0, name.length);
            mem.setIntRelease(o + Layout.CONSUMER_GEN_OFFSET, gen + 1);                  // store_release_i32
            return i;
        }
        return -1;
    }

    // consumers_remove: under the lock, entry i goes (the generation even first: lock-free readers drop it).
    private void remove(int i) {
        long e = entry(i);
        long o = offset(i);
        int gen = MemoryMappedFile.getIntVolatileAt(e + Layout.CONSUMER_GEN_OFFSET);
        if ((gen & 1) == 0) {
            return;
        }
        mem.setIntRelease(o + Layout.CONSUMER_GEN_OFFSET, gen + 1);
        mem.setIntRelease(o + Layout.CONSUMER_PID_OFFSET, 0);
        MemoryMappedFile.putLongReleaseAt(e + Layout.CONSUMER_START_OFFSET, 0);
        int n = Layout.CONSUMER_BUS_ID_SIZE + Layout.CONSUMER_NAME_MAX;
        mem.putBytes(o + Layout.CONSUMER_BUS_ID_OFFSET, new byte[n], 0, n);
    }

    // consumer_claim: under the lock, entry i taken through this instance's channel (Liveness.hold of its byte): TAKEN
    // (then it shows the time and the pid, the time first), BUSY if a live holder has it, UNKNOWN without locks.
    private Liveness.Hold claim(int i, int pid) {
        Liveness.Hold h = Liveness.hold(mem.channel(), entryByte(i));
        if (h == Liveness.Hold.TAKEN) {
            MemoryMappedFile.putLongReleaseAt(entry(i) + Layout.CONSUMER_START_OFFSET, ConsumerEntry.nowNs());
            mem.setIntRelease(offset(i) + Layout.CONSUMER_PID_OFFSET, pid);
        }
        return h;
    }

    // consumer_release: entry i held by nobody: the pid and time cleared, then the byte let go.
    private void releaseEntry(int i) {
        mem.setIntRelease(offset(i) + Layout.CONSUMER_PID_OFFSET, 0);
        MemoryMappedFile.putLongReleaseAt(entry(i) + Layout.CONSUMER_START_OFFSET, 0);
        Liveness.release(mem.channel(), entryByte(i));
    }

    // consumer_expire: under the lock, the expired bit set by compare-and-swap.
    private void expire(int i) {
        long f = entry(i) + Layout.CONSUMER_FLAGS_OFFSET;
        int cur = MemoryMappedFile.getIntVolatileAt(f);
        while ((cur & Layout.CONSUMER_FLAG_EXPIRED) == 0) {
            if (MemoryMappedFile.compareAndSetIntAt(f, cur, cur | Layout.CONSUMER_FLAG_EXPIRED)) {
                break;
            }
            cur = MemoryMappedFile.getIntVolatileAt(f);
        }
    }
}
