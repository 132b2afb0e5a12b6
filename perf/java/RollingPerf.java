import io.mappedbuspy.MappedBusReader;
import io.mappedbuspy.MappedBusWriter;
import io.mappedbuspy.RollingBusReader;
import io.mappedbuspy.RollingBusWriter;
import io.mappedbuspy.messages.PriceUpdate;

import java.util.Locale;

/**
 * perf/bench_rolling.py's Java processes: a single-file bus and a rolling bus driven the same way, so
 * the two are compared side by side. Compiled by bench_rolling.py against build/jvm/mappedbuspy.jar.
 *
 * <pre>
 * RollingPerf writer single|rolling PATH SIZE COUNT SOURCE     SIZE: file size, or segment size
 * RollingPerf reader single|rolling PATH SIZE COUNT WARMUP     prints "ready" on stderr once open,
 *                                                             then one JSON line on stdout
 * </pre>
 * The bus exists already (the driver creates it). Records are PriceUpdate (12 bytes); the price
 * changes every time.
 */
public final class RollingPerf {
    private RollingPerf() {
    }

    /** What the reader polls: next() and readMessage() of either kind of reader. */
    private interface Poll {
        boolean next() throws Exception;
    }

    /** What the writer calls: write() of either kind of writer. */
    private interface Write {
        void write(PriceUpdate m) throws Exception;
    }

    public static void main(String[] args) throws Exception {
        boolean rolling = args[1].equals("rolling");
        String path = args[2];
        long size = Long.parseLong(args[3]);
        long count = Long.parseLong(args[4]);
        PriceUpdate m = new PriceUpdate();
        if (args[0].equals("writer")) {
            m.setSource(Integer.parseInt(args[5]));
            m.setQuantity(7);
            if (rolling) {
                try (RollingBusWriter w = new RollingBusWriter(path, size, PriceUpdate.SIZE).open()) {
                    write(w::write, m, count);
                }
            } else {
                try (MappedBusWriter w = new MappedBusWriter(path, size, PriceUpdate.SIZE).open()) {
                    write(w::write, m, count);
                }
            }
            return;
        }
        long warmup = Math.min(Long.parseLong(args[5]), count - 1);
        if (rolling) {
            try (RollingBusReader r = new RollingBusReader(path, size, PriceUpdate.SIZE).open()) {
                read(() -> r.next() && r.readMessage(m) != null, m, count, warmup);
            }
        } else {
            try (MappedBusReader r = new MappedBusReader(path, size, PriceUpdate.SIZE).open()) {
                read(() -> r.next() && r.readMessage(m) != null, m, count, warmup);
            }
        }
    }

    private static void write(Write w, PriceUpdate m, long count) throws Exception {
        for (long i = 0; i < count; i++) {
            m.setPrice((int) i);
            w.write(m);
        }
    }

    private static void read(Poll poll, PriceUpdate m, long count, long warmup) throws Exception {
        System.err.println("ready");
        System.err.flush();
        long received = 0;
        long checksum = 0;
        long first = 0;
        while (received < count) {
            if (poll.next()) {
                checksum += m.getPrice();
                if (received == warmup) {
                    first = System.nanoTime();
                }
                received++;
            }
        }
        long last = System.nanoTime();
        long timed = Math.max(1, received - warmup - 1);
        double seconds = (last - first) / 1e9;
        System.out.println(String.format(Locale.ROOT,
                "{\"messages\": %d, \"seconds\": %.6f, \"msgs_per_s\": %.0f, \"ns_per_msg\": %.2f}",
                received, seconds, timed / seconds, (last - first) / (double) timed));
        if (checksum == Long.MIN_VALUE) {
            System.err.println(checksum);
        }
    }
}
