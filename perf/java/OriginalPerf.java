import io.mappedbus.MappedBusReader;
import io.mappedbus.MappedBusWriter;
import io.mappedbus.MemoryMappedFile;
import io.mappedbus.perf.PriceUpdate;

import java.lang.reflect.Field;
import java.util.Locale;

/**
 * Drives the Java original (Mappedbus 0.5.1, ../shared/original) with the project's benchmark shape:
 * any message count, 1 writer process -> 1 reader process, its own 12-byte PriceUpdate. Compiled by
 * perf/bench_original.py against the original jar; not part of the project.
 *
 * <pre>
 * OriginalPerf writer PATH FILE_SIZE COUNT PREFAULT
 * OriginalPerf reader PATH FILE_SIZE COUNT WARMUP PREFAULT
 * </pre>
 * PREFAULT (true/false): touch every page of the process's mapping before the timing, as the
 * project's prefault option does; false is how the original runs by default (its file is sparse, so
 * page allocation and faults fall inside the timing). The reader prints "ready" on stderr once open
 * and one JSON line on stdout, timed from message WARMUP to the last, as PerfReader does, with
 * create_ms: how long opening the reader took, which creates the file in the default runs.
 */
public final class OriginalPerf {
    private static final int PAGE = 4096;

    public static void main(String[] a) throws Exception {
        String path = a[1];
        long fileSize = Long.parseLong(a[2]);
        long count = Long.parseLong(a[3]);
        if (a[0].equals("writer")) {
            write(path, fileSize, count, Boolean.parseBoolean(a[4]));
        } else {
            read(path, fileSize, count, Long.parseLong(a[4]), Boolean.parseBoolean(a[5]));
        }
    }

    // The original keeps its mapping private: reach it to touch the pages (the original has no option).
    private static void touch(Object owner, long fileSize) throws Exception {
        Field f = owner.getClass().getDeclaredField("mem");
        f.setAccessible(true);
        MemoryMappedFile mem = (MemoryMappedFile) f.get(owner);
        long sum = 0;
        for (long p = 0; p < fileSize; p += PAGE) {
            sum += mem.getByte(p);
        }
        if (sum == Long.MIN_VALUE) {
            System.err.println(sum);
        }
    }

    private static void write(String path, long fileSize, long count, boolean prefault) throws Exception {
        MappedBusWriter w = new MappedBusWriter(path, fileSize, 12);
        w.open();
        if (prefault) {
            touch(w, fileSize);
        }
        PriceUpdate m = new PriceUpdate();
        for (long i = 0; i < count; i++) {
            m.setSource(1);
            m.setPrice((int) i);
            m.setQuantity(7);
            w.write(m);
        }
        w.close();
    }

    private static void read(String path, long fileSize, long count, long warmup, boolean prefault)
            throws Exception {
        warmup = Math.min(warmup, count - 1);
        long t0 = System.nanoTime();
        MappedBusReader r = new MappedBusReader(path, fileSize, 12);
        r.open();   // creates the file when it is absent (the default runs)
        double createMs = (System.nanoTime() - t0) / 1e6;
        if (prefault) {
            touch(r, fileSize);
        }
        System.err.println("ready");
        System.err.flush();
        PriceUpdate m = new PriceUpdate();
        long received = 0;
        long checksum = 0;
        long first = 0;
        while (received < count) {
            if (r.next()) {
                r.readType();
                r.readMessage(m);
                checksum += m.getPrice();
                if (received == warmup) {
                    first = System.nanoTime();
                }
                received++;
            }
        }
        long last = System.nanoTime();
        r.close();
        long timed = Math.max(1, received - warmup - 1);
        double seconds = (last - first) / 1e9;
        System.out.println(String.format(Locale.ROOT,
                "{\"messages\": %d, \"timed\": %d, \"seconds\": %.6f, \"msgs_per_s\": %.0f, "
                + "\"ns_per_msg\": %.2f, \"last_price\": %d, \"create_ms\": %.1f}",
                received, timed, seconds, timed / seconds, (last - first) / (double) timed, m.getPrice(),
                prefault ? -1.0 : createMs));
        if (checksum == Long.MIN_VALUE) {
            System.err.println(checksum);
        }
    }
}
