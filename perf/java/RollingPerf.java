import io.mappedbuspy.Layout;
import io.mappedbuspy.MappedBusReader;
import io.mappedbuspy.MappedBusWriter;
import io.mappedbuspy.RollingBusReader;
import io.mappedbuspy.RollingBusWriter;
import io.mappedbuspy.messages.PriceUpdate;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.Locale;

/**
 * perf/bench_rolling.py's Java processes: a single-file bus and a rolling bus driven the same way, so
 * the two are compared side by side. Compiled by bench_rolling.py against build/jvm/mappedbuspy.jar.
 *
 * <pre>
 * RollingPerf writer single|rolling PATH SIZE COUNT SOURCE JIT   SIZE: file size, or segment size;
 *                                                              prints "ready" on stderr, then
 *                                                              writes once a line comes on stdin
 * RollingPerf reader single|rolling PATH SIZE COUNT WARMUP JIT   prints "ready" on stderr once open,
 *                                                              then one JSON line on stdout
 * </pre>
 * The bus exists already (the driver creates it). Records are PriceUpdate (12 bytes); the price
 * changes every time.
 *
 * <p>JIT &gt; 0: before "ready", the process writes and reads JIT records through a private bus of
 * the same kind beside PATH (a rolling one of 1 MiB segments, so it rolls every 52,428 records),
 * then removes it: the JIT compiles the code the run takes (a rolling JVM compiles about half
 * as much again as a single-file one, 0.2 s of CPU that would otherwise fall in the run), so the
 * run measures the bus, not the JVM's first second.
 */
public final class RollingPerf {
    // The warm-up writes this many records, then reads them.
    private static final int BATCH = 1000;

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
        long jit = Long.parseLong(args[6]);
        if (jit > 0) {
            warmUp(rolling, Path.of(path + ".jit-" + ProcessHandle.current().pid()), jit);
        }
        if (args[0].equals("writer")) {
            System.err.println("ready");
            System.err.flush();
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII)).readLine();
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

    /** Writes and reads {@code n} records through a private bus of the kind given, then removes it. */
    private static void warmUp(boolean rolling, Path path, long n) throws Exception {
        PriceUpdate m = new PriceUpdate();
        long segment = 1 << 20;
        long size = Layout.recordOffset(n + BATCH, PriceUpdate.SIZE);
        try {
            if (rolling) {
                try (RollingBusWriter w = new RollingBusWriter(path.toString(), segment, PriceUpdate.SIZE).open();
                     RollingBusReader r = new RollingBusReader(path.toString(), segment, PriceUpdate.SIZE).open()) {
                    warmUp(w::write, () -> r.next() && r.readMessage(m) != null, m, n);
                }
            } else {
                try (MappedBusWriter w = new MappedBusWriter(path.toString(), size, PriceUpdate.SIZE).open();
                     MappedBusReader r = new MappedBusReader(path.toString(), size, PriceUpdate.SIZE).open()) {
                    warmUp(w::write, () -> r.next() && r.readMessage(m) != null, m, n);
                }
            }
        } finally {
            remove(path);
            for (String beside : new String[] {".meta", ".wake", ".consumers"}) {
                Files.deleteIfExists(Path.of(path + beside));
            }
        }
    }

    private static void warmUp(Write w, Poll poll, PriceUpdate m, long n) throws Exception {
        for (long i = 0; i < n; i += BATCH) {
            for (int j = 0; j < BATCH; j++) {
                m.setPrice(j);
                w.write(m);
            }
            for (int j = 0; j < BATCH; j++) {
                while (!poll.next()) {
                    Thread.onSpinWait();
                }
            }
        }
    }

    private static void remove(Path path) throws IOException {
        if (Files.isDirectory(path, LinkOption.NOFOLLOW_LINKS)) {
            try (DirectoryStream<Path> s = Files.newDirectoryStream(path)) {
                for (Path p : s) {
                    Files.delete(p);
                }
            }
        }
        Files.deleteIfExists(path);
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
