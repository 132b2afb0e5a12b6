package io.mappedbuspy.spark.read;

import io.mappedbuspy.internal.ArchiveFiles;
import io.mappedbuspy.Layout;
import io.mappedbuspy.internal.MemoryMappedFile;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

import java.io.IOException;
import java.util.Arrays;

/**
 * A partition's answer to a pushed-down {@code count(*)}: one row holding the number of committed (and,
 * with a pushed meta filter, matching) records of its range, counted from the statuses, so Spark does
 * not iterate one empty row per record. Spark sums the partitions' rows. Only per-host reads count in
 * tasks (each host's bus is planned there); every other {@code count(*)} is answered on the driver by the
 * planning walk ({@link BusScan.Count}).
 */
final class CountReader<T> implements PartitionReader<T> {
    private final BusReaderFactory f;
    private final BusPartition p;
    private final boolean columnar;
    private boolean done;
    private Object value;

    CountReader(BusReaderFactory f, BusPartition p, boolean columnar) {
        this.f = f;
        this.p = p;
        this.columnar = columnar;
    }

    @Override
    public boolean next() throws IOException {
        if (done) {
            return false;
        }
        done = true;
        long n = count();
        if (columnar) {
            OnHeapColumnVector[] v = OnHeapColumnVector.allocateColumns(1, f.schema);
            for (OnHeapColumnVector c : v) {
                c.putLong(0, n);
            }
            value = new ColumnarBatch(Arrays.copyOf(v, v.length, ColumnVector[].class), 1);
        } else {
            Object[] vals = new Object[f.schema.fields().length];
            Arrays.fill(vals, n);
            value = new GenericInternalRow(vals);
        }
        return true;
    }

    private long count() throws IOException {
        BusPartition.checkHost(p.path, p.requiredHost);
        long slot = Layout.slotSize(p.recordSize);
        long n = 0;
        try (MemoryMappedFile mem = ArchiveFiles.mapForRead(p.path, p.fileSize)) {
            p.checkIdentity(mem);
            if (mem.size() < p.end) {
                throw new IOException("mappedbus: " + p.path + " is shorter (" + mem.size() + " bytes) than the "
                        + "planned range ending at " + p.end);
            }
            long pos = p.start;
            if (f.metas == null) {
                // Settled statuses never change: bulk copies and plain reads count them.
                int per = (int) Math.max(1, Math.min(65536, (1 << 22) / slot));
                byte[] buf = new byte[(int) (Math.min(per, Math.max(1, (p.end - p.start) / slot)) * slot)];
                while (pos < p.end) {
                    int k = (int) Math.min(per, (p.end - pos) / slot);
                    mem.getBytes(pos, buf, 0, (int) (k * slot));
                    int i = 0;
                    for (; i < k; i++) {
                        int st = (int) SlotChunks.INT.get(buf, (int) (i * slot));
                        if (st == Layout.STATUS_COMMITTED) {
                            n++;
                        } else if (st != Layout.STATUS_ROLLED_BACK) {
                            break; // checked below with an acquire load
                        }
                    }
                    pos += i * slot;
                    if (i < k) {
                        break;
                    }
                }
            }
            for (; pos < p.end; pos += slot) {
                if (SlotChunks.isRow(mem, p, f.metas, pos)) {
                    n++;
                }
            }
        }
        return n;
    }

    @Override
    @SuppressWarnings("unchecked")
    public T get() {
        return (T) value;
    }

    @Override
    public void close() {
        if (value instanceof ColumnarBatch) {
            ((ColumnarBatch) value).close();
        }
    }
}
