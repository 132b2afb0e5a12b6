package io.mappedbuspy;

import io.mappedbuspy.internal.ConsumerEntry;
import io.mappedbuspy.internal.ConsumerHold;

/**
 * What both bus readers ({@link MappedBusReader}, {@link RollingBusReader}) share about being a named consumer: the
 * name and first start given before {@code open()}, the hold on the registry beside the bus once open
 * ({@link Consumers}: {@code PATH.consumers}, {@code DIR/bus.consumers}), the commits through it, its release at
 * close. Each reader attaches the hold at {@code open()} (its positions are its own) and checks its positions.
 *
 * @param <R> the reader
 */
abstract class ConsumingReader<R extends ConsumingReader<R>> extends WaitingReader<R> {
    // The name and first start (before open), the hold on the registry (once open).
    String consumerName;
    long consumerStart = Consumers.OLDEST;
    ConsumerHold consumer;

    ConsumingReader() {
    }

    // "reader for PATH", "rolling reader for DIR": how messages name the reader.
    abstract String describe();

    // Whether open() was called (or close()): too late to set a consumer.
    abstract boolean openedOrClosed();

    // Whether close() was called.
    abstract boolean isClosed();

    // The position a consumer starts at or commits: p checked (IllegalArgumentException naming `what`), as stored.
    abstract long consumerPosition(long p, String what);

    /**
     * Position of the next record to look at, where {@link #commit()} puts this consumer.
     *
     * @return a position
     */
    public abstract long position();

    @SuppressWarnings("unchecked")
    private R self() {
        return (R) this;
    }

    /**
     * Makes this reader the named consumer {@code name}, which starts at the oldest (retained) record the first time.
     * Call before {@code open()}.
     *
     * @param name 1 to 64 bytes of UTF-8, no control characters
     * @return this
     * @see #setConsumer(String, long)
     */
    public R setConsumer(String name) {
        return setConsumer(name, Consumers.OLDEST);
    }

    /**
     * Makes this reader the named consumer {@code name}: {@code open()} registers it in the registry beside the bus
     * ({@code PATH.consumers}, {@code DIR/bus.consumers}; at {@code start} the first time) and holds it until
     * {@code close()}, then moves to its committed position (on a rolling bus, records removed since are a
     * {@link BusGapException} at the first {@code next()}, or skipped with {@code setFailOnGap(false)}). A name held
     * by another live reader (another process, or another reader of this one) makes {@code open()} throw
     * {@link ConsumerInUseException}. Call before {@code open()}.
     *
     * @param name  1 to 64 bytes of UTF-8, no control characters
     * @param start where a new consumer starts: a record boundary (a rolling bus's global position),
     *              {@link Consumers#OLDEST} or {@link Consumers#END}
     * @return this
     */
    public R setConsumer(String name, long start) {
        if (openedOrClosed()) {
            throw new IllegalStateException("set the consumer of " + describe() + " before open()");
        }
        ConsumerEntry.nameBytes(name);
        if (start != Consumers.OLDEST && start != Consumers.END) {
            consumerPosition(start, "consumer start");
        }
        consumerName = name;
        consumerStart = start;
        return self();
    }

    /** @return the consumer name set with {@link #setConsumer}, or null */
    public String consumer() {
        return consumerName;
    }

    /**
     * Commits this consumer's position: {@link #position()}, the slot after the last record read. A restart by the
     * same name goes on there. One ordered 8-byte store (a SIGKILL leaves the old or the new position), no lock;
     * committing after each record gives exactly-once delivery across restarts.
     *
     * @throws IllegalStateException if this reader is not a named consumer, or not open
     */
    public void commit() {
        held().commit(position());
    }

    /**
     * Commits a given position for this consumer (where a restart goes on).
     *
     * @param position a record boundary within the file (a rolling bus: in some segment, or a segment's end)
     * @throws IllegalArgumentException if it is not one
     * @throws IllegalStateException    if this reader is not a named consumer, or not open
     */
    public void commit(long position) {
        long p = consumerPosition(position, "position");
        held().commit(p);
    }

    private ConsumerHold held() {
        ConsumerHold h = consumer;
        if (h == null) {
            throw new IllegalStateException(describe() + " is " + (consumerName == null
                    ? "not a named consumer (setConsumer before open)" : isClosed() ? "closed" : "not open"));
        }
        return h;
    }

    // Releases the hold, if any (close()).
    final void releaseConsumer() {
        ConsumerHold h = consumer;
        if (h != null) {
            consumer = null;
            Consumers.release(h);
        }
    }
}
