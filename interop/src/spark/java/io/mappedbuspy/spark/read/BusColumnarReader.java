package io.mappedbuspy.spark.read;

import io.mappedbuspy.Layout;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

import java.io.IOException;
import io.mappedbuspy.spark.BusLayout;

/** Decodes each chunk of slots straight into reused on-heap column vectors. */
final class BusColumnarReader extends SlotChunks implements PartitionReader<ColumnarBatch> {
    private final OnHeapColumnVector[] vectors;
    private final ColumnarBatch batch;

    BusColumnarReader(BusReaderFactory f, BusPartition p) throws IOException {
        super(f, p);
        vectors = OnHeapColumnVector.allocateColumns(rows.length, f.schema);
        batch = new ColumnarBatch(vectors.clone(), 0);
    }

    @Override
    public boolean next() throws IOException {
        while (loadChunk()) {
            if (nRows > 0) {
                fill();
                return true;
            }
        }
        return false;
    }

    private void fill() throws IOException {
        final int n = nRows;
        final int[] r = rows;
        final byte[] b = buf;
        final int s = slot;
        for (int c = 0; c < vectors.length; c++) {
            OnHeapColumnVector v = vectors[c];
            v.reset();
            int off = Layout.PAYLOAD_OFFSET + f.offsets[c];
            switch (f.kinds[c]) {
                case BusReaderFactory.POSITION:
                    for (int i = 0; i < n; i++) {
                        v.putLong(i, p.base + chunkStart + (long) r[i] * s);
                    }
                    break;
                case BusReaderFactory.META:
                    for (int i = 0; i < n; i++) {
                        v.putInt(i, (int) INT.get(b, r[i] * s + Layout.METADATA_OFFSET));
                    }
                    break;
                case BusReaderFactory.PAYLOAD:
                    for (int i = 0; i < n; i++) {
                        v.putByteArray(i, b, r[i] * s + Layout.PAYLOAD_OFFSET, f.sizes[c]);
                    }
                    break;
                case BusReaderFactory.PAYLOAD_TRIMMED:
                    for (int i = 0; i < n; i++) {
                        v.putByteArray(i, b, r[i] * s + Layout.PAYLOAD_OFFSET, trimmedLength(r[i] * s));
                    }
                    break;
                default:
                    fillField(v, f.fieldKinds[c], off, f.sizes[c], n);
            }
        }
        batch.setNumRows(n);
    }

    private void fillField(OnHeapColumnVector v, BusLayout.Kind kind, int off, int size, int n) {
        final int[] r = rows;
        final byte[] b = buf;
        final int s = slot;
        switch (kind) {
            case INT8:
                for (int i = 0; i < n; i++) {
                    v.putByte(i, b[r[i] * s + off]);
                }
                break;
            case INT16:
                for (int i = 0; i < n; i++) {
                    v.putShort(i, (short) SHORT.get(b, r[i] * s + off));
                }
                break;
            case INT32:
                for (int i = 0; i < n; i++) {
                    v.putInt(i, (int) INT.get(b, r[i] * s + off));
                }
                break;
            case INT64:
                for (int i = 0; i < n; i++) {
                    v.putLong(i, (long) LONG.get(b, r[i] * s + off));
                }
                break;
            case FLOAT32:
                for (int i = 0; i < n; i++) {
                    v.putFloat(i, (float) FLOAT.get(b, r[i] * s + off));
                }
                break;
            case FLOAT64:
                for (int i = 0; i < n; i++) {
                    v.putDouble(i, (double) DOUBLE.get(b, r[i] * s + off));
                }
                break;
            case TIMESTAMP_US:
                for (int i = 0; i < n; i++) {
                    v.putLong(i, (long) LONG.get(b, r[i] * s + off));
                }
                break;
            case TIMESTAMP_NS:
                for (int i = 0; i < n; i++) {
                    v.putLong(i, Math.floorDiv((long) LONG.get(b, r[i] * s + off), 1000L));
                }
                break;
            default:
                for (int i = 0; i < n; i++) {
                    v.putByteArray(i, b, r[i] * s + off, size);
                }
        }
    }

    @Override
    public ColumnarBatch get() {
        return batch;
    }

    @Override
    public void close() {
        super.close();
        for (ColumnVector v : vectors) {
            v.close();
        }
    }
}
