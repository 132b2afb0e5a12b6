package io.mappedbuspy.spark.stream;

import org.apache.spark.sql.connector.read.streaming.PartitionOffset;

/**
 * Where a real-time partition reader stands when its long-running batch ends: the position of the next
 * slot it would look at (every slot before it was handed to Spark or settled as rolled back) and the id
 * of the bus it read. The driver turns it into the batch's end {@link BusOffset}.
 */
final class BusPartitionOffset implements PartitionOffset {
    private static final long serialVersionUID = 1L;

    final long position;
    final String busId;

    BusPartitionOffset(long position, String busId) {
        this.position = position;
        this.busId = busId;
    }

    @Override
    public String toString() {
        return "BusPartitionOffset[" + position + (busId == null ? "" : " of " + busId) + "]";
    }
}
