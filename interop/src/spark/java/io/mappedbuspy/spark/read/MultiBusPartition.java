package io.mappedbuspy.spark.read;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import io.mappedbuspy.spark.BusOptions;

/**
 * A partition of one bus of a multi-bus read ({@code path} a list or a pattern): the bus's own
 * partition, planned with that bus's options, and the bus's path for the {@code bus} column.
 */
public final class MultiBusPartition implements InputPartition {
    private static final long serialVersionUID = 1L;

    final InputPartition inner;
    final String bus;
    final BusOptions options;

    public MultiBusPartition(InputPartition inner, String bus, BusOptions options) {
        this.inner = inner;
        this.bus = bus;
        this.options = options;
    }

    @Override
    public String[] preferredLocations() {
        return inner.preferredLocations();
    }

    @Override
    public String toString() {
        return "MultiBusPartition[" + bus + ": " + inner + "]";
    }

    /** The schema without the {@code bus} column: what one bus's reader produces. */
    static StructType withoutBus(StructType schema) {
        List<StructField> out = new ArrayList<>();
        for (StructField f : schema.fields()) {
            if (!f.name().equalsIgnoreCase(BusOptions.BUS)) {
                out.add(f);
            }
        }
        return new StructType(out.toArray(new StructField[0]));
    }

    /** Index of the {@code bus} column in a schema, or -1 (pruned, or a single-bus read). */
    static int busColumn(StructType schema) {
        String[] names = schema.fieldNames();
        for (int i = 0; i < names.length; i++) {
            if (names[i].equalsIgnoreCase(BusOptions.BUS)) {
                return i;
            }
        }
        return -1;
    }

    /** One bus's reader, with the {@code bus} column put in its place when the query uses it. */
    static final class Reader<T> implements PartitionReader<T> {
        private final PartitionReader<?> inner;
        private final int busCol;
        private final int width;
        private final UTF8String bus;
        private final boolean columnar;
        private ConstantColumnVector busVector;

        Reader(BusReaderFactory outer, MultiBusPartition p, boolean columnar) {
            StructType innerSchema = withoutBus(outer.schema);
            BusReaderFactory f = outer.with(p.options, innerSchema);
            this.inner = columnar ? f.createColumnarReader(p.inner) : f.createReader(p.inner);
            this.busCol = busColumn(outer.schema);
            this.width = outer.schema.fields().length;
            this.bus = UTF8String.fromString(p.bus);
            this.columnar = columnar;
        }

        @Override
        public boolean next() throws IOException {
            return inner.next();
        }

        @Override
        @SuppressWarnings("unchecked")
        public T get() {
            Object got = inner.get();
            if (busCol < 0) {
                return (T) got;
            }
            if (columnar) {
                ColumnarBatch b = (ColumnarBatch) got;
                if (busVector == null) { // one value for every row, whatever its index
                    busVector = new ConstantColumnVector(1, DataTypes.StringType);
                    busVector.setUtf8String(bus);
                }
                ColumnVector[] cols = new ColumnVector[width];
                for (int i = 0, j = 0; i < width; i++) {
                    cols[i] = i == busCol ? busVector : b.column(j++);
                }
                return (T) new ColumnarBatch(cols, b.numRows());
            }
            InternalRow r = (InternalRow) got;
            Object[] values = new Object[width];
            for (int i = 0, j = 0; i < width; i++) {
                values[i] = i == busCol ? bus : r.isNullAt(j) ? null : ((GenericInternalRow) r).genericGet(j);
                if (i != busCol) {
                    j++;
                }
            }
            return (T) new GenericInternalRow(values);
        }

        @Override
        public void close() throws IOException {
            inner.close();
            if (busVector != null) {
                busVector.close();
            }
        }
    }
}
