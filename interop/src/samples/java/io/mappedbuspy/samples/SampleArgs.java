package io.mappedbuspy.samples;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;

/**
 * The samples' shared bits: command-line options in the Python samples' syntax ({@code --count 5}), the
 * default bus directory, waiting politely for a record, and how a byte array is printed.
 */
final class SampleArgs {
    private final List<String> positional = new ArrayList<>();
    private final Map<String, String> options = new HashMap<>();

    /** Bad command-line arguments. */
    static final class UsageException extends Exception {
        private static final long serialVersionUID = 1L;

        UsageException(String message) {
            super(message);
        }
    }

    /**
     * Splits {@code args} into positional arguments and options.
     *
     * @param args   the command line
     * @param valued options that take a value
     * @param flags  options without a value
     * @throws UsageException on an unknown option or a missing value
     */
    SampleArgs(String[] args, List<String> valued, List<String> flags) throws UsageException {
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.equals("-h") || a.equals("--help")) {
                throw new UsageException("help");
            } else if (flags.contains(a)) {
                options.put(a, "true");
            } else if (valued.contains(a)) {
                if (i + 1 >= args.length) {
                    throw new UsageException(a + " needs a value");
                }
                options.put(a, args[++i]);
            } else if (a.startsWith("--") && a.contains("=") && valued.contains(a.substring(0, a.indexOf('=')))) {
                options.put(a.substring(0, a.indexOf('=')), a.substring(a.indexOf('=') + 1));
            } else if (a.startsWith("--")) {
                throw new UsageException("unknown option " + a);
            } else {
                positional.add(a);
            }
        }
    }

    int positionalInt(int index, String name) throws UsageException {
        if (index >= positional.size()) {
            throw new UsageException("missing " + name);
        }
        return parseInt(name, positional.get(index));
    }

    void expectPositionals(int n) throws UsageException {
        if (positional.size() != n) {
            throw new UsageException("expected " + n + " positional argument(s), got " + positional);
        }
    }

    int intOption(String name, int dflt) throws UsageException {
        String v = options.get(name);
        return v == null ? dflt : parseInt(name, v);
    }

    double secondsOption(String name, double dflt) throws UsageException {
        String v = options.get(name);
        if (v == null) {
            return dflt;
        }
        try {
            double d = Double.parseDouble(v);
            if (!(d >= 0) || Double.isInfinite(d)) {
                throw new UsageException(name + " must be a number of seconds >= 0, got " + v);
            }
            return d;
        } catch (NumberFormatException e) {
            throw new UsageException(name + " must be a number, got " + v);
        }
    }

    String stringOption(String name, String dflt) {
        return options.getOrDefault(name, dflt);
    }

    boolean flag(String name) {
        return options.containsKey(name);
    }

    private static int parseInt(String name, String v) throws UsageException {
        try {
            return Integer.parseInt(v);
        } catch (NumberFormatException e) {
            throw new UsageException(name + " must be an integer, got " + v);
        }
    }

    /**
     * A default bus path: in /dev/shm (RAM) when there is one, as the Python samples do.
     *
     * @param name the file name
     * @return the path
     */
    static String defaultPath(String name) {
        Path shm = Paths.get("/dev/shm");
        Path dir = Files.isDirectory(shm) ? shm : Paths.get(System.getProperty("java.io.tmpdir"));
        return dir.resolve(name).toString();
    }

    /**
     * Sleeps {@code seconds} (nothing if 0).
     *
     * @param seconds how long
     * @throws InterruptedException if interrupted
     */
    static void sleep(double seconds) throws InterruptedException {
        long nanos = (long) (seconds * 1e9);
        if (nanos > 0) {
            Thread.sleep(nanos / 1_000_000, (int) (nanos % 1_000_000));
        }
    }

    /** Backs off between empty polls: spin briefly, then yield, then sleep up to 1 ms. */
    static final class Backoff {
        private int idle;

        void reset() {
            idle = 0;
        }

        void idle() {
            idle++;
            if (idle < 1000) {
                Thread.onSpinWait();
            } else if (idle < 1100) {
                Thread.yield();
            } else {
                LockSupport.parkNanos(Math.min(1_000_000L, 20_000L << Math.min(idle - 1100, 6)));
            }
        }
    }

    /**
     * How the byte-array samples print a message, identically in Python: quoted text if it is plain printable
     * ASCII, else hex.
     *
     * @param data   the bytes
     * @param length how many of them
     * @return e.g. {@code 19 bytes: "writer 0 message 10"}
     */
    static String describe(byte[] data, int length) {
        boolean text = true;
        for (int i = 0; i < length && text; i++) {
            int b = data[i] & 0xff;
            text = b >= 0x20 && b < 0x7f && b != '"' && b != '\\';
        }
        if (text) {
            return length + " bytes: \"" + new String(data, 0, length, StandardCharsets.US_ASCII) + "\"";
        }
        StringBuilder hex = new StringBuilder(length * 2);
        for (int i = 0; i < length; i++) {
            hex.append(Character.forDigit((data[i] >> 4) & 0xf, 16)).append(Character.forDigit(data[i] & 0xf, 16));
        }
        return length + " bytes: " + hex;
    }

    /**
     * Runs a sample's body and exits: with its code, 2 on a usage error, 1 on any other error.
     *
     * @param name  the sample's name, for messages
     * @param usage printed for --help and after a usage error
     * @param body  the sample
     */
    static void exit(String name, String usage, Body body) {
        int code;
        try {
            code = body.run();
        } catch (UsageException e) {
            if (e.getMessage().equals("help")) {
                System.out.println(usage);
                code = 0;
            } else {
                System.err.println(name + ": " + e.getMessage());
                System.err.println(usage);
                code = 2;
            }
        } catch (Exception e) {
            System.out.flush();
            System.err.println(name + ": " + e);
            code = 1;
        }
        System.out.flush();
        System.exit(code);
    }

    /** A sample's body: returns its exit code. */
    interface Body {
        int run() throws Exception;
    }
}
