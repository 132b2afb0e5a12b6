package io.mappedbuspy;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.concurrent.locks.LockSupport;

/**
 * Retention that holds consumers, for a rolling bus's writers (docs/files-and-rolling.md, "Retention that holds
 * consumers"): with {@code max_consumer_lag > 0}, segments a registered consumer that is not expired still needs are
 * kept; past the bound, by {@code on_consumer_lag}, the consumer is expired ({@link #hold}) or the writer waits before
 * rolling ({@link #awaitRoom}) and then fails with {@link BusBackPressureException}. The registry is only read here
 * (and entries expired under its lock); a writer never creates it.
 */
final class ConsumerRetention implements AutoCloseable {
    // How often a blocked writer looks at the consumers again.
    private static final long BLOCK_POLL_NS = 1_000_000L;

    private final RollingDir bus;
    private final long maxLag;
    private final boolean block;
    private final byte[] busId;
    private ConsumerRegistry registry;

    ConsumerRetention(RollingDir bus) {
        this.bus = bus;
        this.maxLag = bus.meta.maxConsumerLag();
        this.block = BusMeta.BLOCK.equals(bus.meta.onConsumerLag());
        this.busId = ConsumerEntry.busIdBytes(bus.meta.id());
    }

    /** Whether writers wait for lagging consumers before they roll. */
    boolean blocks() {
        return block;
    }

    // The registry, once it exists (null until a consumer registered).
    private ConsumerRegistry registry() throws IOException {
        if (registry == null) {
            Path f = bus.dir.resolve(Layout.CONSUMERS_FILE);
            if (!Files.exists(f, LinkOption.NOFOLLOW_LINKS)) {
                return null;
            }
            try {
                registry = ConsumerRegistry.open(f, bus.allowForeign, "rw-------", false, false);
            } catch (NoSuchFileException e) {
                return null;
            }
        }
        return registry;
    }

    /**
     * The segment a consumer at {@code position} needs: {@code position / segmentSize}, or the next one when the
     * position is at the end boundary of its segment (it has read all of it).
     */
    long needed(long position) {
        long n = position / bus.segmentSize;
        return position % bus.segmentSize + bus.slot > bus.segmentSize ? n + 1 : n;
    }

    /**
     * Retention's look at the consumers, by a writer in segment {@code k}: under {@code expire}, every consumer lagging
     * more than {@code max_consumer_lag} segments is flagged expired; the others hold their segments.
     *
     * @return the smallest segment a consumer that is not expired needs (retention removes none at or above it), or
     *         {@link Long#MAX_VALUE} when none holds anything
     */
    long hold(long k) throws IOException {
        ConsumerRegistry r = registry();
        if (r == null) {
            return Long.MAX_VALUE;
        }
        long min = Long.MAX_VALUE;
        for (ConsumerEntry e : r.entries()) {
            if (e.expired() || !Arrays.equals(e.busId, busId)) {
                continue; // expired, or an entry of a bus since deleted and recreated here: holds nothing
            }
            long n = needed(e.position);
            if (!block && k - n > maxLag) {
                r.expire(e);
                continue;
            }
            min = Math.min(min, n);
        }
        return min;
    }

    /**
     * Under {@code block}, before a writer rolls into segment {@code target}: waits (looking every millisecond) while a
     * consumer that is not expired would lag more than {@code max_consumer_lag} segments, at most
     * {@code consumer_block_ms}.
     *
     * @throws BusBackPressureException naming the consumer, its position and its lag, after the wait
     * @throws InterruptedIOException   if the thread is interrupted while waiting
     */
    void awaitRoom(long target) throws IOException {
        long deadline = System.nanoTime() + bus.meta.consumerBlockMs() * 1_000_000L;
        for (;;) {
            ConsumerRegistry r = registry();
            ConsumerEntry worst = null;
            long worstNeeds = Long.MAX_VALUE;
            if (r != null) {
                for (ConsumerEntry e : r.entries()) {
                    if (e.expired() || !Arrays.equals(e.busId, busId)) {
                        continue;
                    }
                    long n = needed(e.position);
                    if (target - n > maxLag && n < worstNeeds) {
                        worst = e;
                        worstNeeds = n;
                    }
                }
            }
            if (worst == null) {
                return;
            }
            if (System.nanoTime() - deadline >= 0) {
                long lag = Math.max(0, bus.slotIndex(target * bus.segmentSize) - bus.slotIndex(worst.position));
                throw new BusBackPressureException("rolling bus " + bus.dir + ": consumer '" + worst.name + "' at "
                        + "position " + worst.position + " lags " + lag + " records (" + (target - 1 - worstNeeds)
                        + " segments; max_consumer_lag " + maxLag + "): the writer waited "
                        + bus.meta.consumerBlockMs() + " ms to roll into segment " + target
                        + " (on_consumer_lag=block); no slot was taken", worst.name, worst.position, lag);
            }
            LockSupport.parkNanos(BLOCK_POLL_NS);
            if (Thread.interrupted()) {
                Thread.currentThread().interrupt();
                throw new InterruptedIOException("interrupted while waiting for consumer '" + worst.name + "' of "
                        + bus.dir);
            }
        }
    }

    @Override
    public void close() {
        if (registry != null) {
            registry.close();
            registry = null;
        }
    }
}
