package io.mappedbuspy.spark.write;

import io.mappedbuspy.MappedBusWriter;
import io.mappedbuspy.RollingBusWriter;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingDataWriterFactory;

import java.io.EOFException;
import java.io.IOException;
import io.mappedbuspy.spark.BusOptions;
import io.mappedbuspy.spark.read.BusPartition;
import io.mappedbuspy.spark.BusSource;

/** Creates one {@link BusDataWriter} (one {@code MappedBusWriter}) per task. */
public final class BusWriterFactory implements DataWriterFactory, StreamingDataWriterFactory {
    private static final long serialVersionUID = 1L;
    /** Times a record rolled back by a reader (its writer was too slow to commit) is written again. */
    private static final int ATTEMPTS = 3;

    private final BusOptions options;
    private final String path;
    /** Single file: its logical size; rolling bus: -1. */
    private final long fileSize;
    private final int recordSize;
    private final RowEncoder encoder;
    private final String requiredHost;
    /** Query id for the exactly-once commit log, or null for at-least-once appends. */
    private final String queryId;

    BusWriterFactory(BusOptions options, long fileSize, RowEncoder encoder, String requiredHost, String queryId) {
        this.queryId = queryId;
        this.options = options;
        this.path = options.path;
        this.fileSize = fileSize;
        this.recordSize = options.recordSize;
        this.encoder = encoder;
        this.requiredHost = requiredHost;
    }

    /** Opens a writer on a rolling bus, creating it (with the options' segmentSize and retention) if absent. */
    public static synchronized RollingBusWriter openRolling(BusOptions o) throws IOException {
        return new RollingBusWriter(o.path, o.segmentSize, o.recordSize)
                .setRetention(o.retainSegments, o.retainBytes, o.retainAgeMs).setFrames(o.frames).open();
    }

    /**
     * Opens a writer. Serialised within the JVM: the core grows a short file under a FileChannel lock,
     * and two tasks of one executor taking that lock at once get OverlappingFileLockException.
     */
    public static synchronized MappedBusWriter open(String path, long fileSize, int recordSize) throws IOException {
        return open(path, fileSize, recordSize, false);
    }

    /** As {@link #open(String, long, int)}; {@code frames}: a framed bus. */
    public static synchronized MappedBusWriter open(String path, long fileSize, int recordSize, boolean frames)
            throws IOException {
        return new MappedBusWriter(path, fileSize, recordSize).setFrames(frames).open();
    }

    @Override
    public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
        return queryId != null ? new ExactlyOnceWriter(partitionId, -1) : new BusDataWriter(partitionId);
    }

    @Override
    public DataWriter<InternalRow> createWriter(int partitionId, long taskId, long epochId) {
        return queryId != null ? new ExactlyOnceWriter(partitionId, epochId) : new BusDataWriter(partitionId);
    }

    @Override
    public String toString() {
        return path + " recordSize=" + recordSize + " (" + encoder + ")";
    }

    /** The number of records a task wrote. */
    static final class Written implements WriterCommitMessage {
        private static final long serialVersionUID = 1L;
        final long records;

        Written(long records) {
            this.records = records;
        }
    }

    /**
     * Holds a task's records (as slots) until Spark commits the task, then writes them through the bus's
     * {@link CommitLog}: once per (query, epoch, partition), whatever attempts ran or crashed before.
     */
    private final class ExactlyOnceWriter implements DataWriter<InternalRow> {
        private final int partitionId;
        private final long epochId;
        private final RowEncoder.Record rec = encoder.newRecord();
        private final int slot = (int) io.mappedbuspy.Layout.slotSize(recordSize);
        private byte[] buf = new byte[slot * 64];
        private int rows;
        /** A framed bus: the task's messages and their topics, and their bytes so far. */
        private final java.util.List<byte[]> payloads = new java.util.ArrayList<>();
        private final java.util.List<String> topics = new java.util.ArrayList<>();
        private long frameHeld;

        ExactlyOnceWriter(int partitionId, long epochId) {
            this.partitionId = partitionId;
            this.epochId = epochId;
        }

        @Override
        public void write(InternalRow row) throws IOException {
            if (rows == 0) {
                BusPartition.checkHost(path, requiredHost);
            }
            try {
                encoder.encode(row, rec);
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException(e.getMessage() + " (row " + rows + " of partition "
                        + partitionId + ")", e);
            }
            if (rec.frame != null) { // a framed bus: the messages, laid out in slots at commit (topic ids then)
                frameHeld += rec.frame.length;
                if (frameHeld > Integer.MAX_VALUE / 2) {
                    throw new IOException("mappedbus: partition " + partitionId + " holds more message bytes than an "
                            + "exactly-once task can (" + frameHeld + "); use more partitions, or exactlyOnce=false");
                }
                payloads.add(rec.frame);
                topics.add(rec.topic);
                rows++;
                return;
            }
            if ((long) (rows + 1) * slot > buf.length) {
                long grown = Math.max((long) buf.length * 2, (long) (rows + 1) * slot);
                if (grown > Integer.MAX_VALUE - 16) {
                    throw new IOException("mappedbus: partition " + partitionId + " has more rows than an "
                            + "exactly-once task can hold (" + rows + "); use more partitions, or "
                            + "exactlyOnce=false");
                }
                buf = java.util.Arrays.copyOf(buf, (int) grown);
            }
            int at = rows * slot;
            int meta = rec.metaIsLength ? rec.length : rec.meta;
            java.nio.ByteBuffer.wrap(buf).order(java.nio.ByteOrder.LITTLE_ENDIAN)
                    .putInt(at + io.mappedbuspy.Layout.METADATA_OFFSET, meta);
            System.arraycopy(rec.bytes, 0, buf, at + io.mappedbuspy.Layout.PAYLOAD_OFFSET, rec.length);
            rows++;
        }

        @Override
        public WriterCommitMessage commit() throws IOException {
            BusPartition.checkHost(path, requiredHost);
            CommitLog log = BusSource.of(options, fileSize).commitLog();
            CommitLog.Key key = new CommitLog.Key(queryId, epochId, partitionId);
            CommitLog.Outcome o = options.frames ? log.writeFrames(key, payloads, topics, null)
                    : log.write(key, buf, rows, null);
            return new Written(o.committed());
        }

        @Override
        public void abort() {
            // Nothing reached the bus: records are written at commit.
        }

        @Override
        public void close() {
            buf = null;
            payloads.clear();
            topics.clear();
        }
    }

    private final class BusDataWriter implements DataWriter<InternalRow> {
        private final int partitionId;
        private final RowEncoder.Record rec = encoder.newRecord();
        private BusSource.Appender writer;
        private long rows;

        BusDataWriter(int partitionId) {
            this.partitionId = partitionId;
        }

        @Override
        public void write(InternalRow row) throws IOException {
            if (writer == null) {
                BusPartition.checkHost(path, requiredHost);
                writer = BusSource.of(options, fileSize).openWriter();
            }
            try {
                encoder.encode(row, rec);
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException(e.getMessage() + " (row " + rows + " of partition "
                        + partitionId + ")", e);
            }
            for (int attempt = 1; ; attempt++) {
                boolean ok;
                try {
                    ok = rec.frame != null ? writer.writeFrame(rec.frame, rec.topic) : writer.write(rec);
                } catch (EOFException e) {
                    throw new IOException("mappedbus: bus " + path + " is full after " + rows
                            + " rows of partition " + partitionId + ": " + e.getMessage(), e);
                }
                if (ok) {
                    break;
                }
                if (attempt == ATTEMPTS) {
                    throw new IOException("mappedbus: a reader rolled back " + ATTEMPTS + " writes of row " + rows
                            + " of partition " + partitionId + " to " + path + " (this task was too slow to commit)");
                }
            }
            rows++;
        }

        @Override
        public WriterCommitMessage commit() {
            return new Written(rows);
        }

        @Override
        public void abort() {
            // Records already committed stay in the bus: it is append-only.
        }

        @Override
        public void close() {
            if (writer != null) {
                writer.close();
                writer = null;
            }
        }
    }
}
