package io.mappedbuspy.perf;

import io.mappedbuspy.MappedBusMessage;
import io.mappedbuspy.internal.MemoryMappedFile;
import io.mappedbuspy.RollingBusReader;
import io.mappedbuspy.RollingBusWriter;

import java.io.DataOutputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.BufferedOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * The Java half of {@code perf/rolling_soak.py}: {@code writer DIR SEGMENT_SIZE RETAIN N OUT} writes N ticks at full
 * speed through a rolling bus, timing every write, and saves the times (the roll indices first) to OUT;
 * {@code reader DIR SEGMENT_SIZE N} follows the bus (continuing past gaps) and prints what it read as one JSON line.
 */
public final class RollingSoak {
    private static final int RECORD_SIZE = 16;

    /** seq int64, spare int64; type 7 (the Python soak's Tick). */
    static final class Tick implements MappedBusMessage {
        long seq;

        @Override
        public void write(MemoryMappedFile mem, long pos) {
            mem.putLong(pos, seq);
            mem.putLong(pos + 8, 0);
        }

        @Override
        public void read(MemoryMappedFile mem, long pos) {
            seq = mem.getLong(pos);
        }

        @Override
        public int type() {
            return 7;
        }
    }

    private RollingSoak() {
    }

    /**
     * Runs the writer or the reader.
     *
     * @param args see the class comment
     * @throws Exception on any failure
     */
    public static void main(String[] args) throws Exception {
        if (args[0].equals("writer")) {
            writer(args[1], Long.parseLong(args[2]), Long.parseLong(args[3]), Integer.parseInt(args[4]), args[5]);
        } else {
            reader(args[1], Long.parseLong(args[2]), Long.parseLong(args[3]));
        }
    }

    private static void writer(String dir, long segmentSize, long retain, int n, String out) throws IOException {
        long[] durations = new long[n];
        long[] rolls = new long[1024];
        int k = 0;
        Tick t = new Tick();
        long segments;
        try (RollingBusWriter w = new RollingBusWriter(dir, segmentSize, RECORD_SIZE).setRetention(retain, 0, 0).open()) {
            long seg = w.segment();
            for (int i = 0; i < n; i++) {
                t.seq = i;
                long t0 = System.nanoTime();
                w.write(t);
                long t1 = System.nanoTime();
                durations[i] = t1 - t0;
                if (w.segment() != seg) {
                    seg = w.segment();
                    if (k == rolls.length) {
                        rolls = java.util.Arrays.copyOf(rolls, k * 2);
                    }
                    rolls[k++] = i;
                }
            }
            segments = w.segment() + 1;
        }
        ByteBuffer buf = ByteBuffer.allocate(8 * (1 + k + n)).order(ByteOrder.LITTLE_ENDIAN);
        buf.putLong(k);
        for (int i = 0; i < k; i++) {
            buf.putLong(rolls[i]);
        }
        for (long d : durations) {
            buf.putLong(d);
        }
        buf.flip();
        try (FileChannel ch = FileChannel.open(Path.of(out), StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING)) {
            while (buf.hasRemaining()) {
                ch.write(buf);
            }
        }
        System.out.println("{\"segments\": " + segments + "}");
    }

    private static void reader(String dir, long segmentSize, long n) throws IOException {
        Tick t = new Tick();
        long expected = 0;
        long first = -1;
        long start = -1;
        long outOfOrder = 0;
        long read = 0;
        long lost;
        long t0;
        long elapsed;
        try (RollingBusReader r = new RollingBusReader(dir, segmentSize, RECORD_SIZE)) {
            r.setFailOnGap(false);
            r.open();
            t0 = System.nanoTime();
            long idleSince = System.nanoTime();
            while (expected < n) {
                if (!r.next()) {
                    if (System.nanoTime() - idleSince > 30_000_000_000L) {
                        break;
                    }
                    Thread.onSpinWait();
                    continue;
                }
                idleSince = System.nanoTime();
                r.readMessage(t);
                if (first < 0) {
                    // the oldest retained record: the writer may have rolled before this JVM started
                    first = expected = t.seq;
                    // where it started: the slots skipped before the first record were lost already
                    start = first - r.lost();
                }
                if (t.seq != expected) {
                    if (t.seq < expected) {
                        outOfOrder++;
                    }
                    expected = t.seq;
                }
                expected++;
                read++;
            }
            elapsed = System.nanoTime() - t0;
            lost = r.lost();
        }
        long rss = 0;
        for (String line : java.nio.file.Files.readAllLines(Path.of("/proc/self/status"))) {
            if (line.startsWith("VmHWM:")) {
                rss = Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        System.out.println("{\"read\": " + read + ", \"lost_slots\": " + lost + ", \"out_of_order\": " + outOfOrder + ", \"first_seq\": " + first + ", \"start_seq\": " + start
                + ", \"last_seq\": " + (expected - 1) + ", \"seconds\": " + elapsed / 1e9 + ", \"maxrss_kb\": " + rss + "}");
    }
}
