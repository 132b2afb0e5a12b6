package io.mappedbuspy;

import java.io.IOException;

/**
 * A writer of a rolling bus created with {@code on_consumer_lag=block} waited {@code consumer_block_ms} for a
 * registered consumer lagging more than {@code max_consumer_lag} segments, and gave up (Python:
 * BusBackPressureError). No slot was taken: the write can be retried.
 */
public final class BusBackPressureException extends IOException {
    private static final long serialVersionUID = 1L;

    private final String consumer;
    private final long position;
    private final long lag;

    /**
     * Creates the exception.
     *
     * @param message  what happened, naming the bus, the consumer, its position and its lag
     * @param consumer the consumer's name
     * @param position its committed position
     * @param lag      its lag in record slots
     */
    public BusBackPressureException(String message, String consumer, long position, long lag) {
        super(message);
        this.consumer = consumer;
        this.position = position;
        this.lag = lag;
    }

    /** @return the name of the consumer that holds the writer */
    public String consumer() {
        return consumer;
    }

    /** @return its committed position */
    public long position() {
        return position;
    }

    /** @return its lag, in record slots from its position to the writer's end */
    public long lag() {
        return lag;
    }
}
