package io.mappedbuspy.internal;

import java.io.IOException;
import java.util.concurrent.TimeUnit;
import io.mappedbuspy.IdleStrategy;
import io.mappedbuspy.Layout;

/**
 * The blocking wait of both bus readers ({@code waitNext}), written once, as the Python reader's {@code Waiter}
 * (_core/_waiter.pyx):
 * poll (the spin), then park on the bus's wake file until a writer wakes the reader or the park bound passes, look,
 * and so on until a record comes or the time is up. The {@link IdleStrategy} says how much of each; while waiting
 * the reader's files are checked every {@link #CHECK_NS} as a writer's accesses would find them (truncated,
 * replaced).
 *
 * <p>The park bound backs off as {@code wake_backoff} in {@code _wake.h}: it starts at the park time, doubles up to
 * the maximum while the looks after parks that nobody woke find nothing, and returns to the park time, held there
 * for {@link #PIN_NS}, when such a look finds a record (one from a writer that wakes nobody: the Java original).
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
 */
public final class Waiter {
    /** What a waiting reader does. */
    public interface Reader {
        /**
         * One look for the next record. {@code thorough}: the look right after registering as parked, or after a
         * park, which must see any record committed before it began (no look skipped to save time).
         */
        boolean poll(boolean thorough) throws IOException;

        /** The checks of the reader's files: throws as an access would find them. */
        void check() throws IOException;

        /** The wake file to park on, opened at the first park. */
        WakeFile wakeFile();
    }

    /** How often a waiting reader checks its files. */
    static final long CHECK_NS = 10_000_000L;
    /** Default spin before parking (SPIN_PARK), as the Python reader's (Layout.DEFAULT_SPIN_NS). */
    static final long DEFAULT_SPIN_NS = Layout.DEFAULT_SPIN_NS;
    /** How long the park bound stays at its minimum after a record that came without a wake (WAKE_PIN_NS). */
    public static final long PIN_NS = 2_000_000_000L;
    // The ranges the Python reader accepts (spin, park, park_max in seconds).
    private static final long MAX_SPIN_NS = 1_000_000_000L;
    private static final long MIN_PARK_NS = 10_000L;
    private static final long MAX_PARK_NS = 60_000_000_000L;

    private IdleStrategy strategy = IdleStrategy.SPIN_PARK;
    private long spinNanos = DEFAULT_SPIN_NS;
    private long parkNanos = Layout.DEFAULT_PARK_NS;
    private long parkMaxNanos = Layout.DEFAULT_PARK_MAX_NS;
    // wake_backoff: the next park's bound, and until when (System.nanoTime) it stays at parkNanos.
    private long curNanos = Layout.DEFAULT_PARK_NS;
    private long pinUntil = System.nanoTime();

    public void strategy(IdleStrategy s) {
        if (s == null) {
            throw new NullPointerException("idle strategy");
        }
        strategy = s;
    }

    public IdleStrategy strategy() {
        return strategy;
    }

    public void spinNanos(long ns) {
        if (ns < 0 || ns > MAX_SPIN_NS) {
            throw new IllegalArgumentException("spin time must be between 0 and " + MAX_SPIN_NS + " ns, got " + ns);
        }
        spinNanos = ns;
    }

    public long spinNanos() {
        return spinNanos;
    }

    public void parkNanos(long ns) {
        parkNanos = checkPark("park bound", ns);
        curNanos = ns;
    }

    public long parkNanos() {
        return parkNanos;
    }

    public void parkMaxNanos(long ns) {
        parkMaxNanos = checkPark("largest park bound", ns);
    }

    /** The largest park bound: the one set, or the park bound if that is larger (as wake_backoff_init). */
    public long parkMaxNanos() {
        return Math.max(parkMaxNanos, parkNanos);
    }

    /** The next park's bound. */
    public long curNanos() {
        return curNanos;
    }

    private static long checkPark(String what, long ns) {
        if (ns < MIN_PARK_NS || ns > MAX_PARK_NS) {
            throw new IllegalArgumentException(what + " must be between " + MIN_PARK_NS + " and " + MAX_PARK_NS
                    + " ns, got " + ns);
        }
        return ns;
    }

    // wake_backoff_after: `woken`, the wake word moved during the park; `found`, the look after it found a record.
    public void afterPark(boolean woken, boolean found, long now) {
        if (found && !woken) {
            curNanos = parkNanos;
            pinUntil = now + PIN_NS;
        } else if (!found && !woken && now - pinUntil >= 0) {
            curNanos = Math.min(curNanos * 2, parkMaxNanos());
        }
    }

    /**
     * Waits for the next record, at most {@code timeout}.
     *
     * @return true when {@code r.poll} found one; false when the time is up
     * @throws InterruptedException if the thread is interrupted (seen within one park bound)
     */
    public boolean await(Reader r, long timeout, TimeUnit unit) throws IOException, InterruptedException {
        if (r.poll(false)) {
            return true;
        }
        long budget = unit.toNanos(timeout);
        long start = System.nanoTime();
        long checked = start;
        long spin = strategy == IdleStrategy.BUSY_SPIN ? Long.MAX_VALUE
                : strategy == IdleStrategy.PARK ? 0 : spinNanos;
        WakeFile w = null;
        for (;;) {
            long now = System.nanoTime();
            long elapsed = now - start;
            if (elapsed >= budget) {
                return false;
            }
            if (Thread.interrupted()) {
                throw new InterruptedException("interrupted while waiting for a record");
            }
            if (now - checked >= CHECK_NS) {
                checked = now;
                r.check();
            }
            if (elapsed < spin) {
                Thread.onSpinWait();
                if (r.poll(false)) {
                    return true;
                }
                continue;
            }
            if (w == null) {
                w = r.wakeFile();
            }
            // Registered first, then the last look: a writer committing after that look sees the registration
            // and wakes us (or moved the wake word before we read it, and the wait returns at once).
            int v = w.prepare();
            boolean woken;
            try {
                if (r.poll(true)) {
                    return true;
                }
                woken = w.await(v, Math.min(curNanos, budget - elapsed));
            } finally {
                w.done();
            }
            boolean found = r.poll(true);
            afterPark(woken, found, System.nanoTime());
            if (found) {
                return true;
            }
        }
    }
}
