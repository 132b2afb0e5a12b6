package io.mappedbuspy.perf;

import io.mappedbuspy.MappedBusReader;
import io.mappedbuspy.messages.PriceUpdate;

import java.util.Locale;

/**
 * Throughput benchmark, reading side: busy-spins on {@code next()} until {@code count} PriceUpdate
 * records (record size 12) have arrived, then prints one line of JSON timed from the first message to
 * the last.
 */
public final class PerfReader {
    private PerfReader() {
    }

    /**
     * Runs the benchmark.
     *
     * @param args {@code <path> <fileSize> <count>}
     * @throws Exception on any I/O error
     */
    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: PerfReader <path> <fileSize> <count>");
            System.exit(2);
        }
        String path = args[0];
        long fileSize = Long.parseLong(args[1]);
        long count = Long.parseLong(args[2]);
        PriceUpdate m = new PriceUpdate();
        long received = 0;
        long checksum = 0;
        long first = 0;
        long last = 0;
        try (MappedBusReader r = new MappedBusReader(path, fileSize, PriceUpdate.SIZE).open()) {
            while (received < count) {
                if (r.next()) {
                    r.readMessage(m);
                    checksum += m.getPrice();
                    if (received == 0) {
                        first = System.nanoTime();
                    }
                    received++;
                }
            }
            last = System.nanoTime();
        }
        // The first message starts the clock, so count - 1 messages fall inside the interval.
        long timed = Math.max(1, received - 1);
        double seconds = (last - first) / 1e9;
        System.out.println(String.format(Locale.ROOT,
                "{\"messages\": %d, \"seconds\": %.6f, \"msgs_per_s\": %.0f, \"ns_per_msg\": %.2f}",
                received, seconds, timed / seconds, (last - first) / (double) timed));
        if (checksum == Long.MIN_VALUE) {
            System.err.println(checksum); // keeps the reads alive
        }
    }
}
