package io.mappedbuspy.samples;

import io.mappedbuspy.MappedBusReader;
import io.mappedbuspy.messages.PriceUpdate;

import java.io.EOFException;
import java.util.List;

/**
 * Price update sample, reader: prints every {@code PriceUpdate} on the bus from its first record, in the bus's
 * order, as {@code samples/object_reader.py} does: {@code Read: PriceUpdate [source=0, price=20, quantity=40]}.
 */
public final class ObjectReader {
    private static final String USAGE = String.join("\n",
            "usage: ObjectReader [--count N] [--timeout SECONDS] [--path FILE]",
            "  --count N       stop after this many messages (default 0: no limit)",
            "  --timeout S     stop after this many seconds without a message (default 10)",
            "  --path FILE     bus file (default " + ObjectWriter.DEFAULT_PATH + ")");

    private ObjectReader() {
    }

    /**
     * Runs the reader.
     *
     * @param args the command line, see the usage
     */
    public static void main(String[] args) {
        SampleArgs.exit("ObjectReader", USAGE, () -> {
            SampleArgs a = new SampleArgs(args, List.of("--count", "--timeout", "--path"), List.of());
            a.expectPositionals(0);
            int count = a.intOption("--count", 0);
            long idleNanos = (long) (a.secondsOption("--timeout", 10) * 1e9);
            PriceUpdate msg = new PriceUpdate();
            SampleArgs.Backoff backoff = new SampleArgs.Backoff();
            int n = 0;
            try (MappedBusReader reader = new MappedBusReader(a.stringOption("--path", ObjectWriter.DEFAULT_PATH),
                    ObjectWriter.FILE_SIZE, ObjectWriter.RECORD_SIZE).open(idleNanos / 1_000_000)) {
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
                    int type = reader.readType();
                    if (type != PriceUpdate.TYPE) {
                        System.err.println("ObjectReader: skipping a record of type " + type);
                        continue;
                    }
                    reader.readMessage(msg);
                    n++;
                    System.out.println("Read: " + msg);
                }
            }
            if (count > 0 && n < count) {
                System.err.println("ObjectReader: read " + n + " of " + count + " messages");
                return 1;
            }
            return 0;
        });
    }
}
