package io.mappedbuspy.spark.read;

import io.mappedbuspy.internal.ArchiveFiles;
import io.mappedbuspy.CorruptBusException;
import io.mappedbuspy.Layout;
import io.mappedbuspy.internal.MemoryMappedFile;
import io.mappedbuspy.SlotHolder;
import io.mappedbuspy.SlotHolders;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.LocalScan;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.types.StructType;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.NoSuchFileException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import io.mappedbuspy.spark.stream.BusMicroBatchStream;
import io.mappedbuspy.spark.BusOptions;
import io.mappedbuspy.spark.BusSource;
import io.mappedbuspy.spark.stream.MultiBusMicroBatchStream;

/**
 * A batch or micro-batch scan of a bus file.
 *
 * <p>Batch planning maps the file read-only, takes the limit, and walks the statuses up to it: the batch
 * ends at the first uncommitted slot ({@code uncommitted=stop}, the default), or, with
 * {@code uncommitted=wait}, waits for uncommitted slots and skips those still uncommitted (locally: a batch
 * read never writes to the file); a run of them shares one {@code timeoutMs}, so a crashed writer's batch
 * costs one timeout. Rolled-back slots are skipped.
 */
public final class BusScan implements Scan, Batch {
    private final BusOptions options;
    private final StructType schema;
    /** Positions read: pushed-down filters and startingPosition/endingPosition, {@code [lo, hi)}. */
    private long lo;
    private long hi;
    private boolean bounded;
    /** Pushed-down metadata values (sorted), or null for any. */
    private final int[] metas;
    private final boolean pushed;
    /** {@code count(*)} aggregates pushed down (the schema is then one long column per aggregate), or 0. */
    int counts;
    /** Planned by a task of a per-host read on its own host (see {@link HostPartition}). */
    private boolean local;
    /** A framed bus: the topics pushed down ({@code topic = x}, {@code topic IN (...)}), or null for all. */
    String[] topics;
    /** While {@link #count()} plans: the committed (meta-matching) records of the planned ranges so far. */
    private Tally counted;

    public BusScan(BusOptions options, StructType schema) {
        this(options, schema, Long.MIN_VALUE, Long.MAX_VALUE, null);
    }

    public BusScan(BusOptions options, StructType schema, long lo, long hi, int[] metas) {
        this.options = options;
        this.schema = schema;
        this.pushed = lo != Long.MIN_VALUE || hi != Long.MAX_VALUE || metas != null;
        this.lo = lo;
        this.hi = hi;
        this.metas = metas;
    }

    @Override
    public StructType readSchema() {
        return schema;
    }

    @Override
    public String description() {
        return "mappedbus " + (options.buses != null ? options.raw.get("path") : options.path) + " recordSize=" + options.recordSize
                + (options.layout == null ? "" : " layout=" + options.layout.name())
                + (lo == Long.MIN_VALUE && hi == Long.MAX_VALUE ? "" : " positions=[" + (lo == Long.MIN_VALUE
                ? "" : lo) + ", " + (hi == Long.MAX_VALUE ? "" : hi) + ")")
                + (metas == null ? "" : " meta in " + Arrays.toString(metas))
                + (options.frames ? " frames" : "") + (topics == null ? "" : " topic in " + Arrays.toString(topics))
                + (counts == 0 ? "" : " count(*) pushed");
    }

    @Override
    public Batch toBatch() {
        return this;
    }

    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
        if (options.frames && options.buses != null) {
            throw new UnsupportedOperationException("mappedbus: a stream of several framed buses is not supported yet"
                    + " (" + options.raw.get("path") + "): one query per bus");
        }
        if (pushed || counts != 0) {
            // Spark does not push filters into streaming scans; were it to, they must not be lost.
            throw new IllegalStateException("mappedbus: filters were pushed into a streaming scan of " + options.path);
        }
        if (options.hosts != null) {
            throw new IllegalArgumentException("mappedbus: option 'hosts' (per-host reads) is for batch reads; "
                    + "a stream reads the driver's bus " + options.path);
        }
        // The query's consumer name, stable per checkpoint (each source of a query has its own location).
        String consumer = options.consumerName(checkpointLocation);
        boolean ephemeral = options.ephemeralConsumer(checkpointLocation);
        if (options.buses != null) {
            return new MultiBusMicroBatchStream(options, createReaderFactory(), consumer, ephemeral);
        }
        return new BusMicroBatchStream(options, createReaderFactory(), consumer, ephemeral);
    }

    @Override
    public InputPartition[] planInputPartitions() {
        if (!bounded) { // batch only: startingPosition=latest is a streaming option
            lo = Math.max(lo, options.startingTimeNs != null
                    ? BusSource.forRead(options).positionAtTime(options.startingTimeNs) : options.batchStart());
            hi = Math.min(hi, options.batchEnd());
            bounded = true;
        }
        if (options.frames) {
            if (options.hosts != null || options.buses != null) {
                throw new UnsupportedOperationException("mappedbus: per-host reads and reads of several buses are not"
                        + " supported on framed buses yet (" + options.raw.get("path") + ")");
            }
            return planFrames(BusSource.forRead(options));
        }
        if (options.hosts != null && !local) {
            return HostPartition.plan(options, lo, hi, metas);
        }
        if (options.buses != null) {
            // Each bus planned on its own, with its own options: its own partitions.
            List<InputPartition> parts = new ArrayList<>();
            StructType inner = MultiBusPartition.withoutBus(schema);
            for (String bus : options.buses) {
                BusOptions o = options.forBus(bus);
                BusScan s = new BusScan(o, inner, lo, hi, metas);
                s.local = local;
                s.counted = counted;
                s.bounded = true;
                for (InputPartition p : s.planInputPartitions()) {
                    parts.add(new MultiBusPartition(p, bus, o));
                }
            }
            return parts.toArray(new InputPartition[0]);
        }
        return planFiles(BusSource.forRead(options));
    }

    /**
     * Each file of the bus in order (a single file, or each retained segment of a rolling bus), planned on its own:
     * partitions never span files, and files outside the pushed range are not opened. {@code uncommitted=stop}
     * ends the whole read at the first uncommitted slot.
     */
    private InputPartition[] planFiles(BusSource bus) {
        List<InputPartition> parts = new ArrayList<>();
        for (BusSource.BusFile f : bus.files()) {
            // The pushed range in this file's offsets.
            long base = f.base;
            if (hi != Long.MAX_VALUE && base + Layout.FIRST_RECORD_OFFSET >= hi) {
                break;
            }
            if (lo != Long.MIN_VALUE && lo >= base + f.end) {
                continue;
            }
            long from = lo <= base ? Layout.FIRST_RECORD_OFFSET : alignUp(lo - base);
            long to = hi == Long.MAX_VALUE || hi - base >= f.size ? Long.MAX_VALUE : alignUp(hi - base);
            if (from >= to) {
                continue;
            }
            Settled range;
            try (MemoryMappedFile m = ArchiveFiles.mapForRead(f.path, f.size); // in either tier
                 SlotHolders holders = f.segment ? SlotHolders.ofRollingBus(parentOf(f.path)) : SlotHolders.ofBus(f.path)) {
                range = settledRange(m, options, f.path, f.size, from, to, counted, metas, holders, base);
            } catch (NoSuchFileException e) {
                if (!f.segment) {
                    throw new UncheckedIOException("mappedbus: cannot plan a read of " + f.path, e);
                }
                continue; // removed by retention since the listing: the read starts at a later segment
            } catch (IOException e) {
                throw new UncheckedIOException("mappedbus: cannot plan a read of " + f.path, e);
            }
            parts.addAll(Arrays.asList(BusPartition.split(options, f.path, f.size,
                    base, Math.min(from, range.end()), range.end(), range.skipped(), local)));
            if (range.stopped()) {
                break;
            }
        }
        return parts.toArray(new InputPartition[0]);
    }

    /** A framed bus: each file's messages, cut into partitions at first slots ({@link FramePartition#plan}). */
    private InputPartition[] planFrames(BusSource bus) {
        List<InputPartition> parts = new ArrayList<>();
        String topicsFile = options.topicsFile();
        String[] topics = deliveredTopics(this.topics, options.topics);
        for (BusSource.BusFile f : bus.files()) {
            FramePartition.Planned planned;
            try {
                planned = FramePartition.plan(options, f.path, f.size, f.base, topicsFile, topics);
            } catch (NoSuchFileException e) {
                if (!f.segment) {
                    throw new UncheckedIOException("mappedbus: cannot plan a read of " + f.path, e);
                }
                continue; // removed by retention since the listing
            } catch (IOException e) {
                throw new UncheckedIOException("mappedbus: cannot plan a read of " + f.path, e);
            }
            parts.addAll(planned.parts());
            if (planned.stopped()) {
                break;
            }
        }
        return parts.toArray(new InputPartition[0]);
    }

    /** The topics both the pushed filter and option {@code topics} let through (null: either's, or every one). */
    static String[] deliveredTopics(String[] pushed, String[] option) {
        if (pushed == null || option == null) {
            return pushed == null ? option : pushed;
        }
        List<String> both = new ArrayList<>(Arrays.asList(pushed));
        both.retainAll(Arrays.asList(option));
        return both.toArray(new String[0]);
    }

    /**
     * A pushed-down {@code count(*)} answered on the driver: the planning walk over the statuses (the one
     * every read does) counts the committed, meta-matching records of exactly the ranges it plans, so no
     * task walks them again.
     */
    long count() {
        counted = new Tally();
        try {
            planInputPartitions();
            return counted.committed;
        } finally {
            counted = null;
        }
    }

    /** A {@code count(*)} scan answered at planning: one row of the count, which Spark sums as ever. */
    static final class Count implements LocalScan {
        private final BusScan scan;
        private InternalRow[] rows;

        Count(BusScan scan) {
            this.scan = scan;
        }

        @Override
        public InternalRow[] rows() {
            if (rows == null) {
                Object[] v = new Object[scan.counts];
                Arrays.fill(v, scan.count());
                rows = new InternalRow[] {new GenericInternalRow(v)};
            }
            return rows;
        }

        @Override
        public StructType readSchema() {
            return scan.readSchema();
        }

        @Override
        public String description() {
            return scan.description() + " (answered at planning)";
        }
    }

    /** Plans this host's own bus, in a task of a per-host read: one partition per file, no Spark calls. */
    static InputPartition[] planLocally(BusOptions o, StructType schema, long lo, long hi, int[] metas) {
        BusScan s = new BusScan(o, schema, lo, hi, metas);
        s.local = true;
        s.bounded = true;
        return s.planInputPartitions();
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        BusReaderFactory f = new BusReaderFactory(options, schema, metas);
        f.counts = counts;
        return f;
    }

    /**
     * Where a batch of one file ends ({@link #settledRange}).
     *
     * @param end     the end offset
     * @param skipped whether an uncommitted slot was skipped inside it (waited out to the timeout)
     * @param stopped whether it stopped at an uncommitted slot ({@code uncommitted=stop})
     */
    record Settled(long end, boolean skipped, boolean stopped) { }

    /** The committed, meta-matching slots a planning walk counted (a pushed-down {@code count(*)}). */
    static final class Tally {
        long committed;
    }

    /** A walk of the settled slots of a file remembered in this JVM: where it stopped, and what it counted. */
    private record Walked(long end, long committed) { }

    /** The end of the batch. */
    static Settled settledRange(MemoryMappedFile m, BusOptions o, String path, long fileSize)
            throws CorruptBusException {
        return settledRange(m, o, path, fileSize, Layout.FIRST_RECORD_OFFSET, Long.MAX_VALUE);
    }

    /**
     * The end of the run of settled slots (committed or rolled back) from {@code from}, found with
     * plain reads: a settled status never changes, so a plain read that sees one is right;
     * anything else (uncommitted, or invalid) is left to the caller's acquire loads from there.
     */
    static long settledPrefix(MemoryMappedFile m, long from, long end, long slot) {
        return settledPrefix(m, from, end, slot, null, null);
    }

    /**
     * As {@link #settledPrefix(MemoryMappedFile, long, long, long)}, adding to {@code count} (if given)
     * the committed slots of the run whose metadata is in {@code metas} (sorted; null: any).
     */
    static long settledPrefix(MemoryMappedFile m, long from, long end, long slot, Tally count, int[] metas) {
        // A settled status never changes, so a walk resumes where the last walk of the same file, start
        // and metadata filter in this JVM stopped: re-planning a growing bus costs its new slots only.
        // Only files whose metadata names their bus are remembered (a new bus gets a new random id; a
        // file without metadata could be another one under a reused inode), by id, device and inode.
        BusPartition.Identity id = BusPartition.Identity.of(m.path(), BusPartition.isSegment(m.path()));
        String key = id.busId == null || id.inode != m.inode() || id.device != m.device() ? null
                : id.busId + ":" + m.device() + ":" + m.inode() + ":" + slot + ":" + from + ":" + Arrays.toString(metas);
        Walked walked = key == null ? null : WALKED.get(key);
        long pos = from;
        long n = 0;
        if (walked != null && walked.end() > from && walked.end() <= end) {
            int last = m.getInt(walked.end() - slot);
            if (last == Layout.STATUS_COMMITTED || last == Layout.STATUS_ROLLED_BACK) {
                pos = walked.end();
                n = walked.committed();
            }
        }
        // Plain reads of each status straight from the mapping: a slot is shorter than a cache line, so
        // every line is read anyway, and a bulk copy only adds a second pass (measured 23-40 ms against
        // 48-95 ms for 20 M slots).
        for (; pos + slot <= end; pos += slot) {
            int st = m.getInt(pos);
            if (st == Layout.STATUS_COMMITTED) {
                if (metas == null || Arrays.binarySearch(metas, m.getInt(pos + Layout.METADATA_OFFSET)) >= 0) {
                    n++;
                }
            } else if (st != Layout.STATUS_ROLLED_BACK) {
                break; // the caller's acquire loads take over (and count) from here
            }
        }
        if (key != null && pos > from && (walked == null || pos > walked.end())) {
            if (WALKED.size() >= WALKED_MAX) {
                WALKED.clear(); // files come and go (segments, recreated buses): keep the map small
            }
            WALKED.put(key, new Walked(pos, n));
        }
        if (count != null) {
            count.committed += n;
        }
        return pos;
    }

    /**
     * Allocated slots looked at past the uncommitted slot that ends a batch ({@code uncommitted=stop}). A
     * file read with the wrong record size (one without metadata, which would tell it) has payload bytes
     * where this grid puts statuses, and a "status" 0 among them would end the read quietly; the slots after
     * it show the mistake (a status other than 0, 1 or 2) within a few slots, where a bus reader that waited
     * that slot out would meet it.
     */
    static final int LOOK_AHEAD_SLOTS = 4096;

    /**
     * Fails if a slot of {@code [from, end)} (the allocated slots past an uncommitted one, at most
     * {@link #LOOK_AHEAD_SLOTS}) holds a status no writer or reader ever stores.
     */
    static void checkAhead(MemoryMappedFile m, String path, int recordSize, long from, long end)
            throws CorruptBusException {
        long slot = Layout.slotSize(recordSize);
        long stop = Math.min(end, from + LOOK_AHEAD_SLOTS * slot);
        for (long pos = from; pos + slot <= stop; pos += slot) {
            int status = m.getStatus(pos);
            if (status != Layout.STATUS_NOT_SET && status != Layout.STATUS_COMMITTED
                    && status != Layout.STATUS_ROLLED_BACK) {
                throw invalidStatus(path, pos, status, recordSize);
            }
        }
    }

    /** A status other than 0, 1 or 2: the record grid is not the file's, or the file is corrupt. */
    static CorruptBusException invalidStatus(String path, long pos, int status, int recordSize) {
        return new CorruptBusException("mappedbus: record at position " + pos + " in " + path + " has invalid status "
                + status + " (wrong recordSize " + recordSize + ", or a corrupt file; a bus made by the Java "
                + "original has no metadata giving its record size: option recordSize must be the one its "
                + "writers use)");
    }

    /** A slot uncommitted this long has its writer asked for, then again this often (as the bus readers do). */
    private static final long ASK_AFTER_NS = 1_000_000L;

    // The directory of a rolling bus's segment: where its writers file is.
    private static String parentOf(String segment) {
        java.nio.file.Path p = java.nio.file.Paths.get(segment).toAbsolutePath().getParent();
        return p == null ? "/" : p.toString();
    }

    private static final int WALKED_MAX = 4096;
    private static final ConcurrentHashMap<String, Walked> WALKED = new ConcurrentHashMap<>();

    /** The first record boundary at or after {@code offset} (an offset in one file). */
    private long alignUp(long offset) {
        if (offset <= Layout.FIRST_RECORD_OFFSET) {
            return Layout.FIRST_RECORD_OFFSET;
        }
        long slot = Layout.slotSize(options.recordSize);
        long k = (offset - Layout.FIRST_RECORD_OFFSET + slot - 1) / slot;
        return Layout.FIRST_RECORD_OFFSET + k * slot;
    }

    /**
     * As {@link #settledRange(MemoryMappedFile, BusOptions, String, long)}, for the slots from {@code from}
     * (a record boundary) to at most {@code to}.
     */
    static Settled settledRange(MemoryMappedFile m, BusOptions o, String path, long fileSize, long from, long to)
            throws CorruptBusException {
        return settledRange(m, o, path, fileSize, from, to, null, null, null, 0);
    }

    /**
     * As above, adding to {@code count} (if given) the committed slots of the range it returns whose
     * metadata is in {@code metas} (sorted; null: any): what the partitions of that range would count.
     * With {@code uncommitted=wait}, a slot that stays uncommitted has its writer looked up in {@code holders}
     * (null: none to ask; {@code base}: the bus position of the file's offset 0): a dead writer's slots are passed
     * at once (the partitions skip them, as those the timeout gave up), a live writer's are waited for however
     * long it takes, and a slot nobody is known to hold waits out the timeout, as before.
     */
    static Settled settledRange(MemoryMappedFile m, BusOptions o, String path, long fileSize, long from, long to,
            Tally count, int[] metas, SlotHolders holders, long base) throws CorruptBusException {
        long slot = Layout.slotSize(o.recordSize);
        long usable = Math.min(fileSize, m.size());
        if (usable < Layout.FIRST_RECORD_OFFSET + slot) {
            return new Settled(from, false, false);
        }
        long maxEnd = Layout.FIRST_RECORD_OFFSET + (usable - Layout.FIRST_RECORD_OFFSET) / slot * slot;
        long limit = m.getLongAcquire(Layout.LIMIT_OFFSET);
        if (limit != 0 && !Layout.isRecordBoundary(limit, o.recordSize)) {
            throw new CorruptBusException("limit " + limit + " in " + path + " is not on a record boundary "
                    + "for recordSize " + o.recordSize + " (wrong recordSize, or a corrupt file)");
        }
        long allocated = Math.min(limit, maxEnd);
        long end = Math.max(from, Math.min(Math.min(limit, maxEnd), to));
        boolean skipped = false;
        // One clock for a run of uncommitted slots (every slot here was allocated when it started): a
        // crashed batch costs one timeout, not one per slot. It stops when a slot waited on commits.
        boolean clock = false;
        long deadline = 0;
        SlotHolder.Dead dead = null; // the last dead writer's claim: its slots are passed without asking again
        for (long pos = settledPrefix(m, from, end, slot, count, metas); pos < end; pos += slot) {
            int status = m.getStatus(pos);
            if (status == Layout.STATUS_NOT_SET) {
                if (!o.waitUncommitted) {
                    checkAhead(m, path, o.recordSize, pos + slot, allocated);
                    return new Settled(pos, false, true);
                }
                if (dead != null && dead.holds(base + pos)) {
                    skipped = true;
                    continue;
                }
                if (!clock) {
                    clock = true;
                    deadline = System.nanoTime() + o.timeoutMs * 1_000_000L;
                }
                long askDue = System.nanoTime() + ASK_AFTER_NS;
                while ((status = m.getStatus(pos)) == Layout.STATUS_NOT_SET && System.nanoTime() - deadline < 0) {
                    Thread.onSpinWait();
                    try {
                        Thread.sleep(1);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        throw new IllegalStateException("interrupted while waiting for a commit", e);
                    }
                    long now = System.nanoTime();
                    if (holders != null && now - askDue >= 0) {
                        askDue = now + ASK_AFTER_NS;
                        SlotHolder h = holders.holderOf(base + pos);
                        if (h instanceof SlotHolder.Dead d) {
                            dead = d;
                            break;
                        }
                        if (h instanceof SlotHolder.Alive) {
                            deadline = now + o.timeoutMs * 1_000_000L; // alive: never given up
                        }
                    }
                }
                if (status == Layout.STATUS_NOT_SET) {
                    skipped = true; // its writer is dead, or none is known and the timeout passed
                    continue;
                }
                clock = false;
            }
            if (status != Layout.STATUS_COMMITTED && status != Layout.STATUS_ROLLED_BACK) {
                throw invalidStatus(path, pos, status, o.recordSize);
            }
            if (count != null && status == Layout.STATUS_COMMITTED
                    && (metas == null || Arrays.binarySearch(metas, m.getInt(pos + Layout.METADATA_OFFSET)) >= 0)) {
                count.committed++;
            }
        }
        return new Settled(end, skipped, false);
    }
}
