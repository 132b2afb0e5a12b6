package io.mappedbuspy;

import java.io.EOFException;
import java.io.IOException;
import java.util.concurrent.TimeUnit;
import io.mappedbuspy.internal.Waiter;
import io.mappedbuspy.internal.WakeFile;

/**
 * What both bus readers ({@link MappedBusReader}, {@link RollingBusReader}) share about waiting for a record:
 * {@code waitNext}, its {@link Waiter}, its {@link IdleStrategy} and bounds (the setters return the reader, for
 * chaining), and the bus's wake file, opened at the first park and closed with the reader.
 *
 * @param <R> the reader
 */
abstract class WaitingReader<R extends WaitingReader<R>> {
    private final Waiter waiter = new Waiter();
    private final Waiter.Reader waiting = new Waiter.Reader() {
        @Override
        public boolean poll(boolean thorough) throws IOException {
            return waitPoll(thorough);
        }

        @Override
        public void check() throws IOException {
            waitCheck();
        }

        @Override
        public WakeFile wakeFile() {
            if (wake == null) {
                wake = openWakeFile();
            }
            return wake;
        }
    };
    // The bus's wake file, opened at the first park (null before).
    WakeFile wake;
    // Tests: park by polling, as without the JNI library.
    boolean wakeNative = true;

    WaitingReader() {
    }

    // One look for the next record (Waiter.Reader.poll).
    abstract boolean waitPoll(boolean thorough) throws IOException;

    // The checks of the reader's files while it waits (Waiter.Reader.check).
    abstract void waitCheck() throws IOException;

    // The wake file to park on (throws if the reader is not open).
    abstract WakeFile openWakeFile();

    /**
     * Waits for the next committed record (on a rolling bus, across segments), at most {@code timeout}:
     * {@code next()} until it returns true, spinning and then parking on the bus's wake file as the
     * {@link IdleStrategy} says. While waiting it checks every 10 ms (or once per park, if parks are longer) that the
     * file it reads (a rolling bus's segment) was not truncated and that the bus was not replaced, as {@code next()}
     * does less often.
     *
     * @param timeout the most to wait; 0 looks once
     * @param unit    its unit
     * @return true if a record is now current; false if none came in time
     * @throws EOFException          if the next record would not fit in a single-file bus (the end of the bus)
     * @throws CorruptBusException   if a status other than 0, 1 or 2, or a limit off the record grid, is found
     * @throws BusGapException       if a rolling bus's next records were removed by retention (and failOnGap is set)
     * @throws BusReplacedException  if the reader finds its path names another file or none (a rolling bus: bus.meta
     *                               no longer holds this bus's id)
     * @throws BusTruncatedException if the file was truncated under the mapping
     * @throws InterruptedException  if the thread is interrupted while waiting (noticed within one park bound)
     * @throws IOException           as {@code next()}
     */
    public boolean waitNext(long timeout, TimeUnit unit) throws IOException, InterruptedException {
        return waiter.await(waiting, timeout, unit);
    }

    // Closes the wake file, if one was opened.
    final void closeWake() {
        if (wake != null) {
            wake.close();
            wake = null;
        }
    }

    @SuppressWarnings("unchecked")
    private R self() {
        return (R) this;
    }

    /**
     * How {@code waitNext} waits.
     *
     * @param strategy BUSY_SPIN, SPIN_PARK (the default) or PARK
     * @return this
     */
    public R setIdleStrategy(IdleStrategy strategy) {
        waiter.strategy(strategy);
        return self();
    }

    /** @return how {@code waitNext} waits */
    public IdleStrategy idleStrategy() {
        return waiter.strategy();
    }

    /**
     * How long {@code waitNext} polls before it parks (SPIN_PARK).
     *
     * @param ns nanoseconds, 0 to 1 000 000 000 (default 10 000)
     * @return this
     */
    public R setSpinNanos(long ns) {
        waiter.spinNanos(ns);
        return self();
    }

    /** @return how long {@code waitNext} polls before it parks */
    public long spinNanos() {
        return waiter.spinNanos();
    }

    /**
     * How long a parked {@code waitNext} sleeps before it looks by itself, at first: the delay of a record from a
     * writer that wakes nobody (the Java original), and of a wait without the JNI library. It backs off up to
     * {@link #parkMaxNanos()} while such looks find nothing.
     *
     * @param ns nanoseconds, 10 000 to 60 000 000 000 (default {@link Layout#DEFAULT_PARK_NS})
     * @return this
     */
    public R setParkNanos(long ns) {
        waiter.parkNanos(ns);
        return self();
    }

    /** @return how long a parked {@code waitNext} sleeps before it looks by itself, at first */
    public long parkNanos() {
        return waiter.parkNanos();
    }

    /**
     * The most the park bound grows to while the looks after parks that nobody woke find nothing (it doubles from
     * {@link #parkNanos()} on each, and returns there once such a look finds a record). A value below the park
     * bound is the park bound.
     *
     * @param ns nanoseconds, 10 000 to 60 000 000 000 (default {@link Layout#DEFAULT_PARK_MAX_NS})
     * @return this
     */
    public R setParkMaxNanos(long ns) {
        waiter.parkMaxNanos(ns);
        return self();
    }

    /** @return the most the park bound grows to */
    public long parkMaxNanos() {
        return waiter.parkMaxNanos();
    }
}
