package io.mappedbuspy.perf;

import io.mappedbuspy.MappedBusReader;
import io.mappedbuspy.messages.PriceUpdate;

import java.util.Locale;

/**
 * Throughput benchmark, reading side: busy-spins on {@code next()} until {@code count} PriceUpdate
 * records (record size 12) have arrived, then prints one line of JSON timed from the first message after
 * {@code warmup} messages to the last. Prints {@code ready} on stderr once the bus is open, so a driver
 * can start the writer only when the reader polls.
 */
public final class PerfReader {
    private PerfReader() {
    }

    /**
     * Runs the benchmark.
     *
     * @param args {@code <path> <fileSize> <count> [warmup] [prefault] [create]}: {@code prefault} touches
     *             every page of the mapping before the timing; {@code create} makes the bus file first
     *             (as a MappedBusWriter does), for a reader started on a fresh path, and reports how
     *             long that took (create_ms; -1 without it)
     * @throws Exception on any I/O error
     */
    public static void main(String[] args) throws Exception {
        java.util.List<String> opts = java.util.Arrays.asList(args).subList(Math.min(4, args.length), args.length);
        if (args.length < 3 || !java.util.Set.of("prefault", "create").containsAll(opts)) {
            System.err.println("usage: PerfReader <path> <fileSize> <count> [warmup] [prefault] [create]");
            System.exit(2);
        }
        String path = args[0];
        long fileSize = Long.parseLong(args[1]);
        long count = Long.parseLong(args[2]);
        long warmup = args.length >= 4 ? Math.min(Long.parseLong(args[3]), count - 1) : 0;
        PriceUpdate m = new PriceUpdate();
        long received = 0;
        long checksum = 0;
        long first = 0;
        long last = 0;
        double createMs = -1;
        if (opts.contains("create")) {
            long t0 = System.nanoTime();
            new io.mappedbuspy.MappedBusWriter(path, fileSize, PriceUpdate.SIZE).open().close();
            createMs = (System.nanoTime() - t0) / 1e6;
        }
        try (MappedBusReader r = new MappedBusReader(path, fileSize, PriceUpdate.SIZE).open()) {
            if (opts.contains("prefault")) {
                Prefault.touch(r, fileSize);
            }
            System.err.println("ready");
            System.err.flush();
            while (received < count) {
                if (r.next()) {
                    r.readMessage(m);
                    checksum += m.getPrice();
                    if (received == warmup) {
                        first = System.nanoTime();
                    }
                    received++;
                }
            }
            last = System.nanoTime();
        }
        // Message number `warmup` starts the clock, so count - warmup - 1 messages fall inside the interval.
        long timed = Math.max(1, received - warmup - 1);
        double seconds = (last - first) / 1e9;
        System.out.println(String.format(Locale.ROOT,
                "{\"messages\": %d, \"seconds\": %.6f, \"msgs_per_s\": %.0f, \"ns_per_msg\": %.2f, "
                + "\"create_ms\": %.1f}",
                received, seconds, timed / seconds, (last - first) / (double) timed, createMs));
        if (checksum == Long.MIN_VALUE) {
            System.err.println(checksum); // keeps the reads alive
        }
    }
}
