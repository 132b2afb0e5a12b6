package io.mappedbuspy.perf;

import io.mappedbuspy.IdleStrategy;
import io.mappedbuspy.Layout;
import io.mappedbuspy.MappedBusReader;
import io.mappedbuspy.MappedBusWriter;
import io.mappedbuspy.internal.WakeFile;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * What parking costs on the Java side (issue 22), in one JVM: a reader thread parked in {@code waitNext}
 * (IdleStrategy.PARK, a park bound of 1 s, so only a wake delivers in time) and a writer thread that waits until the
 * reader is parked (and a millisecond more: asleep in the kernel), then writes a record holding
 * {@link System#nanoTime()}. Prints a JSON line: the wake-up latency (writer's commit to the reader's return from
 * {@code waitNext}) over {@code count} records, the cost of one {@code WakeFile.wake()} (a seq-cst exchange and
 * add, and the JNI call that makes FUTEX_WAKE) with nobody parked, and a writer's {@code write} with nobody parked
 * (the one load it adds).
 *
 * <pre>
 *  java -cp build/jvm/mappedbuspy.jar:build/jvm/mappedbuspy-perf.jar io.mappedbuspy.perf.WakeLatency [dir] [count]
 * </pre>
 */
public final class WakeLatency {
    private WakeLatency() {
    }

    public static void main(String[] args) throws Exception {
        String dir = args.length > 0 ? args[0] : "/dev/shm";
        int count = args.length > 1 ? Integer.parseInt(args[1]) : 1000;
        String path = Paths.get(dir, "mb-wakelat-" + ProcessHandle.current().pid() + ".bus").toString();
        long fileSize = 64L << 20;
        int recordSize = 8;
        try (MappedBusWriter w = new MappedBusWriter(path, fileSize, recordSize).open();
             MappedBusReader r = new MappedBusReader(path, fileSize, recordSize).open();
             WakeFile probe = WakeFile.forBus(path, false)) {
            r.setIdleStrategy(IdleStrategy.PARK).setParkNanos(1_000_000_000L).setParkMaxNanos(1_000_000_000L);
            long[] lat = new long[count];
            Thread reader = new Thread(() -> {
                byte[] b = new byte[8];
                try {
                    for (int i = 0; i < count; i++) {
                        if (!r.waitNext(30, TimeUnit.SECONDS)) {
                            throw new IllegalStateException("no record " + i);
                        }
                        long now = System.nanoTime();
                        r.readBuffer(b, 0);
                        lat[i] = now - ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).getLong(0);
                    }
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            }, "parked-reader");
            reader.start();
            byte[] b = new byte[8];
            ByteBuffer bb = ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
            for (int i = 0; i < count; i++) {
                while (probe.parked() == 0) {
                    Thread.onSpinWait();
                }
                Thread.sleep(1); // asleep in FUTEX_WAIT by now
                bb.putLong(0, System.nanoTime());
                w.write(b, 0, 8);
            }
            reader.join();
            Arrays.sort(lat);

            // WakeFile.wake() alone, nobody parked: the cost a writer pays per commit while someone is.
            int wakes = 200_000;
            for (int i = 0; i < wakes; i++) {
                probe.wake();
            }
            long t0 = System.nanoTime();
            for (int i = 0; i < wakes; i++) {
                probe.wake();
            }
            double wakeNs = (System.nanoTime() - t0) / (double) wakes;

            // A writer's write() with nobody parked: what the look at the parked count leaves of the busy path.
            int writes = 1_000_000;
            try (MappedBusWriter w2 = new MappedBusWriter(path + "-2", 64L << 20, recordSize).open()) {
                long t1 = 0;
                for (int i = 0; i < writes; i++) {
                    if (i == writes / 2) {
                        t1 = System.nanoTime();
                    }
                    w2.write(b, 0, 8);
                }
                double writeNs = (System.nanoTime() - t1) / (double) (writes - writes / 2);
                System.out.println(String.format(Locale.ROOT, "{\"native\": %b, \"count\": %d, \"wake_latency_us\": "
                        + "{\"p50\": %.1f, \"p90\": %.1f, \"p99\": %.1f, \"max\": %.1f}, \"wake_call_ns\": %.0f, "
                        + "\"write_nobody_parked_ns\": %.1f}", WakeFile.nativeLoaded(), count, lat[count / 2] / 1e3,
                        lat[count * 9 / 10] / 1e3, lat[count * 99 / 100] / 1e3, lat[count - 1] / 1e3, wakeNs, writeNs));
            }
        } finally {
            Layout.removeBus(path);          // each bus with every side file (the writers file too)
            Layout.removeBus(path + "-2");
        }
    }
}
