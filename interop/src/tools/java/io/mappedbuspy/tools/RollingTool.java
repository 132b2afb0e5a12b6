package io.mappedbuspy.tools;

import io.mappedbuspy.BusGapException;
import io.mappedbuspy.Layout;
import io.mappedbuspy.MappedBusMessage;
import io.mappedbuspy.MappedBusReader;
import io.mappedbuspy.MappedBusWriter;
import io.mappedbuspy.RollingBusReader;
import io.mappedbuspy.RollingBusWriter;
import io.mappedbuspy.messages.PriceUpdate;
import io.mappedbuspy.messages.RawPayload;
import io.mappedbuspy.messages.Token;
import io.mappedbuspy.messages.Trade;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * BusTool's rolling-bus commands (the twin of {@code tests/support/rolling_child.py}, same output lines):
 * <pre>
 *  rolling-write dir segmentSize recordSize count writerId [--retain-segments n] [--retain-bytes n]
 *      [--retain-age-ms n] [--sync none|segment|interval] [--sync-interval-ms n] [--sync-at-end]
 *      [--pause-every n] [--time-index] [--archive dir] [--archive-after n] [--archive-age-ms n]
 *      [--compress none|zstd|lz4] [--archive-retain-segments n] [--first i] [--archive-wait] [--hold]: 8-byte records
 *      (int32 writerId, int32 i, i from --first); prints "wrote N committed M"
 *  rolling-write-objects dir segmentSize recordSize count price|token|trade writerId [--retain-...]
 *  rolling-read dir segmentSize recordSize count [--idle-exit ms] [--on-gap raise|skip] [--timeout ms]
 *      [--read-only] [--start pos|end] [--since epochNanos] [--consumer name]: "position meta payloadhex" per
 *      record, then
 *      "END n lost=L skipped=S" (or "GAP lostFrom lostTo lost")
 *  rolling-read-objects dir segmentSize recordSize count price|token|trade [options of rolling-read]
 *  rolling-seek-time dir epochNanos...: per time, the first record's position after seekTime, or "END"
 *  rolling-bench-write dir segmentSize|0 count [--warm-up n]: PriceUpdates as fast as possible; "wrote N seconds"
 *      (0: one single file dir/single.bus instead); prints "rolls R max_ns=X mean_ns=Y" too
 *  rolling-bench-read dir segmentSize|0 count [--passes n]: "read N seconds", timed from the first record, each read
 * </pre>
 */
public final class RollingTool {
    static final String USAGE = String.join("\n",
            "  rolling-write <dir> <segmentSize> <recordSize> <count> <writerId> [--retain-segments n]",
            "      [--retain-bytes n] [--retain-age-ms n] [--sync none|segment|interval] [--sync-interval-ms n]",
            "      [--sync-at-end] [--pause-every n] [--time-index]: as write-bytes, on a rolling bus (--sync-at-end:",
            "      sync() before closing; --pause-every: a 2 ms sleep before every n-th record; --time-index: the",
            "      bus keeps a time index; --archive...: the archive tier, --archive-wait: wait for the archiver",
            "      before closing; --first i: the first record's i; --hold: print OPEN once open, WRITTEN once",
            "      written, then wait to be killed)",
            "  rolling-write-objects <dir> <segmentSize> <recordSize> <count> price|token|trade <writerId> [--retain-...]",
            "  rolling-read <dir> <segmentSize> <recordSize> <count> [--idle-exit ms] [--on-gap raise|skip]",
            "      [--timeout ms] [--read-only] [--start pos|end] [--since epochNanos] [--consumer name]: global",
            "      positions (--since: seekTime first; --consumer: read as that named consumer, committed at the end); ends with",
            "      'END <n> lost=<n> skipped=<n>' or 'GAP <lostFrom> <lostTo> <lost>'",
            "  rolling-read-objects <dir> <segmentSize> <recordSize> <count> price|token|trade [rolling-read options]",
            "  rolling-seek-time <dir> <epochNanos>...: per time, the position of the first record seekTime reads,",
            "      or 'END'",
            "  rolling-bench-write <dir> <segmentSize|0 for a single file> <count> [--sync policy]",
            "      [--sync-interval-ms n] [--time-index on|off] [--archive dir --archive-after n --compress c]",
            "      [--warm-up n: n records first, to a scratch bus beside dir (with --archive, and a scratch archive),",
            "      removed, so that the JIT compiles the write path and the archiver's before the timed run, not",
            "      on the archiver's core during it]:",
            "      PriceUpdates ('archived <segments> caught_up_s=<s> ok=<bool>' after the writes with --archive);",
            "      'wrote <n> <seconds>' and 'rolls <n> max_ns=<ns> mean_ns=<ns>'",
            "  rolling-bench-read <dir> <segmentSize|0> <count> [--passes n]: 'read <n> <seconds>' from the first record,",
            "      each record read into a PriceUpdate",
            "      (--passes: the bus read n times from its start, each by a new reader, the last one timed: a JIT",
            "      warmed as a long-running reader's is)");

    /** Bad command-line arguments. */
    static final class BadArgs extends Exception {
        private static final long serialVersionUID = 1L;

        BadArgs(String message) {
            super(message);
        }
    }

    private RollingTool() {
    }

    /** Runs one rolling-* command; the exit status. */
    static int run(String cmd, String[] a) throws BadArgs, IOException, InterruptedException {
        switch (cmd) {
            case "rolling-write":
                need(a, 5, cmd);
                return write(a, "bytes", 4, 5);
            case "rolling-write-objects":
                need(a, 6, cmd);
                return write(a, kind(a[4]), 5, 6);
            case "rolling-read":
                need(a, 4, cmd);
                return read(a, null, 4);
            case "rolling-seek-time":
                need(a, 2, cmd);
                return seekTime(a);
            case "rolling-read-objects":
                need(a, 5, cmd);
                return read(a, kind(a[4]), 5);
            case "rolling-bench-write":
                need(a, 3, cmd);
                return benchWrite(a[0], num(a[1]), num(a[2]), Arrays.copyOfRange(a, 3, a.length));
            case "rolling-bench-read":
                need(a, 3, cmd);
                return benchRead(a[0], num(a[1]), num(a[2]), benchReadPasses(Arrays.copyOfRange(a, 3, a.length)));
            default:
                throw new BadArgs("unknown command " + cmd);
        }
    }

    private static int write(String[] a, String kind, int idAt, int optsFrom) throws BadArgs, IOException {
        long count = num(a[3]);
        int id = (int) num(a[idAt]);
        long[] retain = new long[3];
        String sync = "none";
        long syncIntervalMs = 1000;
        boolean syncAtEnd = false;
        long pauseEvery = 0;
        boolean timeIndex = false;
        String archive = null;
        long archiveAfter = -1;
        long archiveAgeMs = -1;
        String compress = null;
        long archiveRetain = -1;
        long first = 0;
        boolean archiveWait = false;
        boolean hold = false;
        for (int i = optsFrom; i < a.length; i++) {
            switch (a[i]) {
                case "--retain-segments": retain[0] = num(value(a, ++i)); break;
                case "--retain-bytes": retain[1] = num(value(a, ++i)); break;
                case "--retain-age-ms": retain[2] = num(value(a, ++i)); break;
                case "--sync": sync = value(a, ++i); break;
                case "--sync-interval-ms": syncIntervalMs = num(value(a, ++i)); break;
                case "--sync-at-end": syncAtEnd = true; break;
                case "--pause-every": pauseEvery = num(value(a, ++i)); break;
                case "--time-index": timeIndex = true; break;
                case "--archive": archive = value(a, ++i); break;
                case "--archive-after": archiveAfter = num(value(a, ++i)); break;
                case "--archive-age-ms": archiveAgeMs = num(value(a, ++i)); break;
                case "--compress": compress = value(a, ++i); break;
                case "--archive-retain-segments": archiveRetain = num(value(a, ++i)); break;
                case "--first": first = num(value(a, ++i)); break;
                case "--archive-wait": archiveWait = true; break;
                case "--hold": hold = true; break;
                default: throw new BadArgs("unknown option " + a[i]);
            }
        }
        long committed = 0;
        long wrote = 0;
        byte[] rec = new byte[8];
        PriceUpdate price = new PriceUpdate();
        Token token = new Token();
        Trade trade = new Trade();
        RollingBusWriter w0 = new RollingBusWriter(a[0], num(a[1]), (int) num(a[2]))
                .setRetention(retain[0], retain[1], retain[2]).setSync(sync)
                .setSyncInterval(syncIntervalMs, java.util.concurrent.TimeUnit.MILLISECONDS);
        if (timeIndex) {
            w0.setTimeIndex(true);
        }
        if (archive != null) {
            w0.setArchive(archive);
        }
        if (archiveAfter >= 0) {
            w0.setArchiveAfter(archiveAfter);
        }
        if (archiveAgeMs >= 0) {
            w0.setArchiveAge(archiveAgeMs, java.util.concurrent.TimeUnit.MILLISECONDS);
        }
        if (compress != null) {
            w0.setCompress(compress);
        }
        if (archiveRetain >= 0) {
            w0.setArchiveRetention(archiveRetain, 0, 0);
        }
        try (RollingBusWriter w = w0.open()) {
            if (hold) {
                System.out.println("OPEN");
                System.out.flush();
            }
            for (long i = first; i < first + count; i++) {
                if (pauseEvery > 0 && i % pauseEvery == 0) {
                    try {
                        Thread.sleep(2);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        break;
                    }
                }
                boolean ok;
                switch (kind) {
                    case "bytes":
                        for (int b = 0; b < 4; b++) {
                            rec[b] = (byte) (id >>> (8 * b));
                            rec[4 + b] = (byte) (i >>> (8 * b));
                        }
                        ok = w.write(rec, 0, 8);
                        break;
                    case "price":
                        price.setSource(id);
                        price.setPrice((int) i);
                        price.setQuantity((int) (2 * i));
                        ok = w.write(price);
                        break;
                    case "token":
                        token.setFrom(id);
                        token.setTo((int) i);
                        ok = w.write(token);
                        break;
                    default:
                        trade.setId(id * 1_000_000_000L + i);
                        trade.setPrice(i + 0.5);
                        trade.setQuantity(id);
                        ok = w.write(trade);
                        break;
                }
                wrote++;
                if (ok) {
                    committed++;
                }
            }
            if (syncAtEnd) {
                w.sync();
            }
            if (archiveWait && !w.awaitArchived(120, java.util.concurrent.TimeUnit.SECONDS)) {
                throw new IOException("the archiver of " + a[0] + " did not finish within 120 s");
            }
            if (hold) {
                System.out.println("WRITTEN");
                System.out.flush();
                for (;;) {
                    try {
                        Thread.sleep(3_600_000L);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        break;
                    }
                }
            }
        } finally {
            System.out.println("wrote " + wrote + " committed " + committed);
        }
        return 0;
    }

    private static int read(String[] a, String kind, int optsFrom) throws BadArgs, IOException, InterruptedException {
        int recordSize = (int) num(a[2]);
        long count = num(a[3]);
        long idleExitMs = 5000;
        boolean skip = false;
        boolean readOnly = false;
        int timeoutMs = Layout.DEFAULT_TIMEOUT_MS;
        String start = null;
        String since = null;
        String consumer = null;
        for (int i = optsFrom; i < a.length; i++) {
            switch (a[i]) {
                case "--since": since = value(a, ++i); break;
                case "--consumer": consumer = value(a, ++i); break;
                case "--idle-exit": idleExitMs = num(value(a, ++i)); break;
                case "--timeout": timeoutMs = (int) num(value(a, ++i)); break;
                case "--read-only": readOnly = true; break;
                case "--start": start = value(a, ++i); break;
                case "--on-gap":
                    String g = value(a, ++i);
                    if (!g.equals("raise") && !g.equals("skip")) {
                        throw new BadArgs("--on-gap must be raise or skip, got " + g);
                    }
                    skip = g.equals("skip");
                    break;
                default: throw new BadArgs("unknown option " + a[i]);
            }
        }
        PrintWriter out = new PrintWriter(new BufferedWriter(
                new OutputStreamWriter(System.out, StandardCharsets.US_ASCII), 1 << 16));
        RollingBusReader opening = new RollingBusReader(a[0], num(a[1]), recordSize, readOnly)
                .setFailOnGap(!skip).setTimeout(timeoutMs);
        if (consumer != null) {
            opening.setConsumer(consumer);
        }
        try (RollingBusReader r = opening.open()) {
            long n = 0;
            try {
                if (since != null) {
                    r.seekTime(num(since));
                }
                if ("end".equals(start)) {
                    r.seekToEnd();
                } else if (start != null) {
                    r.seek(num(start));
                }
                RawPayload raw = new RawPayload(recordSize);
                MappedBusMessage decoded = kind == null ? null : kind.equals("price") ? new PriceUpdate()
                        : kind.equals("token") ? new Token() : new Trade();
                StringBuilder line = new StringBuilder();
                long lastProgress = System.nanoTime();
                int idle = 0;
                while (n < count) {
                    if (r.next()) {
                        line.setLength(0);
                        line.append(r.recordPosition()).append(' ').append(r.readType()).append(' ');
                        if (decoded == null) {
                            r.readMessage(raw);
                            for (byte b : raw.bytes()) {
                                line.append(Character.forDigit((b >> 4) & 15, 16)).append(Character.forDigit(b & 15, 16));
                            }
                        } else {
                            line.append(r.readMessage(decoded));
                        }
                        out.println(line);
                        n++;
                        lastProgress = System.nanoTime();
                        idle = 0;
                    } else {
                        if (System.nanoTime() - lastProgress >= idleExitMs * 1_000_000L) {
                            break;
                        }
                        // Spin briefly, then back off so a waiting reader leaves the core to writers.
                        if (++idle > 1000) {
                            out.flush();
                            Thread.sleep(1);
                        } else {
                            Thread.onSpinWait();
                        }
                    }
                }
            } catch (BusGapException e) {
                out.println("GAP " + e.lostFrom() + " " + e.lostTo() + " " + e.lost());
                return 0;
            }
            if (consumer != null) {
                r.commit(); // what was read: the next reader of that name goes on from here
            }
            out.println("END " + n + " lost=" + r.lost() + " skipped=" + r.rolledBackSkipped());
        } finally {
            out.flush();
        }
        return 0;
    }

    // Throughput of one writer: PriceUpdates on a rolling bus, or (segmentSize 0) on one file big enough.
    private static int benchWrite(String dir, long segmentSize, long count, String[] opts)
            throws IOException, BadArgs {
        PriceUpdate m = new PriceUpdate(1, 2, 3);
        long t0;
        long t1;
        if (segmentSize > 0) {
            RollingBusWriter w0 = new RollingBusWriter(dir, segmentSize, PriceUpdate.SIZE);
            long warmUp = 0;
            boolean timeIndex = false;
            String archive = null;
            String compress = null;
            long archiveAfter = -1;
            for (int i = 0; i < opts.length; i++) {
                switch (opts[i]) {
                    case "--warm-up": warmUp = num(value(opts, ++i)); break;
                    case "--sync": w0.setSync(value(opts, ++i)); break;
                    case "--sync-interval-ms":
                        w0.setSyncInterval(num(value(opts, ++i)), java.util.concurrent.TimeUnit.MILLISECONDS);
                        break;
                    case "--time-index":
                        timeIndex = value(opts, ++i).equals("on");
                        w0.setTimeIndex(timeIndex);
                        break;
                    case "--archive":
                        archive = value(opts, ++i);
                        w0.setArchive(archive);
                        break;
                    case "--archive-after":
                        archiveAfter = num(value(opts, ++i));
                        w0.setArchiveAfter(archiveAfter);
                        break;
                    case "--compress":
                        compress = value(opts, ++i);
                        w0.setCompress(compress);
                        break;
                    default: throw new BadArgs("unknown option " + opts[i]);
                }
            }
            if (warmUp > 0) {
                // The same writer (and archiver: the same settings, a scratch archive) on a scratch bus.
                String scratch = dir + ".warm-up";
                String scratchArchive = archive == null ? null : archive + ".warm-up";
                RollingBusWriter s = new RollingBusWriter(scratch, segmentSize, PriceUpdate.SIZE).setTimeIndex(timeIndex);
                if (scratchArchive != null) {
                    s.setArchive(scratchArchive);
                    if (archiveAfter >= 0) {
                        s.setArchiveAfter(archiveAfter);
                    }
                    if (compress != null) {
                        s.setCompress(compress);
                    }
                }
                try (RollingBusWriter w = s.open()) {
                    for (long i = 0; i < warmUp; i++) {
                        m.setPrice((int) i);
                        w.write(m);
                    }
                    if (scratchArchive != null) {
                        w.awaitArchived(120, java.util.concurrent.TimeUnit.SECONDS);
                    }
                } finally {
                    Layout.removeBus(scratch);
                    if (scratchArchive != null) {
                        Layout.removeBus(scratchArchive);
                    }
                }
            }
            try (RollingBusWriter w = w0.open()) {
                t0 = System.nanoTime();
                for (long i = 0; i < count; i++) {
                    m.setPrice((int) i);
                    w.write(m);
                }
                t1 = System.nanoTime();
                System.out.println("rolls " + w.rolls() + " max_ns=" + w.maxRollNanos() + " mean_ns="
                        + (w.rolls() == 0 ? 0 : w.rollNanos() / w.rolls()));
                if (java.util.Arrays.asList(opts).contains("--archive")) {
                    boolean ok = w.awaitArchived(120, java.util.concurrent.TimeUnit.SECONDS);
                    System.out.printf("archived %d caught_up_s=%.6f ok=%b%n", w.archivedSegments(),
                            (System.nanoTime() - t1) / 1e9, ok);
                }
            }
        } else {
            try (MappedBusWriter w = new MappedBusWriter(singlePath(dir), singleSize(count), PriceUpdate.SIZE).open()) {
                t0 = System.nanoTime();
                for (long i = 0; i < count; i++) {
                    m.setPrice((int) i);
                    w.write(m);
                }
                t1 = System.nanoTime();
            }
        }
        System.out.printf("wrote %d %.6f%n", count, (t1 - t0) / 1e9);
        return 0;
    }

    private static long benchReadPasses(String[] opts) throws BadArgs {
        long passes = 1;
        for (int i = 0; i < opts.length; i++) {
            if (opts[i].equals("--passes") && i + 1 < opts.length) {
                passes = num(opts[++i]);
            } else {
                throw new BadArgs("unknown option " + opts[i] + " of rolling-bench-read");
            }
        }
        if (passes < 1) {
            throw new BadArgs("--passes must be at least 1, got " + passes);
        }
        return passes;
    }

    private static int benchRead(String dir, long segmentSize, long count, long passes)
            throws IOException, InterruptedException {
        // The writer may start after this reader: wait for what it creates (a reader never creates).
        java.nio.file.Path made = java.nio.file.Path.of(segmentSize > 0 ? dir + "/" + Layout.META_FILE : singlePath(dir));
        for (int i = 0; i < 60_000 && !java.nio.file.Files.exists(made); i++) {
            Thread.sleep(1);
        }
        Thread.sleep(50); // the single file's writer initialises it just after creating it
        for (long p = 1; p < passes; p++) {
            benchReadPass(dir, segmentSize, count); // untimed: the JIT compiles the read path
        }
        System.out.printf("read %d %.6f%n", count, benchReadPass(dir, segmentSize, count) / 1e9);
        return 0;
    }

    // One read of `count` records from the bus's first: its nanoseconds, from the first record to the last.
    private static long benchReadPass(String dir, long segmentSize, long count) throws IOException {
        PriceUpdate m = new PriceUpdate();
        long t0;
        long n = 1;
        if (segmentSize > 0) {
            try (RollingBusReader r = new RollingBusReader(dir, segmentSize, PriceUpdate.SIZE).open()) {
                while (!r.next()) {
                    Thread.onSpinWait();
                }
                t0 = System.nanoTime();
                while (n < count) {
                    if (r.next()) {
                        r.readMessage(m); // every record read, as a reader that uses them does
                        n++;
                    }
                }
                r.readMessage(m);
            }
        } else {
            try (MappedBusReader r = new MappedBusReader(singlePath(dir), singleSize(count), PriceUpdate.SIZE).open()) {
                while (!r.next()) {
                    Thread.onSpinWait();
                }
                t0 = System.nanoTime();
                while (n < count) {
                    if (r.next()) {
                        r.readMessage(m); // every record read, as a reader that uses them does
                        n++;
                    }
                }
                r.readMessage(m);
            }
        }
        long t1 = System.nanoTime();
        if (m.getPrice() != (int) (count - 1)) {
            throw new IOException("last record has price " + m.getPrice() + ", expected " + (count - 1));
        }
        return t1 - t0;
    }

    private static String singlePath(String dir) {
        return dir + "/single.bus";
    }

    private static long singleSize(long count) {
        return Layout.FIRST_RECORD_OFFSET + Layout.slotSize(PriceUpdate.SIZE) * (count + 10);
    }

    private static String kind(String k) throws BadArgs {
        if (!k.equals("price") && !k.equals("token") && !k.equals("trade")) {
            throw new BadArgs("kind must be price, token or trade, got " + k);
        }
        return k;
    }

    private static void need(String[] a, int n, String cmd) throws BadArgs {
        if (a.length < n) {
            throw new BadArgs(cmd + " needs at least " + n + " arguments, got " + Arrays.toString(a));
        }
    }

    private static String value(String[] a, int i) throws BadArgs {
        if (i >= a.length) {
            throw new BadArgs(a[i - 1] + " needs a value");
        }
        return a[i];
    }

    // rolling-seek-time dir t...: for each time, where seekTime puts a reader: its first record's position, or END.
    private static int seekTime(String[] a) throws BadArgs, IOException {
        try (RollingBusReader r = new RollingBusReader(a[0], true).open()) {
            for (int i = 1; i < a.length; i++) {
                r.seekTime(num(a[i]));
                System.out.println(r.next() ? Long.toString(r.recordPosition()) : "END");
            }
        }
        return 0;
    }

    private static long num(String s) throws BadArgs {
        try {
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            throw new BadArgs("expected an integer, got " + s);
        }
    }
}
