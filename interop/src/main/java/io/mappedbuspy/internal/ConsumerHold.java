package io.mappedbuspy.internal;

import java.io.IOException;
import java.lang.ref.Reference;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;
import io.mappedbuspy.Layout;

/**
 * A reader's hold on one named consumer ({@link ConsumerRegistry#acquire}): its commits, each {@code _consumers.h}'s
 * {@code consumer_commit} (one ordered store of the position, then a coarse time, no lock), and its release. Closing it
 * releases the entry and closes the registry. The Python readers' is {@code ConsumerHold} in _core/_consumerhold.pyx.
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
 */
public final class ConsumerHold implements AutoCloseable {
    // Commits between raises of the JVM's late fault reports (a registry truncated under the mapping: 40-100 ns each),
    // and between looks at the file's length (an fstat; a cut inside the first page faults nowhere). A commit itself
    // is two stores and a load: a report of its fault is raised wherever the thread next enters the VM, at most
    // FAULT_CHECK_MASK commits later here, perhaps earlier in the caller's code (a pending safepoint).
    private static final int FAULT_CHECK_MASK = 63;
    private static final int LENGTH_CHECK_MASK = 4095;
    // The commits' coarse clock (CLOCK_REALTIME_COARSE's role in _consumers.h; Java has none that costs less than a
    // read of the real-time clock, 20-30 ns here): Unix ns, refreshed every COARSE_TICK_NS by a daemon thread that
    // runs while this process holds consumers.
    private static final long COARSE_TICK_NS = 4_000_000L;
    private static volatile long coarseNs;
    private static final AtomicBoolean TICKING = new AtomicBoolean();

    private final ConsumerRegistry registry;
    public final String name;
    private final int index;
    private final long address;   // the entry's
    private final String key;
    private int commits;
    private boolean released;

    ConsumerHold(ConsumerRegistry registry, String name, int index, String key) {
        this.registry = registry;
        this.name = name;
        this.index = index;
        this.address = registry.entry(index);
        this.key = key;
        startClock();
    }

    /** @return the registry's path */
    public String registryPath() {
        return registry.path;
    }

    /** @return the committed position */
    public long position() {
        try {
            long p = MemoryMappedFile.getLongVolatileAt(address + Layout.CONSUMER_POSITION_OFFSET);
            MemoryMappedFile.raiseFaultReports();
            return p;
        } catch (InternalError e) {
            throw registry.fault(e);
        } finally {
            Reference.reachabilityFence(registry.keep);
        }
    }

    // consumer_commit: the position, then the time (release stores); an expired flag cleared (a commit revives it).
    static void store(long e, long position, long nowNs) {
        MemoryMappedFile.putLongReleaseAt(e + Layout.CONSUMER_POSITION_OFFSET, position);  // store_release_i64
        MemoryMappedFile.putLongReleaseAt(e + Layout.CONSUMER_COMMITTED_NS_OFFSET, nowNs);  // store_release_i64
        if ((MemoryMappedFile.getIntVolatileAt(e + Layout.CONSUMER_FLAGS_OFFSET)           // load_acquire_i32
                & Layout.CONSUMER_FLAG_EXPIRED) != 0) {
            MemoryMappedFile.compareAndSetIntAt(e + Layout.CONSUMER_FLAGS_OFFSET,            // cas_i32
                    Layout.CONSUMER_FLAG_EXPIRED, 0);
        }
    }

    /**
     * consumer_commit: the position with one release store, then the time (a coarse clock, at most
     * {@code COARSE_TICK_NS} old); an expired flag is
     * cleared by compare-and-swap only if set. Every {@code FAULT_CHECK_MASK + 1} commits, a look at the JVM's late
     * fault reports; every {@code LENGTH_CHECK_MASK + 1}, at the file's length.
     */
    public void commit(long position) {
        if (released) {
            throw new IllegalStateException("consumer '" + name + "' of " + registry.path + " was released");
        }
        long e = address;
        try {
            store(e, position, coarseNs);
            if ((++commits & FAULT_CHECK_MASK) == 0) {
                MemoryMappedFile.raiseFaultReports();
                if ((commits & LENGTH_CHECK_MASK) == 0) {
                    registry.checkLength();
                }
            }
        } catch (InternalError x) {
            throw registry.fault(x);
        } finally {
            Reference.reachabilityFence(registry.keep);
        }
    }

    /** Releases the hold (under the lock) and closes the registry. Idempotent. */
    @Override
    public void close() throws IOException {
        if (released) {
            return;
        }
        released = true;
        ConsumerRegistry.HELD.remove(key);
        try {
            registry.release(index);
        } finally {
            registry.close();
        }
    }

    // Starts the coarse clock's thread unless it runs; it ends once this process holds no consumer.
    private static void startClock() {
        coarseNs = System.currentTimeMillis() * 1_000_000L;
        if (!TICKING.compareAndSet(false, true)) {
            return;
        }
        Thread t = new Thread(() -> {
            for (;;) {
                coarseNs = System.currentTimeMillis() * 1_000_000L;
                if (ConsumerRegistry.HELD.isEmpty()) {
                    TICKING.set(false);
                    // a consumer held meanwhile found the clock running: run on for it, unless it started another
                    if (ConsumerRegistry.HELD.isEmpty() || !TICKING.compareAndSet(false, true)) {
                        return;
                    }
                }
                LockSupport.parkNanos(COARSE_TICK_NS);
            }
        }, "mappedbus-consumer-clock");
        t.setDaemon(true);
        t.start();
    }
}
