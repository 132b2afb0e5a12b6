package io.mappedbuspy.spark.stream;

import io.mappedbuspy.BusGapException;
import io.mappedbuspy.ConsumerInUseException;
import io.mappedbuspy.Consumers;
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

import java.io.EOFException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import io.mappedbuspy.spark.BusOptions;
import io.mappedbuspy.spark.read.BusPartition;
import io.mappedbuspy.spark.read.BusReaderFactory;
import io.mappedbuspy.spark.BusSource;

/**
 * Micro-batches of a bus: a single file, or a rolling bus (a directory of segments). Offsets are positions
 * of record slots (a rolling bus's are global, {@code segmentIndex * segmentSize + offset}) with the bus's
 * id, so a query restarted from its checkpoint re-reads exactly the slots of its last planned batch and
 * goes on from there, and notices when the bus it read is gone.
 *
 * <p>The driver finds each batch's end with a bus reader (read-write, like any bus reader): the batch stops
 * before the first uncommitted slot; once a slot has stayed uncommitted for {@code timeoutMs} the reader
 * rolls it back (CAS 0 -> 2) and the stream goes past it. Rolled-back slots are skipped. So every slot in a
 * planned batch is settled, and tasks read it read-only, one segment per partition.
 *
 * <p>Data loss (records the query has not read are gone): the bus was deleted and recreated (its id
 * differs from the offset's), or retention removed segments of a rolling bus before they were read. With
 * {@code failOnDataLoss=true} (the default) the query fails naming the bus, the ids and the range; with
 * false it goes on (a new bus from its earliest record, a gap from the oldest retained one), logs a
 * warning and counts the slots in the {@code lostSlots} metric.
 *
 * <p>Real-time Mode ({@code trigger(realTime=...)}): each long-running batch is one partition, the bus from
 * the batch's start on, read by a {@link BusRealTimeReader} that hands Spark each record as it commits; its
 * position when the batch ends is the batch's end offset ({@link #mergeOffsets}). One partition because a
 * bus is one totally ordered stream with no end to split at.
 *
 * <p>A named consumer of the bus (docs/files-and-rolling.md, "Consumers: the registry file"): the driver's
 * reader holds the query's consumer name ({@link BusOptions#consumerName}) while the query runs and commits
 * the end offset of each committed batch to it, so the query's lag shows in {@code mappedbus consumers} and a
 * rolling bus's retention (with {@code max_consumer_lag}) keeps what a stopped query still needs. Spark's
 * checkpoint alone decides where a query reads; the registry only follows it.
 */
public final class BusMicroBatchStream implements MicroBatchStream, SupportsTriggerAvailableNow, ReportsSourceMetrics,
        SupportsRealTimeMode {
    private static final Logger LOG = LoggerFactory.getLogger(BusMicroBatchStream.class);

    private final BusOptions options;
    private final PartitionReaderFactory factory;
    /** The bus: a single file or a rolling bus. */
    private final BusSource bus;
    /** The driver's reader, or null (not open, or closed when the bus was found replaced). */
    private BusSource.Reader reader;
    /** The id of the bus the open reader reads (null: no metadata). */
    private String readerId;
    /** Under Trigger.AvailableNow: the limit when the query started; later records wait for the next run. */
    private long availableNowEnd = Long.MAX_VALUE;
    /** Record slots this stream knows were lost (failOnDataLoss=false), and up to where they are counted. */
    private long lostSlots;
    private long countedTo = -1;
    private String countedBus;
    /** Times the stream found another bus at its path than its offsets name. */
    private long replacedBuses;
    private String lastReplacedFrom;
    /** Real-time Mode: the start of the batch being run, its end if its reader reported none. */
    private BusOffset realTimeStart;
    /** The query's consumer name (held by the driver's reader), or null (registerConsumer=false). */
    private final String consumer;
    /** Whether the consumer is removed at {@link #stop()}: a temporary checkpoint's, which no restart resumes. */
    private final boolean ephemeral;
    /** The position last committed to the consumer (by this reader), or -1. */
    private long consumerCommitted = -1;

    /** A stream that registers no consumer. */
    public BusMicroBatchStream(BusOptions options, PartitionReaderFactory factory) {
        this(options, factory, null, false);
    }

    public BusMicroBatchStream(BusOptions options, PartitionReaderFactory factory, String consumer, boolean ephemeral) {
        this.options = options;
        this.consumer = consumer;
        this.ephemeral = ephemeral;
        this.factory = factory instanceof BusReaderFactory
                ? new BusRealTimeReaderFactory((BusReaderFactory) factory) : factory;
        this.bus = BusSource.forRead(options);
    }

    // -- the driver's reader -------------------------------------------------------------------------

    private void openReader() {
        try {
            reader = bus.openReader(consumer, true); // a new consumer entry holds everything until the first commit
            readerId = reader.busId();
        } catch (ConsumerInUseException e) {
            throw new IllegalStateException("mappedbus: " + e.getMessage() + "; this query registers as consumer '"
                    + consumer + "' of " + options.path + ": give it another name (option consumer), or "
                    + "registerConsumer=false", e);
        } catch (IOException e) {
            throw new UncheckedIOException("mappedbus: cannot open " + options.path + ": " + e.getMessage(), e);
        }
        consumerCommitted = -1;
    }

    /**
     * Commits {@code o} as the consumer's position: the end of the query's last committed batch (or its start).
     * Skipped for an offset of another bus than the reader's (the bus was replaced: the new one's entry is
     * committed from its first batch on). A failure is logged, never the query's.
     */
    void commitConsumer(BusOffset o) {
        if (consumer == null || o == null) {
            return;
        }
        if (reader == null) {
            try {
                openReader(); // closed when the bus was found replaced: the reader that holds the name
            } catch (RuntimeException e) {
                LOG.warn("mappedbus: consumer '" + consumer + "' of " + options.path + " not committed at "
                        + o.position + ": " + e.getMessage());
                return;
            }
        }
        if (o.position == consumerCommitted || (o.busId != null && !o.busId.equals(readerId))) {
            return;
        }
        try {
            reader.commit(o.position);
            consumerCommitted = o.position;
        } catch (IllegalArgumentException | IllegalStateException | io.mappedbuspy.BusTruncatedException e) {
            // Never fails a query: its checkpoint, not the registry, says where it reads.
            LOG.warn("mappedbus: consumer '" + consumer + "' of " + options.path + " not committed at "
                    + o.position + ": " + e.getMessage());
        }
    }

    private void closeReader() {
        if (reader != null) {
            reader.close();
            reader = null;
        }
    }

    /** Opens the reader, or reopens it when the path now holds another bus than the one it maps. */
    private void refreshReader() {
        if (reader == null) {
            openReader();
            return;
        }
        String now = bus.busIdNow();
        if (now != null && !now.equals(readerId)) {
            closeReader();
            openReader();
        }
    }

    /** Moves the reader to {@code pos} (only if elsewhere: the reader keeps an uncommitted slot's clock). */
    private void seek(long pos) throws IOException {
        if (reader.position() == pos) {
            return;
        }
        for (;;) {
            try {
                reader.seek(pos);
                return;
            } catch (BusGapException e) {
                pos = gap(e);
            }
        }
    }

    private boolean next() throws IOException {
        for (;;) {
            try {
                return reader.next();
            } catch (BusGapException e) {
                seek(gap(e));
            }
        }
    }

    /** A retention gap met by the reader: fails the query, or counts it and returns where to go on. */
    private long gap(BusGapException e) {
        String msg = "mappedbus: data lost on rolling bus " + options.path + " (bus " + readerId + "): positions ["
                + e.lostFrom() + ", " + e.lostTo() + ") (" + e.lost() + " record slots) were removed by retention "
                + "before this query read them";
        if (options.failOnDataLoss) {
            throw new IllegalStateException(msg + " (option failOnDataLoss=false continues from the oldest "
                    + "retained record, counting them in the lostSlots metric)", e);
        }
        countLost(e.lostFrom(), e.lostTo(), msg + "; continuing at " + e.lostTo() + " (failOnDataLoss=false)");
        return e.lostTo();
    }

    /** Counts the slots of {@code [from, to)} of the current bus as lost, once. */
    private void countLost(long from, long to, String warning) {
        if (!java.util.Objects.equals(countedBus, readerId)) {
            countedBus = readerId;
            countedTo = -1;
        }
        long a = Math.max(from, countedTo);
        if (to <= a) {
            return;
        }
        lostSlots += bus.slots(a, to);
        countedTo = to;
        LOG.warn(warning);
    }

    /**
     * Where a batch starting at {@code start} begins in the bus the reader reads: {@code start} itself, or,
     * if the offset names another bus (deleted and recreated), that bus's earliest record (or the query
     * fails, with failOnDataLoss).
     */
    private long startIn(BusOffset start) {
        if (start.busId == null || start.busId.equals(readerId)) {
            return start.position; // the same bus, or a checkpoint from before ids: unknown, trusted
        }
        String msg = "mappedbus: bus " + options.path + " was replaced: this query's offset is position "
                + start.position + " of bus " + start.busId + ", but the path now holds bus "
                + (readerId == null ? "(none: a file without metadata)" : readerId)
                + " (deleted and recreated); the records of bus " + start.busId + " from position "
                + start.position + " on that the query had not read are lost (their number is unknown: that bus "
                + "is gone)";
        if (options.failOnDataLoss) {
            throw new IllegalStateException(msg + " (option failOnDataLoss=false reads the new bus from its "
                    + "earliest record)");
        }
        if (!start.json().equals(lastReplacedFrom)) {
            lastReplacedFrom = start.json();
            replacedBuses++;
            LOG.warn(msg + "; reading the new bus from its earliest record (failOnDataLoss=false)");
        }
        return bus.earliest();
    }

    /** The offset of this bus's oldest record now: where a bus that joins a multi-bus stream starts. */
    BusOffset earliestOffset() {
        refreshReader();
        return new BusOffset(bus.earliest(), readerId);
    }

    /** Record slots of this bus in {@code [from, to)} (rolled-back and lost ones included). */
    long slots(long from, long to) {
        return bus.slots(from, to);
    }

    // -- MicroBatchStream ----------------------------------------------------------------------------

    @Override
    public Offset initialOffset() {
        BusOffset o = initial();
        commitConsumer(o); // a query without a checkpoint: its consumer (new, or of an earlier run) starts here
        return o;
    }

    private BusOffset initial() {
        refreshReader();
        if (options.startingTimeNs != null) {
            return new BusOffset(bus.positionAtTime(options.startingTimeNs), readerId);
        }
        try {
            switch (options.startingPosition) {
                case "earliest":
                    return new BusOffset(bus.earliest(), readerId);
                case "latest":
                    return new BusOffset(reader.seekToEnd(), readerId);
                default:
                    return new BusOffset(Long.parseLong(options.startingPosition), readerId);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public Offset deserializeOffset(String json) {
        return BusOffset.parse(json);
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
        refreshReader();
        availableNowEnd = bus.end();
    }

    /**
     * {@inheritDoc} {@code startOffset} is the end of the last committed batch (Spark runs one batch at a time),
     * or the query's start: committed to the consumer first.
     */
    @Override
    public Offset latestOffset(Offset startOffset, ReadLimit limit) {
        refreshReader();
        commitConsumer(BusOffset.of(startOffset));
        return nextEnd(startOffset, limit);
    }

    /** The end of the next batch from {@code startOffset}, without committing anything. */
    Offset latestOffsetFrom(Offset startOffset, ReadLimit limit) {
        refreshReader();
        return nextEnd(startOffset, limit);
    }

    private Offset nextEnd(Offset startOffset, ReadLimit limit) {
        long max = limit instanceof ReadMaxRows ? ((ReadMaxRows) limit).maxRows() : Long.MAX_VALUE;
        long count = 0;
        int idle = 0;
        try {
            seek(startIn(BusOffset.of(startOffset)));
            while (count < max && reader.position() < availableNowEnd) {
                if (next()) {
                    count++;
                } else if (availableNowEnd == Long.MAX_VALUE) {
                    if (++idle > bus.idlePolls()) {
                        break; // a running stream: the next trigger looks again, on the same clock
                    }
                } else {
                    // Trigger.AvailableNow: every slot below its end was allocated when the query started, so
                    // wait here; the reader rolls a hung run back after one timeout, and the query ends.
                    Thread.sleep(1);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("mappedbus: interrupted while waiting for uncommitted slots", e);
        } catch (EOFException e) {
            // A single-file bus is full: nothing more will come.
        } catch (io.mappedbuspy.BusReplacedException e) {
            // The reader noticed its bus removed or replaced while waiting for records.
            if (options.failOnDataLoss) {
                throw new IllegalStateException("mappedbus: " + e.getMessage() + " (option failOnDataLoss=false "
                        + "goes on with the bus found at " + options.path + " from its earliest record)", e);
            }
            LOG.warn("mappedbus: " + e.getMessage() + "; reopening " + options.path + " (failOnDataLoss=false)");
            BusOffset s = BusOffset.of(startOffset);
            long at = reader.position();
            closeReader(); // the next trigger reopens whatever bus the path holds then, and compares ids
            return new BusOffset(Math.max(at, s.position), readerId);
        } catch (IOException e) {
            throw new UncheckedIOException("mappedbus: cannot read " + options.path + ": " + e.getMessage(), e);
        }
        return new BusOffset(reader.position(), readerId);
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
        BusOffset s = BusOffset.of(start);
        BusOffset e = BusOffset.of(end);
        refreshReader();
        if (e.busId != null && !e.busId.equals(readerId)) {
            // The batch was planned (before a restart) on a bus that is gone: its slots are another bus's now.
            String msg = "mappedbus: bus " + options.path + " was replaced: the batch [" + s.position + ", "
                    + e.position + ") of bus " + e.busId + " cannot be read, the path now holds bus "
                    + (readerId == null ? "(none: a file without metadata)" : readerId) + " (deleted and recreated)";
            if (options.failOnDataLoss) {
                throw new IllegalStateException(msg + " (option failOnDataLoss=false skips it and reads the new "
                        + "bus from its earliest record)");
            }
            String was = readerId;
            readerId = e.busId; // count against the old bus
            countLost(s.position, e.position, msg + "; skipped (failOnDataLoss=false)");
            readerId = was;
            return new InputPartition[0];
        }
        long from = s.busId != null && e.busId != null && !s.busId.equals(e.busId) ? bus.earliest() : s.position;
        commitConsumer(s); // the batch before this one is committed (a restart re-runs an uncommitted last one)
        BusSource.Lost lost = (a, b, n) -> {
            String msg = "mappedbus: data lost on rolling bus " + options.path + " (bus " + readerId
                    + "): positions [" + a + ", " + b + ") (" + n + " record slots) of a "
                    + "planned batch were removed by retention before this query read them";
            if (options.failOnDataLoss) {
                throw new IllegalStateException(msg + " (option failOnDataLoss=false skips them, counting "
                        + "them in the lostSlots metric)");
            }
            countLost(a, b, msg + "; skipped (failOnDataLoss=false)");
        };
        if (options.frames) {
            // Whole messages, each settled by the driver's framed reader: offsets are first slots.
            return bus.planFrames(from, e.position, lost, options.topics).toArray(new InputPartition[0]);
        }
        return bus.plan(from, e.position, lost).toArray(new InputPartition[0]);
    }

    // -- SupportsRealTimeMode ------------------------------------------------------------------------

    @Override
    public void prepareForRealTimeMode() {
        if (options.maxRecordsPerTrigger > 0) {
            throw new IllegalArgumentException("mappedbus: option maxRecordsPerTrigger does not apply in real-time "
                    + "mode (a batch reads every record committed while it runs); remove it for " + options.path);
        }
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start) {
        refreshReader();
        long from = startIn(BusOffset.of(start));
        try {
            seek(from); // a rolling bus's retention gap: fails the query, or goes on past it (counted)
        } catch (IOException e) {
            throw new UncheckedIOException("mappedbus: cannot read " + options.path + ": " + e.getMessage(), e);
        }
        from = reader.position();
        realTimeStart = new BusOffset(from, readerId);
        commitConsumer(realTimeStart); // the previous long-running batch ended here and is committed
        String required = options.checkHost ? BusPartition.localHostName() : null;
        return new InputPartition[] {
            new BusRealTimePartition(options, bus.fileSize(), from, readerId, BusPartition.executorHost(), required)
        };
    }

    @Override
    public Offset mergeOffsets(PartitionOffset[] offsets) {
        BusPartitionOffset end = null;
        for (PartitionOffset o : offsets) {
            BusPartitionOffset b = (BusPartitionOffset) o;
            if (end == null || b.position > end.position) {
                end = b;
            }
        }
        if (end == null) {
            if (realTimeStart == null) {
                throw new IllegalStateException("mappedbus: no partition offsets to merge for " + options.path);
            }
            return realTimeStart;
        }
        return new BusOffset(end.position, end.busId);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return factory;
    }

    @Override
    public void commit(Offset end) {
        // Records stay in the bus for every other reader: only the query's consumer moves on.
        commitConsumer(BusOffset.of(end));
    }

    /**
     * {@code lostSlots}: record slots lost (failOnDataLoss=false); {@code replacedBuses}: times the path held
     * another bus than the offsets named (its unread records are lost, uncounted); {@code recordsBehindLimit}:
     * slots between the latest consumed offset and the bus's limit.
     */
    @Override
    public Map<String, String> metrics(Optional<Offset> latestConsumedOffset) {
        Map<String, String> m = new HashMap<>();
        m.put("lostSlots", Long.toString(lostSlots));
        m.put("replacedBuses", Long.toString(replacedBuses));
        if (latestConsumedOffset.isPresent()) {
            BusOffset o = BusOffset.of(latestConsumedOffset.get());
            long behind = -1;
            try {
                behind = bus.lag(o.position);
            } catch (RuntimeException e) {
                // the bus is being replaced: no number this time
            }
            if (behind >= 0) {
                m.put("recordsBehindLimit", Long.toString(behind));
            }
        }
        return m;
    }

    /** Closes the driver's reader, which releases the query's consumer (the entry stays: its position holds). */
    @Override
    public void stop() {
        closeReader();
        BusRealTimeReader.closeParked(options.path);
        if (ephemeral) {
            try {
                Consumers.removeConsumer(options.path, consumer);
            } catch (java.util.NoSuchElementException e) {
                // never registered (the query stopped before its first trigger), or the bus is gone
            } catch (IOException | RuntimeException e) {
                LOG.warn("mappedbus: consumer '" + consumer + "' of " + options.path + " (a query with a temporary "
                        + "checkpoint) not removed: " + e.getMessage());
            }
        }
    }

    @Override
    public String toString() {
        return "mappedbus[" + options.path + "]";
    }
}
