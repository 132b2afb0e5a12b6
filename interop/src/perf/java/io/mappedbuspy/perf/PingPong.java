package io.mappedbuspy.perf;

import io.mappedbuspy.MappedBusReader;
import io.mappedbuspy.MappedBusWriter;
import io.mappedbuspy.messages.PriceUpdate;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.Locale;

/**
 * Round-trip latency benchmark over two buses, {@code ping} and {@code pong} (PriceUpdate, record size 12).
 *
 * <p>{@code echo} reads each PriceUpdate from ping and writes it back on pong. {@code initiate} writes a
 * PriceUpdate on ping, busy-spins until its echo arrives on pong, and times the round trip with
 * {@link System#nanoTime()}; after {@code warmup} untimed round trips it times {@code count} more, writes
 * them as little-endian int64 nanoseconds to {@code rttFile} and prints a JSON summary. Either side may be
 * a Python process doing the same. Both sides map every page of both buses before the first round trip, as
 * the Python sides do (prefault=True): a page fault every 204 round trips would otherwise land in the timing
 * on the Java side only.
 */
public final class PingPong {
    private PingPong() {
    }

    /**
     * Runs one side.
     *
     * @param args {@code echo <ping> <pong> <fileSize> <total>} or
     *             {@code initiate <ping> <pong> <fileSize> <count> <warmup> <rttFile>}
     * @throws Exception on any I/O error
     */
    public static void main(String[] args) throws Exception {
        if (args.length == 5 && args[0].equals("echo")) {
            echo(args[1], args[2], Long.parseLong(args[3]), Long.parseLong(args[4]));
        } else if (args.length == 7 && args[0].equals("initiate")) {
            initiate(args[1], args[2], Long.parseLong(args[3]), Integer.parseInt(args[4]),
                    Integer.parseInt(args[5]), args[6]);
        } else {
            System.err.println("usage: PingPong echo <ping> <pong> <fileSize> <total>\n"
                    + "       PingPong initiate <ping> <pong> <fileSize> <count> <warmup> <rttFile>");
            System.exit(2);
        }
    }

    private static void echo(String ping, String pong, long fileSize, long total)
            throws IOException, ReflectiveOperationException {
        PriceUpdate m = new PriceUpdate();
        try (MappedBusReader r = new MappedBusReader(ping, fileSize, PriceUpdate.SIZE).open();
             MappedBusWriter w = new MappedBusWriter(pong, fileSize, PriceUpdate.SIZE).open()) {
            Prefault.touch(r, fileSize);
            Prefault.touch(w, fileSize);
            System.err.println("ready");
            System.err.flush();
            for (long i = 0; i < total; i++) {
                while (!r.next()) {
                    Thread.onSpinWait();
                }
                r.readMessage(m);
                w.write(m);
            }
        }
    }

    private static void initiate(String ping, String pong, long fileSize, int count, int warmup,
                                 String rttFile) throws IOException, ReflectiveOperationException {
        PriceUpdate out = new PriceUpdate(1, 0, 0);
        PriceUpdate back = new PriceUpdate();
        long[] rtt = new long[count];
        try (MappedBusWriter w = new MappedBusWriter(ping, fileSize, PriceUpdate.SIZE).open();
             MappedBusReader r = new MappedBusReader(pong, fileSize, PriceUpdate.SIZE).open()) {
            Prefault.touch(w, fileSize);
            Prefault.touch(r, fileSize);
            for (int i = 0; i < warmup + count; i++) {
                out.setPrice(i);
                long t0 = System.nanoTime();
                w.write(out);
                while (!r.next()) {
                    Thread.onSpinWait();
                }
                r.readMessage(back);
                long t1 = System.nanoTime();
                if (back.getPrice() != i) {
                    throw new IllegalStateException("echo " + back.getPrice() + " for ping " + i);
                }
                if (i >= warmup) {
                    rtt[i - warmup] = t1 - t0;
                }
            }
        }
        ByteBuffer buf = ByteBuffer.allocate(8 * count).order(ByteOrder.LITTLE_ENDIAN);
        buf.asLongBuffer().put(rtt);
        try (FileChannel ch = FileChannel.open(Paths.get(rttFile), StandardOpenOption.CREATE,
                StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
            while (buf.hasRemaining()) {
                ch.write(buf);
            }
        }
        long[] sorted = rtt.clone();
        Arrays.sort(sorted);
        System.out.println(String.format(Locale.ROOT,
                "{\"round_trips\": %d, \"p50_ns\": %d, \"p99_ns\": %d, \"max_ns\": %d}",
                count, sorted[count / 2], sorted[(int) (count * 0.99)], sorted[count - 1]));
    }
}
