package io.mappedbuspy.spark.write;

import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.SupportsTruncate;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingDataWriterFactory;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.internal.connector.SupportsStreamingUpdateAsAppend;
import org.apache.spark.sql.types.StructType;

import java.io.IOException;
import java.io.UncheckedIOException;
import io.mappedbuspy.spark.BusOptions;
import io.mappedbuspy.spark.read.BusPartition;
import io.mappedbuspy.spark.BusSource;

/**
 * Appends rows to a bus, in batch ({@code mode("append")}) or streaming. Each task opens its own
 * {@code MappedBusWriter}; records from different tasks interleave in the bus in allocation order.
 *
 * <p>Streaming writes (and batch writes with {@code exactlyOnce=true}), to a single file or a rolling bus,
 * go through the bus's {@link CommitLog}, so a replayed micro-batch or a retried task never writes a record
 * twice. Other batch writes are at-least-once: a retried task writes its rows again. Streaming {@code update} mode appends the changed
 * rows; {@code complete} mode appends the whole result table every trigger (a bus cannot be truncated).
 */
public final class BusWriteBuilder implements SupportsTruncate, SupportsStreamingUpdateAsAppend {
    private final BusOptions options;
    private final StructType schema;
    private final String queryId;

    public BusWriteBuilder(BusOptions options, StructType schema, String queryId) {
        this.options = options;
        this.schema = schema;
        this.queryId = queryId;
    }

    /** Accepted for streaming complete mode only; appends all the same (see the class comment). */
    @Override
    public WriteBuilder truncate() {
        return this;
    }

    @Override
    public Write build() {
        RowEncoder encoder = new RowEncoder(options, schema);
        String host = options.checkHost ? BusPartition.localHostName() : null;
        // Create the bus once, on the driver, before any task opens it: a single file sized, a rolling bus's
        // directory with its bus.meta (and retention) and segment 0.
        BusSource bus = BusSource.forWrite(options);
        long fileSize = bus.fileSize();
        try {
            bus.create();
        } catch (IOException e) {
            throw new UncheckedIOException("mappedbus: cannot open " + options.path + " for writing: "
                    + e.getMessage(), e);
        }
        // Exactly-once (the commit log) by default for streaming, on request for batch writes.
        boolean streamingOnce = options.exactlyOnce == null || options.exactlyOnce;
        boolean batchOnce = options.exactlyOnce != null && options.exactlyOnce;
        String id = queryId == null ? java.util.UUID.randomUUID().toString() : queryId;
        return new BusWrite(new BusWriterFactory(options, fileSize, encoder, host, batchOnce ? id : null),
                new BusWriterFactory(options, fileSize, encoder, host, streamingOnce ? id : null));
    }

    /** The write itself: nothing to commit or abort beyond the tasks' appends. */
    static final class BusWrite implements Write, BatchWrite, StreamingWrite {
        private final BusWriterFactory factory;
        private final BusWriterFactory streaming;

        BusWrite(BusWriterFactory factory, BusWriterFactory streaming) {
            this.factory = factory;
            this.streaming = streaming;
        }

        @Override
        public String description() {
            return "mappedbus " + factory;
        }

        @Override
        public BatchWrite toBatch() {
            return this;
        }

        @Override
        public StreamingWrite toStreaming() {
            return this;
        }

        @Override
        public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
            return factory;
        }

        @Override
        public StreamingDataWriterFactory createStreamingWriterFactory(PhysicalWriteInfo info) {
            return streaming;
        }

        @Override
        public boolean useCommitCoordinator() {
            return false;
        }

        @Override
        public void commit(WriterCommitMessage[] messages) {
        }

        @Override
        public void abort(WriterCommitMessage[] messages) {
        }

        @Override
        public void commit(long epochId, WriterCommitMessage[] messages) {
        }

        @Override
        public void abort(long epochId, WriterCommitMessage[] messages) {
        }
    }
}
