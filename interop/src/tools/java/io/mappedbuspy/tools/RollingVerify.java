package io.mappedbuspy.tools;

import io.mappedbuspy.BusGapException;
import io.mappedbuspy.BusReplacedException;
import io.mappedbuspy.Layout;
import io.mappedbuspy.RollingBusReader;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;

/**
 * A rolling-bus reader for reliability tests that prints a summary instead of the records (the twin of
 * {@code tests/support/rolling_child.py verify}, same lines):
 * <pre>
 *  RollingVerify dir segmentSize recordSize [--timeout ms] [--idle-exit ms] [--stop-file F]
 *      [--on-gap raise|skip] [--start pos] [--poll-sleep-us n]
 * </pre>
 * An idle reader sleeps {@code --poll-sleep-us} (default 1000) between polls after 1000 spins; 0 only yields.
 * Records are 8 bytes: int32 writer id, int32 i. Prints "ready" once open; at the end (idle for
 * {@code --idle-exit} ms, counted from when it saw the stop file if one is given) maybe "GAP lostFrom lostTo lost" or
 * "REPLACED", then "RATE n seconds cpuSeconds" and
 * "VERIFY n=N skipped=S lost=L hash=H bad=B writers=id:count:first:last,...": H is the order-sensitive hash
 * {@code h = h * P + v} (mod 2^64) over the records in read order, v the 8 payload bytes as a little-endian
 * long; B counts records whose i is not above their writer's previous one.
 */
public final class RollingVerify {
    /** The hash's multiplier (the 64-bit FNV prime), the same as rolling_child.py's HASH_P. */
    static final long HASH_P = 0x100000001B3L;
    private static final int MAX_WRITER = 1 << 16;

    private long n;
    private long hash;
    private long bad;
    // Per writer id: what was read of it; null for a writer not seen.
    private final Seen[] writers = new Seen[MAX_WRITER];

    /** One writer's records read: how many, the first and the last sequence number. */
    private static final class Seen {
        long count = 1;
        final long first;
        long last;

        Seen(long i) {
            first = i;
            last = i;
        }
    }

    private RollingVerify() {
    }

    void add(long v) {
        n++;
        hash = hash * HASH_P + v;
        int wid = (int) v;
        int i = (int) (v >>> 32);
        if (wid < 0 || wid >= MAX_WRITER) {
            bad++;
            return;
        }
        Seen st = writers[wid];
        if (st == null) {
            writers[wid] = new Seen(i);
            return;
        }
        if (i <= st.last) {
            bad++;
        }
        st.count++;
        st.last = i;
    }

    String summary(long skipped, long lost) {
        StringBuilder ws = new StringBuilder();
        for (int w = 0; w < MAX_WRITER; w++) {
            Seen st = writers[w];
            if (st != null) {
                if (ws.length() > 0) {
                    ws.append(',');
                }
                ws.append(w).append(':').append(st.count).append(':').append(st.first).append(':').append(st.last);
            }
        }
        return "VERIFY n=" + n + " skipped=" + skipped + " lost=" + lost + " hash="
                + String.format("%016x", hash) + " bad=" + bad + " writers=" + ws;
    }

    public static void main(String[] a) throws IOException {
        if (a.length < 3) {
            System.err.println("usage: RollingVerify <dir> <segmentSize> <recordSize> [--timeout ms] "
                    + "[--idle-exit ms] [--stop-file F] [--on-gap raise|skip] [--start pos] [--poll-sleep-us n]");
            System.exit(2);
        }
        long segmentSize = Long.parseLong(a[1]);
        int recordSize = Integer.parseInt(a[2]);
        int timeoutMs = Layout.DEFAULT_TIMEOUT_MS;
        long idleExitMs = 5000;
        Path stop = null;
        boolean skip = false;
        long start = -1;
        long pollSleepUs = 1000;
        for (int i = 3; i < a.length; i++) {
            String opt = a[i];
            if (i + 1 >= a.length) {
                System.err.println(opt + " needs a value");
                System.exit(2);
            }
            String val = a[++i];
            switch (opt) {
                case "--timeout": timeoutMs = Integer.parseInt(val); break;
                case "--idle-exit": idleExitMs = Long.parseLong(val); break;
                case "--stop-file": stop = Path.of(val); break;
                case "--on-gap": skip = val.equals("skip"); break;
                case "--start": start = Long.parseLong(val); break;
                case "--poll-sleep-us": pollSleepUs = Long.parseLong(val); break;
                default:
                    System.err.println("unknown option " + opt);
                    System.exit(2);
            }
        }
        RollingVerify ver = new RollingVerify();
        byte[] rec = new byte[recordSize];
        String end = null;
        long first = 0;
        long last = 0;
        try (RollingBusReader r = new RollingBusReader(a[0], segmentSize, recordSize)
                .setTimeout(timeoutMs).setFailOnGap(!skip).open()) {
            System.out.println("ready");
            System.out.flush();
            try {
                if (start >= 0) {
                    r.seek(start);
                }
                long idleSince = System.nanoTime();
                boolean stopSeen = stop == null;
                int idle = 0;
                for (;;) {
                    if (r.next()) {
                        r.readBuffer(rec, 0);
                        long v = 0;
                        for (int b = 7; b >= 0; b--) {
                            v = (v << 8) | (rec[b] & 0xFF);
                        }
                        ver.add(v);
                        if (first == 0) {
                            first = System.nanoTime();
                        }
                        idle = 0;
                        continue;
                    }
                    long now = System.nanoTime();
                    if (idle == 0) {
                        // The first empty poll after records: the last one came just before.
                        if (ver.n > 0) {
                            last = now;
                        }
                        idleSince = now;
                    }
                    if (now - idleSince >= idleExitMs * 1_000_000L) {
                        if (stopSeen) {
                            break;
                        }
                        if (Files.exists(stop)) {
                            // Idle time counts from here: a reader paused (SIGSTOP) until after the stop file
                            // appeared has not looked for records yet.
                            stopSeen = true;
                            idleSince = now;
                        }
                    }
                    // Spin briefly, then back off so a waiting reader leaves the cores to the writers.
                    if (++idle > 1000) {
                        if (pollSleepUs > 0) {
                            java.util.concurrent.locks.LockSupport.parkNanos(pollSleepUs * 1000);
                        } else {
                            Thread.yield();
                        }
                    } else {
                        Thread.onSpinWait();
                    }
                }
            } catch (BusGapException e) {
                end = "GAP " + e.lostFrom() + " " + e.lostTo() + " " + e.lost();
            } catch (BusReplacedException e) {
                end = "REPLACED";
            }
            if (end != null) {
                System.out.println(end);
            }
            Duration cpu = ProcessHandle.current().info().totalCpuDuration().orElse(Duration.ZERO);
            System.out.printf("RATE %d %.6f %.3f%n", ver.n, (last - first) / 1e9, cpu.toNanos() / 1e9);
            System.out.println(ver.summary(r.rolledBackSkipped(), r.lost()));
        }
    }
}
