package io.mappedbuspy.samples;

import io.mappedbuspy.MappedBusWriter;
import io.mappedbuspy.messages.PriceUpdate;

import java.util.List;

/**
 * Price update sample, writer: publishes {@code PriceUpdate(source, price=2*i, quantity=4*i)} for i = 0..count-1,
 * the twin of {@code samples/object_writer.py}.
 */
public final class ObjectWriter {
    static final String DEFAULT_PATH = SampleArgs.defaultPath("mappedbus-sample-prices");
    // Every process on the bus must use the same sizes (they are not stored in the file).
    static final long FILE_SIZE = 2_000_000L;
    static final int RECORD_SIZE = 12;

    private static final String USAGE = String.join("\n",
            "usage: ObjectWriter <source> [--count N] [--interval SECONDS] [--path FILE] [--quiet]",
            "  --count N       messages to write (default 20)",
            "  --interval S    seconds between messages (default 0.25)",
            "  --path FILE     bus file (default " + DEFAULT_PATH + ")",
            "  --quiet         print nothing per message");

    private ObjectWriter() {
    }

    /**
     * Runs the writer.
     *
     * @param args the command line, see the usage
     */
    public static void main(String[] args) {
        SampleArgs.exit("ObjectWriter", USAGE, () -> {
            SampleArgs a = new SampleArgs(args, List.of("--count", "--interval", "--path"), List.of("--quiet"));
            a.expectPositionals(1);
            int source = a.positionalInt(0, "source");
            int count = a.intOption("--count", 20);
            double interval = a.secondsOption("--interval", 0.25);
            boolean quiet = a.flag("--quiet");
            PriceUpdate msg = new PriceUpdate(source, 0, 0);
            try (MappedBusWriter writer = new MappedBusWriter(a.stringOption("--path", DEFAULT_PATH), FILE_SIZE,
                    RECORD_SIZE).open()) {
                for (int i = 0; i < count; i++) {
                    msg.setPrice(2 * i);
                    msg.setQuantity(4 * i);
                    // false: a reader rolled the record back because this process stalled.
                    boolean committed = writer.write(msg);
                    if (!quiet) {
                        System.out.println((committed ? "Wrote: " : "Lost: ") + msg);
                    }
                    if (i + 1 < count) {
                        SampleArgs.sleep(interval);
                    }
                }
            }
            return 0;
        });
    }
}
