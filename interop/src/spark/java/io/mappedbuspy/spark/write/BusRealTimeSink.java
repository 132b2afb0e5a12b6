package io.mappedbuspy.spark.write;

import org.apache.spark.sql.ForeachWriter;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.CatalystTypeConverters;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.StructType;

import java.io.EOFException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Map;
import io.mappedbuspy.spark.BusOptions;
import io.mappedbuspy.spark.read.BusPartition;
import io.mappedbuspy.spark.BusSource;

/**
 * Writes a streaming query's rows to a bus, each as it comes: a {@link ForeachWriter}, the sink Spark's
 * Real-time Mode accepts ({@code df.writeStream().foreach(new BusRealTimeSink(options, df.schema()))}).
 * It takes the {@code mappedbus} sink's options and columns (path, fileSize or segmentSize, layout, meta,
 * payload) and encodes rows as it does; each row is committed to the bus in {@link #process}, so a
 * reader sees it microseconds later. Like the {@code mappedbus} sink it is at-least-once: a re-run batch
 * appends its rows again.
 *
 * <p>Built on the driver, which checks the columns and creates the bus; each task opens its own writer.
 */
public final class BusRealTimeSink extends ForeachWriter<Row> {
    private static final long serialVersionUID = 1L;
    /** Times a record rolled back by a reader (this task was too slow to commit it) is written again. */
    private static final int ATTEMPTS = 3;

    private final BusOptions options;
    private final StructType schema;
    private final RowEncoder encoder;
    /** Single file: its logical size; rolling bus: -1. */
    private final long fileSize;
    private final String requiredHost;

    private transient scala.Function1<Object, Object> toInternal;
    private transient RowEncoder.Record rec;
    private transient BusSource.Appender writer;
    private transient long rows;
    private transient long partitionId;

    /**
     * Checks the columns against the bus options and creates the bus if it does not exist.
     *
     * @param options the {@code mappedbus} sink's options ({@code path}, {@code fileSize}, {@code layout}, ...)
     * @param schema  the schema of the rows to write ({@code df.schema()})
     * @throws IllegalArgumentException naming the column or option and the problem
     */
    public BusRealTimeSink(Map<String, String> options, StructType schema) {
        this.options = BusOptions.parse(new org.apache.spark.sql.util.CaseInsensitiveStringMap(options));
        this.schema = schema;
        this.encoder = new RowEncoder(this.options, schema);
        this.requiredHost = this.options.checkHost ? BusPartition.localHostName() : null;
        BusSource bus = BusSource.forWrite(this.options);
        this.fileSize = bus.fileSize();
        try {
            bus.create();
        } catch (IOException e) {
            throw new UncheckedIOException("mappedbus: cannot open " + this.options.path + " for writing: "
                    + e.getMessage(), e);
        }
    }

    @Override
    public boolean open(long partitionId, long epochId) {
        this.partitionId = partitionId;
        rows = 0;
        try {
            BusPartition.checkHost(options.path, requiredHost);
            writer = BusSource.of(options, fileSize).openWriter();
        } catch (IOException e) {
            throw new UncheckedIOException("mappedbus: cannot open " + options.path + " for writing: "
                    + e.getMessage(), e);
        }
        if (toInternal == null) {
            toInternal = CatalystTypeConverters.createToCatalystConverter(schema);
            rec = encoder.newRecord();
        }
        return true;
    }

    @Override
    public void process(Row row) {
        InternalRow r = (InternalRow) toInternal.apply(row);
        try {
            encoder.encode(r, rec);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(e.getMessage() + " (row " + rows + " of partition " + partitionId
                    + ")", e);
        }
        try {
            for (int attempt = 1; ; attempt++) {
                if (rec.frame != null ? writer.writeFrame(rec.frame, rec.topic) : writer.write(rec)) {
                    break;
                }
                if (attempt == ATTEMPTS) {
                    throw new IOException("mappedbus: a reader rolled back " + ATTEMPTS + " writes of row " + rows
                            + " of partition " + partitionId + " to " + options.path
                            + " (this task was too slow to commit)");
                }
            }
        } catch (EOFException e) {
            throw new UncheckedIOException("mappedbus: bus " + options.path + " is full after " + rows
                    + " rows of partition " + partitionId + ": " + e.getMessage(), e);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        rows++;
    }

    @Override
    public void close(Throwable error) {
        if (writer != null) {
            writer.close();
            writer = null;
        }
    }

    @Override
    public String toString() {
        return "BusRealTimeSink[" + options.path + " (" + encoder + ")]";
    }
}
