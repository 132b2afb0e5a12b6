package io.mappedbuspy.perf;

import io.mappedbuspy.MappedBusWriter;
import io.mappedbuspy.messages.PriceUpdate;

/**
 * Throughput benchmark, writing side: writes {@code count} PriceUpdate records (record size 12) as fast
 * as it can. Start {@link PerfReader} first, in another process, on the same file.
 */
public final class PerfWriter {
    private PerfWriter() {
    }

    /**
     * Runs the benchmark.
     *
     * @param args {@code <path> <fileSize> <count> [prefault]}: with {@code prefault}, every page of the
     *             mapping is touched before the first write
     * @throws Exception on any I/O error
     */
    public static void main(String[] args) throws Exception {
        if (args.length != 3 && !(args.length == 4 && args[3].equals("prefault"))) {
            System.err.println("usage: PerfWriter <path> <fileSize> <count> [prefault]");
            System.exit(2);
        }
        String path = args[0];
        long fileSize = Long.parseLong(args[1]);
        long count = Long.parseLong(args[2]);
        PriceUpdate m = new PriceUpdate();
        long start = System.nanoTime();
        try (MappedBusWriter w = new MappedBusWriter(path, fileSize, PriceUpdate.SIZE).open()) {
            if (args.length == 4) {
                Prefault.touch(w, fileSize);
            }
            for (long i = 0; i < count; i++) {
                m.setSource(1);
                m.setPrice((int) i);
                m.setQuantity(7);
                w.write(m);
            }
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        System.err.printf("writer: %d messages in %.3f s%n", count, seconds);
    }
}
