package io.mappedbuspy.samples;

import io.mappedbuspy.MappedBusWriter;

import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * Byte array sample, writer: message i of writer w is the ASCII bytes of {@code "writer <w> message <i>"}, the
 * twin of {@code samples/bytearray_writer.py}; the record's metadata holds its length.
 */
public final class ByteArrayWriter {
    static final String DEFAULT_PATH = SampleArgs.defaultPath("mappedbus-sample-bytearray");
    static final long FILE_SIZE = 2_000_000L;
    static final int RECORD_SIZE = 32;

    private static final String USAGE = String.join("\n",
            "usage: ByteArrayWriter <writer> [--count N] [--interval SECONDS] [--path FILE] [--quiet]",
            "  --count N       messages to write (default 20)",
            "  --interval S    seconds between messages (default 0.25)",
            "  --path FILE     bus file (default " + DEFAULT_PATH + ")",
            "  --quiet         print nothing per message");

    private ByteArrayWriter() {
    }

    /**
     * Runs the writer.
     *
     * @param args the command line, see the usage
     */
    public static void main(String[] args) {
        SampleArgs.exit("ByteArrayWriter", USAGE, () -> {
            SampleArgs a = new SampleArgs(args, List.of("--count", "--interval", "--path"), List.of("--quiet"));
            a.expectPositionals(1);
            int id = a.positionalInt(0, "writer");
            int count = a.intOption("--count", 20);
            double interval = a.secondsOption("--interval", 0.25);
            boolean quiet = a.flag("--quiet");
            try (MappedBusWriter writer = new MappedBusWriter(a.stringOption("--path", DEFAULT_PATH), FILE_SIZE,
                    RECORD_SIZE).open()) {
                for (int i = 0; i < count; i++) {
                    byte[] data = ("writer " + id + " message " + i).getBytes(StandardCharsets.US_ASCII);
                    boolean committed = writer.write(data, 0, data.length);
                    if (!quiet) {
                        System.out.println((committed ? "Wrote: " : "Lost: ") + SampleArgs.describe(data, data.length));
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
