package io.mappedbuspy.spark.stream;

import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeMode;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.TreeSet;
import io.mappedbuspy.spark.BusOptions;
import io.mappedbuspy.spark.read.MultiBusPartition;

/**
 * Micro-batches of several buses ({@code path} a comma-separated list, or glob patterns in the last
 * component), as Kafka's {@code subscribe}/{@code subscribePattern}: each bus is read by its own
 * {@link BusMicroBatchStream} (so single-file and rolling buses mix, and each bus's ids, rolled-back slots,
 * retention gaps and {@code failOnDataLoss} work as in a one-bus stream), into its own partitions, with the
 * {@code bus} column naming it.
 *
 * <p>The offset ({@link MultiBusOffset}) holds each bus's offset by path. Patterns are matched again at
 * every trigger: a bus that appears joins the offset at its earliest record and is read from the next
 * trigger on. A bus of the offset whose path is gone is data loss: the query fails naming it and its
 * position, or (failOnDataLoss=false) goes on without it, counting it in {@code removedBuses}.
 *
 * <p>{@code maxRecordsPerTrigger} is shared out: each bus may take an equal share (the remainder to the
 * first buses of a rotating order); what buses with fewer records leave is then offered to the others in
 * that order. Under Trigger.AvailableNow the buses are those present when the query started.
 */
public final class MultiBusMicroBatchStream implements MicroBatchStream, SupportsTriggerAvailableNow,
        ReportsSourceMetrics, SupportsRealTimeMode {
    private static final Logger LOG = LoggerFactory.getLogger(MultiBusMicroBatchStream.class);

    /** One bus of the stream: its own options and one-bus stream. */
    private static final class Bus {
        final BusOptions options;
        final BusMicroBatchStream stream;

        Bus(BusOptions options, String consumer, boolean ephemeral) {
            this.options = options;
            this.stream = new BusMicroBatchStream(options, null, consumer, ephemeral);
        }
    }

    private final BusOptions options;
    /** The path option: the list or patterns, matched again at each trigger. */
    private final String spec;
    private final PartitionReaderFactory factory;
    private final Map<String, Bus> buses = new TreeMap<>();
    /** Under Trigger.AvailableNow: the buses when the query started; else null (match at every trigger). */
    private TreeSet<String> fixed;
    /** Data-loss counters of buses this stream dropped, and buses dropped because their path was gone. */
    private long retiredLost;
    private long retiredReplaced;
    private long removedBuses;
    private final Map<String, String> removedCounted = new HashMap<>();
    /** Turns the order buses are offered a trigger's records in, so none is always last. */
    private int rotation;
    /** The query's consumer name on each bus (each bus has its own registry), or null; see BusMicroBatchStream. */
    private final String consumer;
    private final boolean ephemeral;

    public MultiBusMicroBatchStream(BusOptions options, PartitionReaderFactory factory, String consumer, boolean ephemeral) {
        this.options = options;
        this.spec = options.raw.get("path");
        this.factory = factory;
        this.consumer = consumer;
        this.ephemeral = ephemeral;
    }

    private Bus bus(String path) {
        Bus b = buses.get(path);
        if (b == null) {
            b = new Bus(options.forBus(path), consumer, ephemeral);
            buses.put(path, b);
        }
        return b;
    }

    private void drop(String path) {
        Bus b = buses.remove(path);
        if (b != null) {
            Map<String, String> m = b.stream.metrics(Optional.empty());
            retiredLost += Long.parseLong(m.get("lostSlots"));
            retiredReplaced += Long.parseLong(m.get("replacedBuses"));
            b.stream.stop();
        }
    }

    /** Whether a bus's path exists now (a file, or a rolling bus's directory). */
    private static boolean exists(String path) {
        return Files.exists(Path.of(path), LinkOption.NOFOLLOW_LINKS);
    }

    /** The buses the path names now (patterns matched again), that exist. */
    private List<String> current() {
        List<String> out = new ArrayList<>();
        for (String p : BusOptions.expandBuses(spec, true)) {
            if (exists(p)) {
                out.add(p);
            }
        }
        return out;
    }

    /** A bus of the offset whose path is gone: fails the query, or drops it (counted) and goes on. */
    private void gone(String path, BusOffset at, long to) {
        String msg = "mappedbus: bus " + path + " of stream path '" + spec + "' is gone: this query's offset is "
                + "position " + at.position + (at.busId == null ? "" : " of bus " + at.busId)
                + (to > at.position ? ", and its planned batch [" + at.position + ", " + to + ") was not read"
                : "") + "; the records from position " + at.position + " on that the query had not read are "
                + "lost (their number is unknown: the bus is gone)";
        if (options.failOnDataLoss) {
            throw new IllegalStateException(msg + " (option failOnDataLoss=false goes on without it, counting it "
                    + "in the removedBuses metric)");
        }
        if (!at.json().equals(removedCounted.get(path))) {
            removedCounted.put(path, at.json());
            removedBuses++;
            LOG.warn(msg + "; going on without it (failOnDataLoss=false)");
        }
        drop(path);
    }

    @Override
    public Offset initialOffset() {
        Map<String, BusOffset> m = new TreeMap<>();
        for (String p : current()) {
            m.put(p, BusOffset.of(bus(p).stream.initialOffset()));
        }
        return new MultiBusOffset(m);
    }

    @Override
    public Offset deserializeOffset(String json) {
        return MultiBusOffset.parse(json);
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
        return options.maxRecordsPerTrigger > 0 ? ReadLimit.maxRows(options.maxRecordsPerTrigger)
                : ReadLimit.allAvailable();
    }

    @Override
    public Offset latestOffset() {
        throw new UnsupportedOperationException("mappedbus: latestOffset(Offset, ReadLimit) is used instead");
    }

    @Override
    public void prepareForTriggerAvailableNow() {
        fixed = new TreeSet<>(current());
        for (String p : fixed) {
            bus(p).stream.prepareForTriggerAvailableNow();
        }
    }

    @Override
    public Offset latestOffset(Offset startOffset, ReadLimit limit) {
        MultiBusOffset start = MultiBusOffset.of(startOffset);
        Map<String, BusOffset> end = new TreeMap<>();
        List<String> reading = new ArrayList<>();
        for (Map.Entry<String, BusOffset> e : start.buses.entrySet()) {
            if (!exists(e.getKey())) {
                gone(e.getKey(), e.getValue(), -1);
                continue;
            }
            end.put(e.getKey(), e.getValue());
            reading.add(e.getKey());
            bus(e.getKey()).stream.commitConsumer(e.getValue()); // the end of the last committed batch
        }
        for (String p : fixed != null ? new ArrayList<>(fixed) : current()) {
            if (end.containsKey(p) || !exists(p)) {
                continue;
            }
            try {
                end.put(p, bus(p).stream.earliestOffset()); // read from the next trigger on
                LOG.info("mappedbus: stream path '" + spec + "' now matches bus " + p + "; reading it from its "
                        + "earliest record, position " + end.get(p).position);
            } catch (RuntimeException ex) {
                drop(p); // not a bus yet (being created): looked at again at the next trigger
                LOG.warn("mappedbus: " + p + " matches stream path '" + spec + "' but cannot be read yet: "
                        + ex.getMessage());
            }
        }
        if (reading.isEmpty()) {
            return new MultiBusOffset(end);
        }
        long max = limit instanceof ReadMaxRows ? ((ReadMaxRows) limit).maxRows() : Long.MAX_VALUE;
        if (max == Long.MAX_VALUE) {
            for (String p : reading) {
                end.put(p, BusOffset.of(bus(p).stream.latestOffsetFrom(end.get(p), ReadLimit.allAvailable())));
            }
            return new MultiBusOffset(end);
        }
        // An equal share each; what a bus leaves goes to those that took their whole share.
        int n = reading.size();
        int turn = Math.floorMod(rotation++, n);
        List<String> order = new ArrayList<>(reading.subList(turn, n));
        order.addAll(reading.subList(0, turn));
        long left = max;
        List<String> hungry = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            String p = order.get(i);
            long share = max / n + (i < max % n ? 1 : 0);
            long used = share == 0 ? 0 : take(p, end, share);
            left -= used;
            if (used >= share) {
                hungry.add(p);
            }
        }
        for (String p : hungry) {
            if (left <= 0) {
                break;
            }
            left -= take(p, end, left);
        }
        return new MultiBusOffset(end);
    }

    /** Moves bus {@code p}'s end on by at most {@code rows} records; returns the slots it moved over. */
    private long take(String p, Map<String, BusOffset> end, long rows) {
        BusOffset from = end.get(p);
        BusOffset to = BusOffset.of(bus(p).stream.latestOffsetFrom(from, ReadLimit.maxRows(rows)));
        end.put(p, to);
        // Slots, not records: rolled-back slots count as taken, so the trigger never exceeds its limit.
        long moved = java.util.Objects.equals(from.busId, to.busId) ? bus(p).stream.slots(from.position, to.position)
                : rows; // another bus now: positions do not compare; its share counts as taken
        return Math.min(rows, Math.max(0, moved));
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
        MultiBusOffset s = MultiBusOffset.of(start);
        MultiBusOffset e = MultiBusOffset.of(end);
        List<InputPartition> parts = new ArrayList<>();
        for (Map.Entry<String, BusOffset> x : e.buses.entrySet()) {
            String p = x.getKey();
            BusOffset from = s.buses.get(p);
            if (from == null) {
                continue; // joined in this batch, at its earliest record: read from the next one
            }
            if (!exists(p)) {
                gone(p, from, x.getValue().position);
                continue;
            }
            Bus b = bus(p);
            for (InputPartition ip : b.stream.planInputPartitions(from, x.getValue())) {
                parts.add(new MultiBusPartition(ip, p, b.options));
            }
        }
        return parts.toArray(new InputPartition[0]);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return factory;
    }

    @Override
    public void commit(Offset end) {
        // Records stay in the buses for every other reader: only the query's consumer on each bus moves on.
        for (Map.Entry<String, BusOffset> e : MultiBusOffset.of(end).buses.entrySet()) {
            Bus b = buses.get(e.getKey());
            if (b != null) {
                b.stream.commitConsumer(e.getValue());
            }
        }
    }

    // -- Real-time Mode: refused (a long-running batch reads one bus) ---------------------------------

    private IllegalArgumentException realTime() {
        return new IllegalArgumentException("mappedbus: Real-time Mode reads one bus, but option 'path' ('" + spec
                + "') names several; use a micro-batch trigger for several buses, or one real-time query per bus");
    }

    @Override
    public void prepareForRealTimeMode() {
        throw realTime();
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start) {
        throw realTime();
    }

    @Override
    public Offset mergeOffsets(PartitionOffset[] offsets) {
        throw realTime();
    }

    /**
     * Each bus's metrics, summed: {@code lostSlots}, {@code replacedBuses}, {@code recordsBehindLimit}; and
     * {@code removedBuses} (buses whose path was gone, failOnDataLoss=false) and {@code buses} (read now).
     */
    @Override
    public Map<String, String> metrics(Optional<Offset> latestConsumedOffset) {
        Map<String, BusOffset> consumed = latestConsumedOffset.isPresent()
                ? MultiBusOffset.of(latestConsumedOffset.get()).buses : Collections.emptyMap();
        long lost = retiredLost;
        long replaced = retiredReplaced;
        long behind = 0;
        boolean anyBehind = false;
        for (Map.Entry<String, Bus> e : buses.entrySet()) {
            BusOffset o = consumed.get(e.getKey());
            Map<String, String> m = e.getValue().stream.metrics(Optional.ofNullable(o));
            lost += Long.parseLong(m.get("lostSlots"));
            replaced += Long.parseLong(m.get("replacedBuses"));
            String b = m.get("recordsBehindLimit");
            if (b != null) {
                behind += Long.parseLong(b);
                anyBehind = true;
            }
        }
        Map<String, String> m = new HashMap<>();
        m.put("lostSlots", Long.toString(lost));
        m.put("replacedBuses", Long.toString(replaced));
        m.put("removedBuses", Long.toString(removedBuses));
        m.put("buses", Integer.toString(consumed.isEmpty() ? buses.size() : consumed.size()));
        if (anyBehind) {
            m.put("recordsBehindLimit", Long.toString(behind));
        }
        return m;
    }

    @Override
    public void stop() {
        for (Bus b : buses.values()) {
            b.stream.stop();
        }
        buses.clear();
    }

    @Override
    public String toString() {
        return "mappedbus[" + spec + "]";
    }
}
