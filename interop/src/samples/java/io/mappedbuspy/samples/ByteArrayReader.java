package io.mappedbuspy.samples;

import io.mappedbuspy.MappedBusReader;

import java.io.EOFException;
import java.util.List;

/**
 * Byte array sample, reader: prints every byte-array message on the bus from its first record, in the bus's
 * order, as {@code samples/bytearray_reader.py} does: {@code Read: 19 bytes: "writer 0 message 10"}.
 */
public final class ByteArrayReader {
    private static final String USAGE = String.join("\n",
            "usage: ByteArrayReader [--count N] [--timeout SECONDS] [--path FILE]",
            "  --count N       stop after this many messages (default 0: no limit)",
            "  --timeout S     stop after this many seconds without a message (default 10)",
            "  --path FILE     bus file (default " + ByteArrayWriter.DEFAULT_PATH + ")");

    private ByteArrayReader() {
    }

    /**
     * Runs the reader.
     *
     * @param args the command line, see the usage
     */
    public static void main(String[] args) {
        SampleArgs.exit("ByteArrayReader", USAGE, () -> {
            SampleArgs a = new SampleArgs(args, List.of("--count", "--timeout", "--path"), List.of());
            a.expectPositionals(0);
            int count = a.intOption("--count", 0);
            long idleNanos = (long) (a.secondsOption("--timeout", 10) * 1e9);
            byte[] buffer = new byte[ByteArrayWriter.RECORD_SIZE];
            SampleArgs.Backoff backoff = new SampleArgs.Backoff();
            int n = 0;
            try (MappedBusReader reader = new MappedBusReader(a.stringOption("--path", ByteArrayWriter.DEFAULT_PATH),
                    ByteArrayWriter.FILE_SIZE, ByteArrayWriter.RECORD_SIZE).open(idleNanos / 1_000_000)) {
                long lastSeen = System.nanoTime();
                while (count <= 0 || n < count) {
                    try {
                        if (!reader.next()) {
                            if (System.nanoTime() - lastSeen >= idleNanos) {
                                break;
                            }
                            backoff.idle();
                            continue;
                        }
                    } catch (EOFException e) {
                        break;
                    }
                    backoff.reset();
                    lastSeen = System.nanoTime();
                    int length = reader.readBuffer(buffer, 0);
                    n++;
                    System.out.println("Read: " + SampleArgs.describe(buffer, length));
                }
            }
            if (count > 0 && n < count) {
                System.err.println("ByteArrayReader: read " + n + " of " + count + " messages");
                return 1;
            }
            return 0;
        });
    }
}
