package io.mappedbuspy.tools;

import io.mappedbuspy.Layout;
import io.mappedbuspy.MappedBusMessage;
import io.mappedbuspy.MappedBusReader;
import io.mappedbuspy.MappedBusWriter;
import io.mappedbuspy.internal.MemoryMappedFile;
import io.mappedbuspy.messages.PriceUpdate;
import io.mappedbuspy.messages.RawPayload;
import io.mappedbuspy.messages.Token;
import io.mappedbuspy.messages.Trade;

import java.io.BufferedWriter;
import java.io.EOFException;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;

/**
 * Command-line tool for cross-language tests: writes, reads and simulates crashed or slow writers.
 * Run without arguments for the usage. Exit codes: 0 success, 1 I/O error (including a full bus),
 * 2 bad arguments.
 */
public final class BusTool {
    private static final String USAGE = String.join("\n",
            "usage: BusTool [--go <file>] <command> ...",
            "  --go <file>: print 'ready', wait until <file> exists, then run the command",
            "      (lines up processes that start at different speeds)",
            "  write-bytes <path> <fileSize> <recordSize> <count> <writerId>",
            "      record i = 8 bytes: int32 writerId, int32 i; prints 'wrote N committed M'",
            "  write-objects <path> <fileSize> <recordSize> <count> price|token|trade <writerId>",
            "      PriceUpdate(writerId, i, 2i) | Token(writerId, i) | Trade(writerId*1e9+i, i+0.5, writerId)",
            "  read <path> <fileSize> <recordSize> <count> [--timeout ms] [--idle-exit ms] [--read-only]",
            "      prints '<position> <meta> <payload hex>' per record, then",
            "      'END <n> rolledBackSkipped=<n> rollbacks=<n>'; stops after count records, at EOF,",
            "      or after --idle-exit ms without a new record",
            "  read-objects <path> <fileSize> <recordSize> <count> price|token|trade [--timeout ms] [--idle-exit ms]",
            "      [--read-only]: as read, but each record decoded: '<position> <meta> <message toString>'",
            "  dump <path> [--max n]",
            "      a bus with metadata (a file, or a rolling bus's directory), read-only: a framed bus's messages",
            "      '<position> <status> <slots> <topic> <length> <payload hex preview>', else its slots",
            "  stat <path>",
            "      kind, sizes, counts by status; a framed bus: 'framed' and its topics",
            "  layout",
            "      prints the wire-layout constants as NAME=value",
            "  allocate-and-hang <path> <fileSize> <recordSize>",
            "      allocates one record, fills it, prints 'allocated <offset>', never commits",
            "  slow-write <path> <fileSize> <recordSize> <sleepMs>",
            "      allocates one record, prints 'allocated <offset>', sleeps, commits, prints 'committed true|false'",
            RollingTool.USAGE);

    private BusTool() {
    }

    /** Bad command-line arguments. */
    private static final class UsageException extends Exception {
        private static final long serialVersionUID = 1L;

        UsageException(String message) {
            super(message);
        }
    }

    /**
     * Runs one subcommand and exits with its status.
     *
     * @param args the command and its arguments
     */
    public static void main(String[] args) {
        int code;
        try {
            code = run(args);
        } catch (UsageException e) {
            System.err.println("error: " + e.getMessage());
            System.err.println(USAGE);
            code = 2;
        } catch (IOException | RuntimeException e) {
            System.out.flush();
            System.err.println("error: " + e);
            code = 1;
        } catch (InterruptedException e) {
            code = 1;
        }
        System.out.flush();
        System.exit(code);
    }

    private static int run(String[] args) throws UsageException, IOException, InterruptedException {
        if (args.length >= 2 && args[0].equals("--go")) {
            awaitFile(args[1]);
            args = Arrays.copyOfRange(args, 2, args.length);
        }
        if (args.length == 0) {
            throw new UsageException("no command");
        }
        String[] rest = Arrays.copyOfRange(args, 1, args.length);
        switch (args[0]) {
            case "write-bytes":
                expect(rest, 5);
                return writeBytes(rest[0], longArg(rest[1], "fileSize"), intArg(rest[2], "recordSize"),
                        longArg(rest[3], "count"), intArg(rest[4], "writerId"));
            case "write-objects":
                expect(rest, 6);
                return writeObjects(rest[0], longArg(rest[1], "fileSize"), intArg(rest[2], "recordSize"),
                        longArg(rest[3], "count"), rest[4], intArg(rest[5], "writerId"));
            case "read":
                return read(rest, null);
            case "read-objects":
                if (rest.length < 5) {
                    throw new UsageException("read-objects needs <path> <fileSize> <recordSize> <count> <kind>");
                }
                String kind = rest[4];
                if (!kind.equals("price") && !kind.equals("token") && !kind.equals("trade")) {
                    throw new UsageException("kind must be price, token or trade, got " + kind);
                }
                String[] readArgs = new String[rest.length - 1];
                System.arraycopy(rest, 0, readArgs, 0, 4);
                System.arraycopy(rest, 5, readArgs, 4, rest.length - 5);
                return read(readArgs, kind);
            case "dump":
                if (rest.length != 1 && !(rest.length == 3 && rest[1].equals("--max"))) {
                    throw new UsageException("dump needs <path> [--max n]");
                }
                return BusDump.dump(rest[0], rest.length == 3 ? longArg(rest[2], "max") : Long.MAX_VALUE, System.out);
            case "stat":
                expect(rest, 1);
                return BusDump.stat(rest[0], System.out);
            case "layout":
                expect(rest, 0);
                System.out.print(Layout.describe());
                return 0;
            case "allocate-and-hang":
                expect(rest, 3);
                allocate(rest[0], longArg(rest[1], "fileSize"), intArg(rest[2], "recordSize"), -1);
                return 0;
            case "slow-write":
                expect(rest, 4);
                allocate(rest[0], longArg(rest[1], "fileSize"), intArg(rest[2], "recordSize"),
                        longArg(rest[3], "sleepMs"));
                return 0;
            case "-h":
            case "--help":
            case "help":
                System.out.println(USAGE);
                return 0;
            default:
                if (args[0].startsWith("rolling-")) {
                    try {
                        return RollingTool.run(args[0], rest);
                    } catch (RollingTool.BadArgs e) {
                        throw new UsageException(e.getMessage());
                    }
                }
                throw new UsageException("unknown command " + args[0]);
        }
    }

    private static int writeBytes(String path, long fileSize, int recordSize, long count, int writerId)
            throws IOException {
        return write(new ThreadedWriter(path, fileSize, recordSize, count, "bytes", writerId));
    }

    private static int writeObjects(String path, long fileSize, int recordSize, long count, String kind,
                                    int writerId) throws IOException, UsageException {
        if (!kind.equals("price") && !kind.equals("token") && !kind.equals("trade")) {
            throw new UsageException("kind must be price, token or trade, got " + kind);
        }
        return write(new ThreadedWriter(path, fileSize, recordSize, count, kind, writerId));
    }

    private static int write(ThreadedWriter writer) throws IOException {
        try {
            writer.writeAll();
        } finally {
            System.out.println("wrote " + writer.wrote() + " committed " + writer.committed());
        }
        return 0;
    }

    /** Reads records and prints them raw ({@code kind} null) or decoded as {@code kind} messages. */
    private static int read(String[] a, String kind) throws UsageException, IOException {
        if (a.length < 4) {
            throw new UsageException("read needs <path> <fileSize> <recordSize> <count>");
        }
        String path = a[0];
        long fileSize = longArg(a[1], "fileSize");
        int recordSize = intArg(a[2], "recordSize");
        long count = longArg(a[3], "count");
        int timeoutMs = Layout.DEFAULT_TIMEOUT_MS;
        long idleExitMs = -1;
        boolean readOnly = false;
        for (int i = 4; i < a.length; i++) {
            switch (a[i]) {
                case "--timeout":
                    timeoutMs = intArg(value(a, ++i), "--timeout");
                    break;
                case "--idle-exit":
                    idleExitMs = longArg(value(a, ++i), "--idle-exit");
                    break;
                case "--read-only":
                    readOnly = true;
                    break;
                default:
                    throw new UsageException("unknown option " + a[i]);
            }
        }
        PrintWriter out = new PrintWriter(new BufferedWriter(
                new OutputStreamWriter(System.out, StandardCharsets.US_ASCII), 1 << 16));
        long n = 0;
        try (MappedBusReader r = new MappedBusReader(path, fileSize, recordSize, readOnly).open()) {
            r.setTimeout(timeoutMs);
            RawPayload raw = new RawPayload(recordSize);
            MappedBusMessage decoded = kind == null ? null
                    : kind.equals("price") ? new PriceUpdate() : kind.equals("token") ? new Token() : new Trade();
            StringBuilder line = new StringBuilder();
            long lastProgress = System.nanoTime();
            int idlePolls = 0;
            while (n < count) {
                boolean got;
                try {
                    got = r.next();
                } catch (EOFException e) {
                    break;
                }
                if (got) {
                    line.setLength(0);
                    line.append(r.recordPosition()).append(' ').append(r.readType()).append(' ');
                    if (decoded == null) {
                        r.readMessage(raw);
                        appendHex(line, raw.bytes());
                    } else {
                        line.append(r.readMessage(decoded));
                    }
                    out.println(line);
                    n++;
                    lastProgress = System.nanoTime();
                    idlePolls = 0;
                } else {
                    if (idleExitMs >= 0 && System.nanoTime() - lastProgress >= idleExitMs * 1_000_000L) {
                        break;
                    }
                    // Spin briefly, then back off so a waiting reader does not steal a core from writers.
                    if (++idlePolls == 1000) {
                        out.flush();
                    }
                    if (idlePolls > 1000) {
                        Thread.sleep(1);
                    } else {
                        Thread.onSpinWait();
                    }
                }
            }
            out.println("END " + n + " rolledBackSkipped=" + r.rolledBackSkipped() + " rollbacks=" + r.rollbacks());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            out.flush();
        }
        return 0;
    }

    private static void allocate(String path, long fileSize, int recordSize, long sleepMs)
            throws IOException, InterruptedException {
        // Opening a writer validates the sizes and the limit and initialises a new file.
        new MappedBusWriter(path, fileSize, recordSize).open().close();
        long slot = Layout.slotSize(recordSize);
        try (MemoryMappedFile mem = new MemoryMappedFile(path, fileSize)) {
            long offset = mem.getAndAddLong(Layout.LIMIT_OFFSET, slot);
            if (offset < Layout.FIRST_RECORD_OFFSET || offset > fileSize - slot) {
                throw new EOFException("bus full: record at offset " + offset + " does not fit in fileSize "
                        + fileSize);
            }
            byte[] payload = new byte[recordSize];
            Arrays.fill(payload, (byte) 0xEE);
            mem.putInt(offset + Layout.METADATA_OFFSET, 0);
            mem.putBytes(offset + Layout.PAYLOAD_OFFSET, payload, 0, recordSize);
            System.out.println("allocated " + offset);
            System.out.flush();
            if (sleepMs < 0) {
                for (;;) {
                    Thread.sleep(60_000); // a crashed writer: never commits
                }
            }
            Thread.sleep(sleepMs);
            boolean committed = mem.casStatus(offset, Layout.STATUS_NOT_SET, Layout.STATUS_COMMITTED);
            System.out.println("committed " + committed);
        }
    }

    private static void awaitFile(String go) throws InterruptedException {
        System.out.println("ready");
        System.out.flush();
        Path file = Paths.get(go);
        while (!Files.exists(file)) {
            Thread.sleep(1);
        }
    }

    private static void expect(String[] rest, int n) throws UsageException {
        if (rest.length != n) {
            throw new UsageException("expected " + n + " arguments, got " + rest.length);
        }
    }

    private static String value(String[] a, int i) throws UsageException {
        if (i >= a.length) {
            throw new UsageException(a[i - 1] + " needs a value");
        }
        return a[i];
    }

    private static long longArg(String s, String name) throws UsageException {
        try {
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            throw new UsageException(name + " must be an integer, got " + s);
        }
    }

    private static int intArg(String s, String name) throws UsageException {
        try {
            return Integer.parseInt(s);
        } catch (NumberFormatException e) {
            throw new UsageException(name + " must be a 32-bit integer, got " + s);
        }
    }

    private static void appendHex(StringBuilder sb, byte[] bytes) {
        final String digits = "0123456789abcdef";
        for (byte b : bytes) {
            sb.append(digits.charAt((b >> 4) & 0xF)).append(digits.charAt(b & 0xF));
        }
    }
}
