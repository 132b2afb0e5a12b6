package io.mappedbuspy;

import java.io.IOException;
import java.lang.ref.Reference;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.LockSupport;

/**
 * The consumer registry beside a bus ({@code PATH.consumers}, or {@code DIR/bus.consumers}; layout in {@link Layout}).
 * The protocol is {@code mappedbus_py/_core/_consumers.h}'s, ported step by step with the same memory orders (each step
 * names the C function it mirrors), through {@link MemoryMappedFile}'s Unsafe accessors as {@link WakeFile} ports
 * {@code _wake.h}. Liveness (a holder's pid and its start time, /proc/PID/stat field 22) is pure Java here: no JNI.
 *
 * <p>Structural changes (an entry made, removed, claimed, released, expired) run under the file's lock word
 * ({@link #locked}); a commit is the holder's one ordered 8-byte store ({@link ConsumerHold#commit}); readers of the registry
 * take no lock ({@link #entries()}: an entry is taken between two equal odd generations). A file truncated under the
 * mapping is a {@link BusTruncatedException}, never a crash: each step raises the JVM's late fault report itself.
 */
final class ConsumerRegistry implements AutoCloseable {
    /** Bound on waiting for the registry's lock. */
    static final long LOCK_TIMEOUT_MS = 10_000;
    static final int PID = (int) ProcessHandle.current().pid();
    /** This process's start time, clock ticks since boot (what the lock word and a holder record). */
    static final long START = ConsumerEntry.procStart(PID);
    private static final System.Logger LOG = System.getLogger(ConsumerRegistry.class.getName());
    // Names held by readers of this process, as "dev:ino:name" of the registry: the file only knows the process.
    static final Set<String> HELD = ConcurrentHashMap.newKeySet();
    // Threads of this process take the lock word one at a time (they share its value).
    private static final Object JVM_LOCK = new Object();

    final String path;
    private final MemoryMappedFile mem;
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
    static ConsumerRegistry open(Path file, boolean allowForeign, String perms, boolean create, boolean readOnly)
            throws IOException {
        if (readOnly) {
            long size = Files.size(file); // NoSuchFileException when absent
            if (size < Layout.CONSUMERS_FILE_SIZE) {
                throw new CorruptBusException(file + " is not a consumer registry: it is " + size + " bytes, not "
                        + Layout.CONSUMERS_FILE_SIZE + " (truncated?)");
            }
        }
        MemoryMappedFile.OpenOptions o = new MemoryMappedFile.OpenOptions();
        o.create = create && !readOnly;
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
                        ? "its magic is not a registry's (\"MBUSCON1\")" : "its version is unknown (this reads "
                        + Layout.CONSUMERS_VERSION + ")"));
            }
        };
        return new ConsumerRegistry(file.toString(), MemoryMappedFile.open(file.toString(), Layout.CONSUMERS_FILE_SIZE, o));
    }

    // ---- what readers of the registry and a reader's consumer use ----

    /**
     * Every entry in use, lock-free: each taken only when its generation is the same odd value before and after.
     *
     * @throws BusTruncatedException if the file was truncated under the mapping
     */
    List<ConsumerEntry> entries() {
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
                        new String(n, 0, len, StandardCharsets.UTF_8));
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
            long word = ConsumerEntry.lockWord(PID, START);
            int holder;
            try {
                holder = lock(word, LOCK_TIMEOUT_MS * 1_000_000L);
                MemoryMappedFile.raiseFaultReports();
            } catch (InternalError e) {
                throw fault(e);
            }
            if (holder != 0) {
                throw new BusLockTimeoutException(path + ": the consumer registry's lock was held by pid " + holder
                        + " for longer than " + LOCK_TIMEOUT_MS + " ms", holder);
            }
            try {
                T v = step.run();
                MemoryMappedFile.raiseFaultReports();
                return v;
            } catch (InternalError e) {
                throw fault(e);
            } finally {
                try {
                    unlock(word);
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
    ConsumerHold acquire(String name, String busIdHex, long start) throws IOException {
        byte[] n = ConsumerEntry.nameBytes(name);
        byte[] id = ConsumerEntry.busIdBytes(busIdHex);
        String key = mem.device() + ":" + mem.inode() + ":" + name;
        return locked(() -> {
            int i = find(n);
            if (i >= 0) {
                byte[] had = new byte[Layout.CONSUMER_BUS_ID_SIZE];
                mem.getBytes(offset(i) + Layout.CONSUMER_BUS_ID_OFFSET, had, 0, had.length);
                if (!Arrays.equals(had, id)) {
                    int other = otherHolder(i, PID, START);
                    if (other != 0) {
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
                int other = otherHolder(i, PID, START);
                if (other != 0) {
                    throw new ConsumerInUseException("consumer '" + name + "' of " + path + " is held by pid "
                            + other + " (a live process): one holder per name", other);
                }
            }
            claim(i, PID, START);
            HELD.add(key);
            return new ConsumerHold(this, name, i, key);
        });
    }

    /**
     * Removes consumer {@code name}; one with a live holder is refused.
     *
     * @throws java.util.NoSuchElementException if there is no such consumer
     * @throws ConsumerInUseException           if a live process (this one included) holds it
     */
    void removeConsumer(String name) throws IOException {
        byte[] n = ConsumerEntry.nameBytes(name);
        locked(() -> {
            int i = find(n);
            if (i < 0) {
                throw new java.util.NoSuchElementException("no consumer '" + name + "' in " + path);
            }
            int holder = otherHolder(i, 0, 0);
            if (holder != 0) {
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


    /** Releases entry {@code i} held by this process (under the lock). */
    void release(int i) throws IOException {
        locked(() -> {
            release(i, PID, START);
            return null;
        });
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

    // consumers_lock: 0 once held, else the pid holding it after timeoutNs. A holder seen for more than 1 ms is asked
    // whether it is alive (the checks read /proc), and replaced by compare-and-swap when it is gone.
    private int lock(long word, long timeoutNs) {
        long deadline = System.nanoTime() + timeoutNs;
        long seen = 0;
        long seenSince = 0;
        for (;;) {
            long cur = mem.getLongAcquire(Layout.CONSUMERS_LOCK_OFFSET);                 // load_acquire_i64
            if (cur == 0) {
                if (mem.compareAndSetLong(Layout.CONSUMERS_LOCK_OFFSET, 0, word)) {    // cas_i64
                    return 0;
                }
                continue;
            }
            long now = System.nanoTime();
            if (cur != seen) {
                seen = cur;
                seenSince = now;
            } else if (now - seenSince > 1_000_000 && !ConsumerEntry.wordAlive(cur)) {
                if (mem.compareAndSetLong(Layout.CONSUMERS_LOCK_OFFSET, cur, word)) {  // cas_i64
                    return 0;
                }
                continue;
            }
            if (now - deadline >= 0) {
                return (int) (cur & 0xFFFFFFFFL);
            }
            LockSupport.parkNanos(20_000);
            MemoryMappedFile.raiseFaultReports();
        }
    }

    // consumers_unlock
    private void unlock(long word) {
        mem.compareAndSetLong(Layout.CONSUMERS_LOCK_OFFSET, word, 0);
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
            if ((gen & 1) != 0) {
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

    // consumer_other_holder: under the lock, the live holder of entry i other than (pid, start), or 0 (a holder that
    // is gone is forgotten).
    private int otherHolder(int i, int pid, long start) {
        long e = entry(i);
        int holder = MemoryMappedFile.getIntVolatileAt(e + Layout.CONSUMER_PID_OFFSET);
        if (holder == 0) {
            return 0;
        }
        long hstart = MemoryMappedFile.getLongVolatileAt(e + Layout.CONSUMER_START_OFFSET);
        if (holder == pid && hstart == start) {
            return 0;
        }
        return holder > 0 && ConsumerEntry.alive(holder, hstart) ? holder : 0;
    }

    // consumer_claim: under the lock, entry i held by (pid, start); the start first, so whoever sees the pid sees it.
    private void claim(int i, int pid, long start) {
        MemoryMappedFile.putLongReleaseAt(entry(i) + Layout.CONSUMER_START_OFFSET, start);
        mem.setIntRelease(offset(i) + Layout.CONSUMER_PID_OFFSET, pid);
    }

    // consumer_release: under the lock, entry i held by nobody (if (pid, start) still holds it).
    private void release(int i, int pid, long start) {
        long e = entry(i);
        if (MemoryMappedFile.getIntVolatileAt(e + Layout.CONSUMER_PID_OFFSET) != pid
                || MemoryMappedFile.getLongVolatileAt(e + Layout.CONSUMER_START_OFFSET) != start) {
            return;
        }
        mem.setIntRelease(offset(i) + Layout.CONSUMER_PID_OFFSET, 0);
        MemoryMappedFile.putLongReleaseAt(e + Layout.CONSUMER_START_OFFSET, 0);
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
