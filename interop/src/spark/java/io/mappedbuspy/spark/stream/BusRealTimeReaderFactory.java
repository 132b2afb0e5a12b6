package io.mappedbuspy.spark.stream;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.vectorized.ColumnarBatch;

import java.io.IOException;
import java.io.UncheckedIOException;
import io.mappedbuspy.spark.read.BusReaderFactory;

/**
 * The stream's reader factory: real-time partitions get a {@link BusRealTimeReader} (rows, one at a
 * time), micro-batch ranges the usual columnar or row readers.
 */
final class BusRealTimeReaderFactory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;

    private final BusReaderFactory batch;

    BusRealTimeReaderFactory(BusReaderFactory batch) {
        this.batch = batch;
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
        if (partition instanceof BusRealTimePartition) {
            try {
                return BusRealTimeReader.open(batch, (BusRealTimePartition) partition);
            } catch (IOException e) {
                throw new UncheckedIOException("mappedbus: cannot open " + ((BusRealTimePartition) partition)
                        .options.path + " for a real-time read: " + e.getMessage(), e);
            }
        }
        return batch.createReader(partition);
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
        return batch.createColumnarReader(partition);
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
        return !(partition instanceof BusRealTimePartition) && batch.supportColumnarReads(partition);
    }
}
