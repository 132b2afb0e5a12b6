package io.mappedbuspy.perf;

import io.mappedbuspy.IdleStrategy;
import io.mappedbuspy.MappedBusReader;
import io.mappedbuspy.MappedBusWriter;
import io.mappedbuspy.internal.WakeFile;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * The sporadic probe of perf/bench_wake.py, Java side: one small record now and then, each carrying its send
 * time, and a reader that waits for each with the library's own wait.
 *
 * <p>{@code writer} writes {@code count} 16-byte records (little-endian int64 sequence number, then int64
 * {@link System#nanoTime()} read just before the write) with {@link Thread#sleep} of {@code intervalNanos}
 * between them. {@code reader} waits for each with {@link MappedBusReader#waitNext} ({@code SPIN_PARK} unless
 * told otherwise), takes {@link System#nanoTime()} as it returns and stores receive time - send time (both
 * CLOCK_MONOTONIC, as Python's {@code time.monotonic_ns}) as little-endian int64 nanoseconds in
 * {@code latFile}. It prints one JSON line: the process's CPU time from the receipt of record {@code warmup} to
 * the last (cpu_ns) and the wall time between them (wall_ns), and whether the wake library is loaded.
 *
 * <p>The CPU time is the sum of the first field of {@code /proc/self/task/*}{@code /schedstat} (nanoseconds on
 * the CPU) over every thread of the JVM: the reading thread and the JVM's own (JIT compilers, GC, ...), the
 * quantity Python's {@code time.process_time_ns} reads for its process. {@code /proc/self/stat} and
 * {@code ProcessHandle}'s totalCpuDuration count the same in clock ticks (10 ms), too coarse for a 1% figure
 * over half a second.
 */
public final class WakeProbe {
    static final int RECORD_SIZE = 16;

    private WakeProbe() {
    }

    /**
     * Runs one side.
     *
     * @param args {@code writer <path> <fileSize> <count> <intervalNanos>} or
     *             {@code reader <path> <fileSize> <count> <warmup> <latFile> [BUSY_SPIN|SPIN_PARK|PARK]}
     * @throws Exception on any I/O error, or a record missing or out of order
     */
    public static void main(String[] args) throws Exception {
        if (args.length == 5 && args[0].equals("writer")) {
            writer(args[1], Long.parseLong(args[2]), Integer.parseInt(args[3]), Long.parseLong(args[4]));
        } else if ((args.length == 6 || args.length == 7) && args[0].equals("reader")) {
            IdleStrategy idle = args.length == 7 ? IdleStrategy.valueOf(args[6]) : IdleStrategy.SPIN_PARK;
            reader(args[1], Long.parseLong(args[2]), Integer.parseInt(args[3]), Integer.parseInt(args[4]), args[5],
                    idle);
        } else {
            System.err.println("usage: WakeProbe writer <path> <fileSize> <count> <intervalNanos>\n"
                    + "       WakeProbe reader <path> <fileSize> <count> <warmup> <latFile> [idle strategy]");
            System.exit(2);
        }
    }

    private static void writer(String path, long fileSize, int count, long intervalNanos)
            throws IOException, InterruptedException {
        byte[] buf = new byte[RECORD_SIZE];
        ByteBuffer b = ByteBuffer.wrap(buf).order(ByteOrder.LITTLE_ENDIAN);
        long sleepMs = intervalNanos / 1_000_000;
        int sleepNs = (int) (intervalNanos % 1_000_000);
        try (MappedBusWriter w = new MappedBusWriter(path, fileSize, RECORD_SIZE).open()) {
            for (int i = 0; i < count; i++) {
                b.putLong(0, i);
                b.putLong(8, System.nanoTime());
                w.write(buf, 0, RECORD_SIZE);
                Thread.sleep(sleepMs, sleepNs);
            }
        }
    }

    private static void reader(String path, long fileSize, int count, int warmup, String latFile,
                               IdleStrategy idle) throws IOException, InterruptedException {
        byte[] buf = new byte[RECORD_SIZE];
        ByteBuffer b = ByteBuffer.wrap(buf).order(ByteOrder.LITTLE_ENDIAN);
        long[] lat = new long[count];
        long cpu0 = 0;
        long wall0 = 0;
        long wall1 = 0;
        try (MappedBusReader r = new MappedBusReader(path, fileSize, RECORD_SIZE).setIdleStrategy(idle).open()) {
            System.err.println("ready");
            System.err.flush();
            for (int i = 0; i < count; i++) {
                if (!r.waitNext(30, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("no record " + i + " within 30 s");
                }
                long now = System.nanoTime();
                r.readBuffer(buf, 0);
                if (b.getLong(0) != i) {
                    throw new IllegalStateException("record " + b.getLong(0) + " where " + i + " was due");
                }
                lat[i] = now - b.getLong(8);
                if (i == warmup) {
                    wall0 = now;
                    cpu0 = cpuNanos();
                }
                wall1 = now;
            }
        }
        long cpu1 = cpuNanos();
        ByteBuffer out = ByteBuffer.allocate(8 * count).order(ByteOrder.LITTLE_ENDIAN);
        out.asLongBuffer().put(lat);
        try (FileChannel ch = FileChannel.open(Paths.get(latFile), StandardOpenOption.CREATE,
                StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
            while (out.hasRemaining()) {
                ch.write(out);
            }
        }
        System.out.println(String.format(Locale.ROOT,
                "{\"messages\": %d, \"warmup\": %d, \"cpu_ns\": %d, \"wall_ns\": %d, \"idle\": \"%s\", "
                + "\"wake_native\": %b}",
                count, warmup, cpu1 - cpu0, wall1 - wall0, idle, WakeFile.nativeLoaded()));
    }

    /** Nanoseconds on the CPU of every live thread of this process (see the class comment). */
    static long cpuNanos() throws IOException {
        long sum = 0;
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Paths.get("/proc/self/task"))) {
            for (Path t : tasks) {
                try {
                    String s = new String(Files.readAllBytes(t.resolve("schedstat")),
                            java.nio.charset.StandardCharsets.US_ASCII);
                    sum += Long.parseLong(s.substring(0, s.indexOf(' ')));
                } catch (java.nio.file.NoSuchFileException e) {
                    // the thread ended since the listing
                }
            }
        }
        return sum;
    }
}
