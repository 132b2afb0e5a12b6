package io.mappedbuspy.internal;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.locks.LockSupport;
import io.mappedbuspy.BusBackPressureException;
import io.mappedbuspy.CorruptBusException;
import io.mappedbuspy.Layout;
import io.mappedbuspy.OnConsumerLag;
import io.mappedbuspy.UnsafeBusFileException;

/**
 * Retention that holds consumers, for a rolling bus's writers (docs/files-and-rolling.md, "Retention that holds
 * consumers"): with {@code max_consumer_lag > 0}, segments a registered consumer that is not expired still needs are
 * kept; past the bound, by {@code on_consumer_lag}, the consumer is expired ({@link #hold}) or the writer waits before
 * rolling ({@link #awaitRoom}) and then fails with {@link BusBackPressureException}. The registry is only read here
 * (and entries expired under its lock); a writer never creates it.
 * <p>Internal: not a supported API. Public only for the library's own packages (io.mappedbuspy and the
 * Spark connector); it may change in any release.
 */
public final class ConsumerRetention implements AutoCloseable {
    // How often a blocked writer looks at the consumers again.
    private static final long BLOCK_POLL_NS = 1_000_000L;

    private final RollingDir bus;
    private final long maxLag;
    private final boolean block;
    private final byte[] busId;
    private ConsumerRegistry registry;
    // A retention could not read the registry: the next roll's check reads it again.
    private boolean unreadable;

    ConsumerRetention(RollingDir bus) {
        this.bus = bus;
        this.maxLag = bus.meta.maxConsumerLag();
        this.block = bus.meta.onConsumerLag() == OnConsumerLag.BLOCK;
        this.busId = ConsumerEntry.busIdBytes(bus.meta.id());
    }

    /** Whether writers wait for lagging consumers before they roll. */
    public boolean blocks() {
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
     * What retention does about consumers (Python: {@code rolling.consumer_retention}) when the writers are in segment
     * {@code current}: the consumers to flag expired first (policy {@code expire}: those more than
     * {@code max_consumer_lag} segments behind), and the oldest segment one that is not expired needs. Nothing when
     * {@code max_consumer_lag} is 0. A pure decision: the caller expires them.
     *
     * @param entries the registry's entries of this bus
     * @param meta    the bus's metadata (segment and record size, consumer policy)
     * @param current the segment the writers are in
     * @return the hold and the entries to expire
     */
    public static Plan consumerRetention(List<ConsumerEntry> entries, BusMeta meta, long current) {
        List<ConsumerEntry> expire = new ArrayList<>();
        long hold = RollingLayout.NO_HOLD;
        if (meta.maxConsumerLag() == 0) {
            return new Plan(hold, expire);
        }
        boolean expires = meta.onConsumerLag() == OnConsumerLag.EXPIRE;
        for (ConsumerEntry e : entries) {
            if (e.expired()) {
                continue; // holds nothing, and is not expired again
            }
            long need = RollingLayout.consumerSegment(e.position, meta.segmentSize(), meta.recordSize());
            if (expires && current - need > meta.maxConsumerLag()) {
                expire.add(e);
                continue;
            }
            hold = Math.min(hold, need);
        }
        return new Plan(hold, expire);
    }

    /**
     * Policy {@code block} (Python: {@code rolling.consumer_blockers}): the consumers (not expired) that would lag more
     * than {@code max_consumer_lag} segments once the writers are in segment {@code target}, most behind first (ties
     * in registry order).
     *
     * @param entries the registry's entries of this bus
     * @param meta    the bus's metadata
     * @param target  the segment the writers would roll into
     * @return the blockers; empty under policy {@code expire} or {@code max_consumer_lag} 0
     */
    public static List<ConsumerEntry> consumerBlockers(List<ConsumerEntry> entries, BusMeta meta, long target) {
        List<ConsumerEntry> out = new ArrayList<>();
        if (meta.maxConsumerLag() == 0 || meta.onConsumerLag() != OnConsumerLag.BLOCK) {
            return out;
        }
        for (ConsumerEntry e : entries) {
            if (!e.expired() && target - needs(e, meta) > meta.maxConsumerLag()) {
                out.add(e);
            }
        }
        out.sort(Comparator.comparingLong(e -> needs(e, meta))); // stable: ties keep registry order
        return out;
    }

    private static long needs(ConsumerEntry e, BusMeta meta) {
        return RollingLayout.consumerSegment(e.position, meta.segmentSize(), meta.recordSize());
    }

    /** What {@link #consumerRetention} decided. */
    public static final class Plan {
        /** The oldest segment a consumer that is not expired needs, or {@link RollingLayout#NO_HOLD}. */
        public final long hold;
        /** The consumers to flag expired, in registry order. */
        public final List<ConsumerEntry> expire;

        Plan(long hold, List<ConsumerEntry> expire) {
            this.hold = hold;
            this.expire = expire;
        }
    }

    // The registry's entries of this bus (an entry of a bus since deleted and recreated here holds nothing).
    private List<ConsumerEntry> entries(ConsumerRegistry r) {
        List<ConsumerEntry> out = new ArrayList<>();
        for (ConsumerEntry e : r.entries()) {
            if (Arrays.equals(e.busId, busId)) {
                out.add(e);
            }
        }
        return out;
    }

    /**
     * Retention's look at the consumers, by a writer in segment {@code k} ({@link #consumerRetention}): under
     * {@code expire}, every consumer lagging more than {@code max_consumer_lag} segments is flagged expired; the
     * others hold their segments.
     *
     * @return the smallest segment a consumer that is not expired needs (retention removes none at or above it), or
     *         {@link RollingLayout#NO_HOLD} when none holds anything
     */
    long hold(long k) throws IOException {
        try {
            ConsumerRegistry r = registry();
            if (r == null) {
                return RollingLayout.NO_HOLD;
            }
            Plan p = consumerRetention(entries(r), bus.meta, k);
            for (ConsumerEntry e : p.expire) {
                r.expire(e);
            }
            return p.hold;
        } catch (IOException | RuntimeException e) {
            unreadable = true; // the next roll reads it again, and fails while it cannot
            throw e;
        }
    }

    /**
     * At a writer's open and at each roll, when the consumers matter (they hold retention, or block the writers): the
     * registry, if there is one, is opened and read, so that one that cannot be (garbage, a link, another user's file)
     * is an error where the user acts, never a retention that silently stops.
     *
     * @throws CorruptBusException    if it is not a registry
     * @throws UnsafeBusFileException if it is a link or not to be trusted
     */
    public void check() throws IOException {
        if (!block && !RollingLayout.retains(bus.meta) || registry != null && !unreadable) {
            return; // read at its open, and by every retention since (which flags it when it cannot)
        }
        ConsumerRegistry r = registry();
        if (r != null) {
            entries(r);
        }
        unreadable = false;
    }

    /**
     * Under {@code block}, before a writer rolls into segment {@code target}: waits (looking every millisecond) while a
     * consumer that is not expired would lag more than {@code max_consumer_lag} segments ({@link #consumerBlockers}),
     * at most {@code consumer_block_ms}.
     *
     * @throws BusBackPressureException naming the consumer most behind, its position and its lag, after the wait
     * @throws InterruptedIOException   if the thread is interrupted while waiting
     */
    public void awaitRoom(long target) throws IOException {
        long deadline = System.nanoTime() + bus.meta.consumerBlockMs() * 1_000_000L;
        for (;;) {
            ConsumerRegistry r = registry();
            List<ConsumerEntry> blockers = r == null ? List.of() : consumerBlockers(entries(r), bus.meta, target);
            if (blockers.isEmpty()) {
                return;
            }
            ConsumerEntry worst = blockers.get(0);
            if (System.nanoTime() - deadline >= 0) {
                long lag = RollingLayout.recordsBetween(worst.position, target, Layout.FIRST_RECORD_OFFSET,
                        bus.segmentSize, bus.recordSize);
                throw new BusBackPressureException("rolling bus " + bus.dir + ": consumer '" + worst.name + "' at "
                        + "position " + worst.position + " lags " + lag + " records (" + (target - 1
                        - needs(worst, bus.meta)) + " segments; max_consumer_lag " + maxLag + "): the writer waited "
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
