package io.mappedbuspy.spark;

import io.mappedbuspy.CorruptBusException;
import io.mappedbuspy.Layout;
import io.mappedbuspy.MemoryMappedFile;
import org.apache.spark.sql.connector.read.Batch;
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

/**
 * A batch or micro-batch scan of a bus file.
 *
 * <p>Batch planning maps the file read-only, takes the limit, and walks the statuses up to it: the batch
 * ends at the first uncommitted slot ({@code uncommitted=stop}, the default), or, with
 * {@code uncommitted=wait}, waits for uncommitted slots and skips those still uncommitted (locally: a batch
 * read never writes to the file); a run of them shares one {@code timeoutMs}, so a crashed writer's batch
 * costs one timeout. Rolled-back slots are skipped.
 */
final class BusScan implements Scan, Batch {
    private final BusOptions options;
    private final StructType schema;

    BusScan(BusOptions options, StructType schema) {
        this.options = options;
        this.schema = schema;
    }

    @Override
    public StructType readSchema() {
        return schema;
    }

    @Override
    public String description() {
        return "mappedbus " + options.path + " recordSize=" + options.recordSize
                + (options.layout == null ? "" : " layout=" + options.layout.name());
    }

    @Override
    public Batch toBatch() {
        return this;
    }

    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
        return new BusMicroBatchStream(options, createReaderFactory());
    }

    @Override
    public InputPartition[] planInputPartitions() {
        if (options.rolling) {
            return planRolling();
        }
        long fileSize = options.resolveFileSize(true);
        try (MemoryMappedFile m = new MemoryMappedFile(options.path, fileSize, true)) {
            long[] range = settledRange(m, options, options.path, fileSize);
            return BusPartition.split(options, options.path, fileSize, 0, Layout.FIRST_RECORD_OFFSET, range[0],
                    range[1] != 0);
        } catch (IOException e) {
            throw new UncheckedIOException("mappedbus: cannot plan a read of " + options.path, e);
        }
    }

    /**
     * A rolling bus: each retained segment in order, planned as a single file; partitions never span
     * segments. {@code uncommitted=stop} ends the whole read at the first uncommitted slot.
     */
    private InputPartition[] planRolling() {
        if (BusOptions.rollingMeta(options.path) == null) {
            throw new IllegalArgumentException("mappedbus: no rolling bus at " + options.path + " (no "
                    + Layout.META_FILE + ")");
        }
        RollingSegments bus = new RollingSegments(options);
        List<InputPartition> parts = new ArrayList<>();
        for (long k : bus.list()) {
            String seg = bus.path(k);
            long[] range;
            try (MemoryMappedFile m = new MemoryMappedFile(seg, options.segmentSize, true)) {
                range = settledRange(m, options, seg, options.segmentSize);
            } catch (NoSuchFileException e) {
                continue; // removed by retention since the listing: the read starts at a later segment
            } catch (IOException e) {
                throw new UncheckedIOException("mappedbus: cannot plan a read of " + seg, e);
            }
            parts.addAll(Arrays.asList(BusPartition.split(options, seg, options.segmentSize,
                    k * options.segmentSize, Layout.FIRST_RECORD_OFFSET, range[0], range[1] != 0)));
            if (range[2] != 0) {
                break;
            }
        }
        return parts.toArray(new InputPartition[0]);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new BusReaderFactory(options, schema);
    }

    /**
     * The end of the batch: {end offset, 1 if an uncommitted slot was skipped inside it else 0, 1 if it
     * stopped at an uncommitted slot else 0}.
     */
    static long[] settledRange(MemoryMappedFile m, BusOptions o, String path, long fileSize)
            throws CorruptBusException {
        long slot = Layout.slotSize(o.recordSize);
        long usable = Math.min(fileSize, m.size());
        if (usable < Layout.FIRST_RECORD_OFFSET + slot) {
            return new long[] {Layout.FIRST_RECORD_OFFSET, 0, 0};
        }
        long maxEnd = Layout.FIRST_RECORD_OFFSET + (usable - Layout.FIRST_RECORD_OFFSET) / slot * slot;
        long limit = m.getLongAcquire(Layout.LIMIT_OFFSET);
        if (limit != 0 && !Layout.isRecordBoundary(limit, o.recordSize)) {
            throw new CorruptBusException("limit " + limit + " in " + path + " is not on a record boundary "
                    + "for recordSize " + o.recordSize + " (wrong recordSize, or a corrupt file)");
        }
        long end = Math.max(Layout.FIRST_RECORD_OFFSET, Math.min(limit, maxEnd));
        long skipped = 0;
        // One clock for a run of uncommitted slots (every slot here was allocated when it started): a
        // crashed batch costs one timeout, not one per slot. It stops when a slot waited on commits.
        boolean clock = false;
        long deadline = 0;
        for (long pos = Layout.FIRST_RECORD_OFFSET; pos < end; pos += slot) {
            int status = m.getStatus(pos);
            if (status == Layout.STATUS_NOT_SET) {
                if (!o.waitUncommitted) {
                    return new long[] {pos, 0, 1};
                }
                if (!clock) {
                    clock = true;
                    deadline = System.nanoTime() + o.timeoutMs * 1_000_000L;
                }
                while ((status = m.getStatus(pos)) == Layout.STATUS_NOT_SET && System.nanoTime() - deadline < 0) {
                    Thread.onSpinWait();
                    try {
                        Thread.sleep(1);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        throw new IllegalStateException("interrupted while waiting for a commit", e);
                    }
                }
                if (status == Layout.STATUS_NOT_SET) {
                    skipped = 1;
                    continue;
                }
                clock = false;
            }
            if (status != Layout.STATUS_COMMITTED && status != Layout.STATUS_ROLLED_BACK) {
                throw new CorruptBusException("record at position " + pos + " in " + path
                        + " has invalid status " + status + " (wrong recordSize, or a corrupt file)");
            }
        }
        return new long[] {end, skipped, 0};
    }
}
