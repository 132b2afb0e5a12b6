package io.mappedbuspy;

/**
 * How a reader waits for the next record in {@code waitNext}: the trade between CPU and wake-up latency, as
 * Aeron's idle strategies name it.
 */
public enum IdleStrategy {
    /** Poll without pause until a record comes or the time is up: the lowest latency, one core busy. */
    BUSY_SPIN,
    /**
     * Poll for the spin time (default 10 us), then park on the bus's wake file until a writer wakes the reader or
     * the park bound passes (default {@link Layout#DEFAULT_PARK_NS}). The default.
     */
    SPIN_PARK,
    /** Park at once after one look: no CPU while idle, a wake-up's latency on every record that finds it parked. */
    PARK
}
