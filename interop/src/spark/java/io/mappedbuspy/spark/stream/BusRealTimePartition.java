package io.mappedbuspy.spark.stream;

import org.apache.spark.sql.connector.read.InputPartition;
import io.mappedbuspy.spark.BusOptions;

/**
 * The one partition of a Real-time Mode batch: the whole bus from {@code start} on, with no end. A bus is
 * one totally ordered stream (a single allocation counter, the limit), so it is read by one reader in
 * order; splitting it by position would need an end, which a long-running batch does not have.
 */
public final class BusRealTimePartition implements InputPartition {
    private static final long serialVersionUID = 1L;

    final BusOptions options;
    /** Single file: its logical size; rolling bus: -1. */
    final long fileSize;
    /** Position (a rolling bus's global one) of the first slot to read. */
    final long start;
    /** The id of the bus the batch was planned on (null: a bus without metadata). */
    final String busId;
    final String preferredHost;
    final String requiredHost;

    public BusRealTimePartition(BusOptions options, long fileSize, long start, String busId, String preferredHost,
                         String requiredHost) {
        this.options = options;
        this.fileSize = fileSize;
        this.start = start;
        this.busId = busId;
        this.preferredHost = preferredHost;
        this.requiredHost = requiredHost;
    }

    @Override
    public String[] preferredLocations() {
        return preferredHost == null ? new String[0] : new String[] {preferredHost};
    }

    @Override
    public String toString() {
        return "BusRealTimePartition[" + options.path + " from " + start + "]";
    }
}
