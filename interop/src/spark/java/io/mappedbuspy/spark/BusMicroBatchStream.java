package io.mappedbuspy.spark;

import io.mappedbuspy.Layout;
import io.mappedbuspy.MappedBusReader;
import io.mappedbuspy.MappedBusWriter;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;

import java.io.EOFException;
import java.io.IOException;
import java.io.UncheckedIOException;

/**
 * Micro-batches of a bus file. Offsets are byte positions of record slots, so a query restarted from its
 * checkpoint re-reads exactly the slots of its last planned batch and goes on from there.
 *
 * <p>The driver finds each batch's end with a {@link MappedBusReader} (read-write, like any bus reader):
 * the batch stops before the first uncommitted slot; once a slot has stayed uncommitted for
 * {@code timeoutMs} the reader rolls it back (CAS 0 -> 2) and the stream goes past it. Rolled-back slots
 * are skipped. So every slot in a planned batch is settled, and tasks read it read-only.
 */
final class BusMicroBatchStream implements MicroBatchStream, SupportsTriggerAvailableNow {
    private final BusOptions options;
    private final PartitionReaderFactory factory;
    private final long fileSize;
    private MappedBusReader reader;
    /** Under Trigger.AvailableNow: the limit when the query started; later records wait for the next run. */
    private long availableNowEnd = Long.MAX_VALUE;

    BusMicroBatchStream(BusOptions options, PartitionReaderFactory factory) {
        this.options = options;
        this.factory = factory;
        this.fileSize = options.resolveFileSize(true);
    }

    private MappedBusReader reader() {
        if (reader == null) {
            try {
                if (!new java.io.File(options.path).exists()) {
                    // fileSize was given (resolveFileSize checked): a bus reader never creates its file, so
                    // the stream creates it as a writer does, for writers that come later.
                    new MappedBusWriter(options.path, fileSize, options.recordSize).open().close();
                }
                MappedBusReader r = new MappedBusReader(options.path, fileSize, options.recordSize);
                r.open();
                r.setTimeout(options.timeoutMs);
                reader = r;
            } catch (IOException e) {
                throw new UncheckedIOException("mappedbus: cannot open " + options.path, e);
            }
        }
        return reader;
    }

    @Override
    public Offset initialOffset() {
        switch (options.startingPosition) {
            case "earliest":
                return new BusOffset(Layout.FIRST_RECORD_OFFSET);
            case "latest":
                try {
                    reader().seekToEnd();
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
                return new BusOffset(Math.min(reader().position(), lastSlotEnd()));
            default:
                return new BusOffset(Long.parseLong(options.startingPosition));
        }
    }

    private long lastSlotEnd() {
        long slot = Layout.slotSize(options.recordSize);
        return Layout.FIRST_RECORD_OFFSET + (fileSize - Layout.FIRST_RECORD_OFFSET) / slot * slot;
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
        MappedBusReader r = reader();
        long pos = r.position();
        try {
            r.seekToEnd();
            availableNowEnd = Math.min(r.position(), lastSlotEnd());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } finally {
            r.seek(pos);
        }
    }

    @Override
    public Offset latestOffset(Offset startOffset, ReadLimit limit) {
        long start = ((BusOffset) startOffset).position;
        long max = limit instanceof ReadMaxRows ? ((ReadMaxRows) limit).maxRows() : Long.MAX_VALUE;
        MappedBusReader r = reader();
        // Seek only when moved elsewhere: the reader keeps the timer of an uncommitted slot across calls.
        if (r.position() != start) {
            r.seek(start);
        }
        long count = 0;
        try {
            while (count < max && r.position() < availableNowEnd) {
                if (r.next()) {
                    count++;
                } else if (availableNowEnd == Long.MAX_VALUE) {
                    break; // a running stream: the next trigger looks again, on the same clock
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
            // The bus is full: nothing more will come.
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return new BusOffset(r.position());
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
        long s = ((BusOffset) start).position;
        long e = ((BusOffset) end).position;
        return BusPartition.split(options, fileSize, s, e, false);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return factory;
    }

    @Override
    public void commit(Offset end) {
        // Nothing to release: records stay in the file for every other reader.
    }

    @Override
    public void stop() {
        if (reader != null) {
            reader.close();
            reader = null;
        }
    }

    @Override
    public String toString() {
        return "mappedbus[" + options.path + "]";
    }
}
