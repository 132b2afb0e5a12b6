package io.mappedbuspy.spark.read;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

import java.io.IOException;
import java.io.UncheckedIOException;
import io.mappedbuspy.spark.BusLayout;
import io.mappedbuspy.spark.BusOptions;

/**
 * Creates the readers of {@link BusPartition}s: columnar ({@link ColumnarBatch}es of {@code batchSize}
 * rows, the default) or row by row ({@code columnar=false}).
 */
public final class BusReaderFactory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;

    // Column kinds (what each output column decodes).
    public static final int POSITION = 0;
    public static final int META = 1;
    public static final int PAYLOAD = 2;
    public static final int PAYLOAD_TRIMMED = 3;
    static final int FIELD = 4;
    static final int BUS = 5;
    static final int COUNT = 6;
    public static final int TOPIC = 7;

    private static boolean hasField(BusLayout layout, String name) {
        for (BusLayout.Field f : layout.fields()) {
            if (f.name().equalsIgnoreCase(name)) {
                return true;
            }
        }
        return false;
    }

    /** A factory for another bus (or this host's) with this one's columns, filters and pushed count. */
    BusReaderFactory with(BusOptions o, StructType s) {
        BusReaderFactory f = new BusReaderFactory(o, s, metas);
        f.counts = counts;
        return f;
    }

    public final StructType schema;
    public final int[] kinds;
    /** For FIELD columns: the wire type, payload offset and size. */
    public final BusLayout.Kind[] fieldKinds;
    public final int[] offsets;
    public final int[] sizes;
    final int batchSize;
    final boolean columnar;
    /** Pushed-down {@code meta = x} / {@code meta IN (...)}: the metadata values kept, sorted; null keeps all. */
    final int[] metas;
    /** {@code count(*)} pushed down: each partition gives one row of this many copies of its count; 0: off. */
    int counts;
    /** The read's options: per-host reads plan on the executor with them. */
    final BusOptions options;

    public BusReaderFactory(BusOptions o, StructType schema) {
        this(o, schema, null);
    }

    public BusReaderFactory(BusOptions o, StructType schema, int[] metas) {
        this.metas = metas;
        this.options = o;
        this.schema = schema;
        StructField[] cols = schema.fields();
        kinds = new int[cols.length];
        fieldKinds = new BusLayout.Kind[cols.length];
        offsets = new int[cols.length];
        sizes = new int[cols.length];
        for (int i = 0; i < cols.length; i++) {
            String name = cols[i].name();
            if (name.equalsIgnoreCase(BusOptions.POSITION)) {
                kinds[i] = POSITION;
            } else if (o.frames && name.equalsIgnoreCase(BusOptions.TOPIC)) {
                kinds[i] = TOPIC;
            } else if (name.equalsIgnoreCase(BusOptions.META)) {
                kinds[i] = META;
            } else if (o.buses != null && name.equalsIgnoreCase(BusOptions.BUS)) {
                kinds[i] = BUS; // filled by MultiBusPartition.Reader
            } else if (o.layout == null) {
                kinds[i] = o.trimPayload ? PAYLOAD_TRIMMED : PAYLOAD;
                sizes[i] = o.recordSize;
            } else if (!hasField(o.layout, name)) {
                kinds[i] = COUNT; // a pushed-down count(*) column (read by CountReader)
            } else {
                BusLayout.Field f = o.layout.field(name);
                kinds[i] = FIELD;
                fieldKinds[i] = f.kind;
                offsets[i] = f.offset;
                sizes[i] = f.size;
            }
        }
        batchSize = o.batchSize;
        columnar = o.columnar;
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
        if (partition instanceof FramePartition) {
            try {
                return new FramePartition.Reader(this, (FramePartition) partition);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        if (partition instanceof HostPartition) {
            return new HostPartition.Reader<>(this, (HostPartition) partition, false);
        }
        if (partition instanceof MultiBusPartition) {
            return new MultiBusPartition.Reader<>(this, (MultiBusPartition) partition, false);
        }
        if (counts > 0) {
            return new CountReader<>(this, (BusPartition) partition, false);
        }
        try {
            return new BusRowReader(this, (BusPartition) partition);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
        if (partition instanceof HostPartition) {
            return new HostPartition.Reader<>(this, (HostPartition) partition, true);
        }
        if (partition instanceof MultiBusPartition) {
            return new MultiBusPartition.Reader<>(this, (MultiBusPartition) partition, true);
        }
        if (counts > 0) {
            return new CountReader<>(this, (BusPartition) partition, true);
        }
        try {
            return new BusColumnarReader(this, (BusPartition) partition);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
        return columnar && !(partition instanceof FramePartition);
    }
}
