package io.mappedbuspy.reliability;

import io.mappedbuspy.CorruptBusException;
import io.mappedbuspy.Layout;
import io.mappedbuspy.MappedBusReader;
import io.mappedbuspy.messages.RawPayload;

import java.io.BufferedReader;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.List;

/**
 * Drives the Java reader over many (possibly corrupt) bus files in one JVM, for the fuzz campaign of
 * tests/reliability/test_fuzz.py.
 *
 * <pre>FuzzReader &lt;cases file&gt;</pre>
 *
 * Each line of the cases file is {@code <path> <fileSize> <recordSize> <readOnly 0|1> <seed>}. For each
 * case the reader is opened with timeout 0 and driven through every public operation (next, readType,
 * readBuffer, readMessage, seek, seekToEnd, hasRecovered) in an order picked by the seed. The only
 * exceptions a corrupt file may cause are IOException (EOFException, CorruptBusException, ...) and
 * IllegalArgumentException; anything else prints {@code FAIL <line> <exception>} with its stack trace. A
 * watchdog halts the JVM with status 3 ({@code HANG <line>}) if one case takes longer than 20 s. The last
 * line is {@code cases <n> failures <n>}.
 */
public final class FuzzReader {
    private static volatile String running = "";
    private static volatile long started = System.nanoTime();

    private FuzzReader() {
    }

    /**
     * Runs every case.
     *
     * @param args the cases file
     * @throws IOException if the cases file cannot be read
     */
    public static void main(String[] args) throws IOException {
        Thread watchdog = new Thread(() -> {
            for (;;) {
                try {
                    Thread.sleep(500);
                } catch (InterruptedException e) {
                    return;
                }
                if (!running.isEmpty() && System.nanoTime() - started > 20_000_000_000L) {
                    System.out.println("HANG " + running);
                    System.out.flush();
                    Runtime.getRuntime().halt(3);
                }
            }
        });
        watchdog.setDaemon(true);
        watchdog.start();
        List<String> lines = Files.readAllLines(Paths.get(args[0]), StandardCharsets.UTF_8);
        int cases = 0;
        int failures = 0;
        StringBuilder outcomes = new StringBuilder();
        for (String line : lines) {
            if (line.isBlank()) {
                continue;
            }
            cases++;
            running = line;
            started = System.nanoTime();
            try {
                runCase(line.trim().split(" "));
                outcomes.append("ok\n");
            } catch (IOException | IllegalArgumentException e) {
                outcomes.append(e.getClass().getSimpleName()).append('\n');
            } catch (Throwable t) {
                failures++;
                System.out.println("FAIL " + line + " " + t);
                t.printStackTrace(System.out);
            }
            running = "";
        }
        System.out.print(outcomes);
        System.out.println("cases " + cases + " failures " + failures);
        System.out.flush();
        System.exit(failures == 0 ? 0 : 1);
    }

    private static void runCase(String[] a) throws IOException {
        String path = a[0];
        long fileSize = Long.parseLong(a[1]);
        int recordSize = Integer.parseInt(a[2]);
        boolean readOnly = a[3].equals("1");
        long seed = Long.parseLong(a[4]);
        java.util.Random rnd = new java.util.Random(seed);
        // A short lock timeout: an empty case is "a bus being created" to a reader, which waits that long for it.
        try (MappedBusReader r = new MappedBusReader(path, fileSize, recordSize, readOnly).setLockTimeout(20).open()) {
            r.setTimeout(Layout.MIN_ROLLBACK_TIMEOUT_MS);
            byte[] buf = new byte[recordSize];
            RawPayload raw = new RawPayload(recordSize);
            // Bounded: a file holds at most fileSize / (8 + recordSize) slots.
            long maxSteps = Math.min(200_000, fileSize / (8 + recordSize) + 16);
            for (long step = 0; step < maxSteps; step++) {
                int op = rnd.nextInt(20);
                if (op == 0) {
                    r.seekToEnd();
                } else if (op == 1) {
                    r.hasRecovered();
                    r.position();
                } else if (op == 2) {
                    long slot = 8L + recordSize;
                    r.seek(8 + slot * (long) rnd.nextInt((int) Math.min(Integer.MAX_VALUE, fileSize / slot + 2)));
                } else if (r.next()) {
                    r.readType();
                    r.readMessage(raw);
                    try {
                        r.readBuffer(buf, 0);
                    } catch (CorruptBusException e) {
                        // a bad stored length: the next record may still be fine
                    }
                }
            }
        }
    }
}
