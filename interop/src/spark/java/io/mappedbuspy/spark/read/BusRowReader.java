package io.mappedbuspy.spark.read;

import io.mappedbuspy.Layout;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.read.PartitionReader;

import java.io.IOException;
import java.util.Arrays;
import io.mappedbuspy.spark.BusLayout;

/** Row-by-row reader ({@code columnar=false}): one {@link GenericInternalRow} per committed record. */
public final class BusRowReader extends SlotChunks implements PartitionReader<InternalRow> {
    private int index = -1;
    private InternalRow row;

    BusRowReader(BusReaderFactory f, BusPartition p) throws IOException {
        super(f, p);
        nRows = 0;
    }

    @Override
    public boolean next() throws IOException {
        while (++index >= nRows) {
            if (!loadChunk()) {
                return false;
            }
            index = -1;
        }
        int base = rows[index] * slot;
        Object[] values = new Object[f.kinds.length];
        for (int c = 0; c < values.length; c++) {
            int off = base + Layout.PAYLOAD_OFFSET + f.offsets[c];
            switch (f.kinds[c]) {
                case BusReaderFactory.POSITION:
                    values[c] = p.base + chunkStart + base;
                    break;
                case BusReaderFactory.META:
                    values[c] = (int) INT.get(buf, base + Layout.METADATA_OFFSET);
                    break;
                case BusReaderFactory.PAYLOAD:
                    values[c] = Arrays.copyOfRange(buf, base + Layout.PAYLOAD_OFFSET,
                            base + Layout.PAYLOAD_OFFSET + f.sizes[c]);
                    break;
                case BusReaderFactory.PAYLOAD_TRIMMED:
                    values[c] = Arrays.copyOfRange(buf, base + Layout.PAYLOAD_OFFSET,
                            base + Layout.PAYLOAD_OFFSET + trimmedLength(base));
                    break;
                default:
                    values[c] = decode(f.fieldKinds[c], buf, off, f.sizes[c]);
            }
        }
        row = new GenericInternalRow(values);
        return true;
    }

    /** One field's Spark value from the payload bytes (also used by the Real-time Mode reader). */
    public static Object decode(BusLayout.Kind kind, byte[] buf, int off, int size) {
        switch (kind) {
            case INT8:
                return buf[off];
            case INT16:
                return (short) SHORT.get(buf, off);
            case INT32:
                return (int) INT.get(buf, off);
            case INT64:
                return (long) LONG.get(buf, off);
            case FLOAT32:
                return (float) FLOAT.get(buf, off);
            case FLOAT64:
                return (double) DOUBLE.get(buf, off);
            case TIMESTAMP_US:
                return (long) LONG.get(buf, off);
            case TIMESTAMP_NS:
                return Math.floorDiv((long) LONG.get(buf, off), 1000L);
            default:
                return Arrays.copyOfRange(buf, off, off + size);
        }
    }

    @Override
    public InternalRow get() {
        return row;
    }
}
