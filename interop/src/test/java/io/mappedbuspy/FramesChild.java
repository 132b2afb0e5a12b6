package io.mappedbuspy;

import java.nio.ByteBuffer;
import java.util.HexFormat;
import java.util.zip.CRC32;

/**
 * The Java side of tests/jvm/test_frames_java.py (issue 36): framed writers and readers of a bus, and the shared
 * vectors read as the manifest says. Messages of writer {@code w} carry topic {@code "w" + w}; the {@code s}-th of them
 * has {@link #size}{@code (w, s)} bytes of {@link #fill}{@code (w, s)} (tests/jvm/test_frames_java.py computes the
 * same).
 *
 * <pre>
 *  FramesChild make PATH SIZE RECORD_SIZE [rolling]
 *      makes a framed bus (a rolling one: SIZE is its segment size); prints "made"
 *  FramesChild write PATH W COUNT [rolling]
 *      writes messages 0..COUNT-1 of writer W (each committed or the child fails); prints "done COUNT"
 *  FramesChild write-forever PATH W CAP [rolling]
 *      prints "writing", then writes messages of writer W (size(w, s) % CAP bytes, 1 ms apart) until killed
 *  FramesChild read-idle PATH IDLE_MS [TOPIC,TOPIC...|-] [rolling]
 *      reads messages until none comes for IDLE_MS, each as "read" prints them; then the END line
 *  FramesChild read PATH COUNT [TOPIC,TOPIC...|-] [rolling]
 *      reads COUNT messages (waitNext, up to 60 s each; topics: only those), each printed as
 *      "MSG position topic length crc32"; then "END rollbacks skipped filtered"
 *  FramesChild write-hex PATH RECORD_SIZE FILE_SIZE
 *      makes a framed bus and writes one message per stdin line "FLAGS HEX" (no topic); prints "written"
 *  FramesChild read-file PATH RECORD_SIZE FILE_SIZE [TOPIC,TOPIC...]
 *      reads a framed file without metadata read-only to its end: "MSG position topic flags hex" each, then "END"
 * </pre>
 */
public final class FramesChild {
    private FramesChild() {
    }

    /** The size of writer w's s-th message: 8 MiB, 0 B, then a spread of sizes mostly small (as the Python side). */
    static int size(int w, int s) {
        if (s == 0) {
            return w == 0 ? 8 << 20 : 1 + w * 1000;
        }
        if (s == 1) {
            return 0;
        }
        long h = ((w * 1_000_003L + s * 7919L) * 2654435761L) & 0xFFFFFFFFL;
        switch ((int) (h % 8)) {
            case 0:
                return (int) (h % (8 << 20));
            case 1:
            case 2:
                return (int) (h % (256 << 10));
            default:
                return (int) (h % 4096);
        }
    }

    /** Byte i of writer w's s-th message. */
    static byte[] fill(int w, int s, int length) {
        byte[] b = new byte[length];
        int base = w * 31 + s * 17;
        for (int i = 0; i < length; i++) {
            b[i] = (byte) (base + i * 7 + (i >> 8));
        }
        return b;
    }

    public static void main(String[] args) throws Exception {
        String path = args[1];
        switch (args[0]) {
            case "make": {
                // make PATH FILE_SIZE RECORD_SIZE [rolling]: a framed bus (its metadata says frames=1)
                long size = Long.parseLong(args[2]);
                int recordSize = Integer.parseInt(args[3]);
                if (args.length > 4 && args[4].equals("rolling")) {
                    new RollingBusWriter(path, size, recordSize).setFrames(true).open().close();
                } else {
                    new MappedBusWriter(path, size, recordSize).setFrames(true).open().close();
                }
                System.out.println("made");
                break;
            }
            case "write": {
                int w = Integer.parseInt(args[2]);
                int count = Integer.parseInt(args[3]);
                boolean rolling = args.length > 4 && args[4].equals("rolling");
                try (Writer x = open(path, rolling)) {
                    for (int s = 0; s < count; s++) {
                        if (!x.write(fill(w, s, size(w, s)), "w" + w)) {
                            throw new AssertionError("message " + s + " of writer " + w + " was rolled back");
                        }
                    }
                }
                System.out.println("done " + count);
                break;
            }
            case "write-forever": {
                int w = Integer.parseInt(args[2]);
                int cap = Integer.parseInt(args[3]);
                boolean rolling = args.length > 4 && args[4].equals("rolling");
                try (Writer x = open(path, rolling)) {
                    System.out.println("writing");
                    System.out.flush();
                    for (int s = 0; ; s++) {
                        int n = size(w, s) % cap;
                        x.write(fill(w, s, n), "w" + w);
                        Thread.sleep(1);
                    }
                }
            }
            case "read-idle": {
                long idleMs = Long.parseLong(args[2]);
                String[] topics = args.length > 3 && !args[3].equals("-") ? args[3].split(",") : new String[0];
                boolean rolling = args.length > 4 && args[4].equals("rolling");
                StringBuilder out = new StringBuilder();
                if (rolling) {
                    try (RollingBusReader r = new RollingBusReader(path).setFrames(true).open()) {
                        r.setTopics(topics);
                        while (r.waitNext(idleMs, java.util.concurrent.TimeUnit.MILLISECONDS)) {
                            line(out, r.message());
                        }
                        out.append("END ").append(r.rollbacks()).append(' ').append(r.rolledBackSkipped()).append(' ')
                                .append(r.filtered()).append('\n');
                    }
                } else {
                    try (MappedBusReader r = new MappedBusReader(path).setFrames(true).open()) {
                        r.setTopics(topics);
                        while (r.waitNext(idleMs, java.util.concurrent.TimeUnit.MILLISECONDS)) {
                            line(out, r.message());
                        }
                        out.append("END ").append(r.rollbacks()).append(' ').append(r.rolledBackSkipped()).append(' ')
                                .append(r.filtered()).append('\n');
                    }
                }
                System.out.print(out);
                break;
            }
            case "read": {
                long count = Long.parseLong(args[2]);
                String[] topics = args.length > 3 && !args[3].equals("-") ? args[3].split(",") : new String[0];
                boolean rolling = args.length > 4 && args[4].equals("rolling");
                StringBuilder out = new StringBuilder();
                if (rolling) {
                    try (RollingBusReader r = new RollingBusReader(path).setFrames(true).open()) {
                        r.setTopics(topics);
                        for (long i = 0; i < count; i++) {
                            if (!r.waitNext(60, java.util.concurrent.TimeUnit.SECONDS)) {
                                throw new AssertionError("no message " + i + " within 60 s");
                            }
                            line(out, r.message());
                        }
                        out.append("END ").append(r.rollbacks()).append(' ').append(r.rolledBackSkipped()).append(' ')
                                .append(r.filtered()).append('\n');
                    }
                } else {
                    try (MappedBusReader r = new MappedBusReader(path).setFrames(true).open()) {
                        r.setTopics(topics);
                        ByteBuffer direct = ByteBuffer.allocateDirect(8 << 20);
                        for (long i = 0; i < count; i++) {
                            if (!r.waitNext(60, java.util.concurrent.TimeUnit.SECONDS)) {
                                throw new AssertionError("no message " + i + " within 60 s (topics "
                                        + java.util.Arrays.toString(topics) + "): " + r.scanState());
                            }
                            // Every other message through a caller's direct buffer: the same bytes.
                            FrameMessage m = r.message();
                            if (i % 2 == 1) {
                                direct.clear();
                                int n = r.readPayload(direct);
                                byte[] b = new byte[n];
                                direct.flip().get(b);
                                if (!java.util.Arrays.equals(b, m.payload())) {
                                    throw new AssertionError("readPayload(ByteBuffer) differs at " + m.position());
                                }
                            }
                            line(out, m);
                        }
                        out.append("END ").append(r.rollbacks()).append(' ').append(r.rolledBackSkipped()).append(' ')
                                .append(r.filtered()).append('\n');
                    }
                }
                System.out.print(out);
                break;
            }
            case "write-hex": {
                // write-hex PATH RECORD_SIZE FILE_SIZE: a new framed bus, then one message per stdin line "flags hex"
                int recordSize = Integer.parseInt(args[2]);
                long fileSize = Long.parseLong(args[3]);
                java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in,
                        java.nio.charset.StandardCharsets.UTF_8));
                try (MappedBusWriter w = new MappedBusWriter(path, fileSize, recordSize).setFrames(true).open()) {
                    for (String line; (line = in.readLine()) != null && !line.isEmpty(); ) {
                        String[] f = line.split(" ", -1);
                        byte[] b = HexFormat.of().parseHex(f[1]);
                        if (!w.write(b, 0, b.length, null, Integer.parseInt(f[0]))) {
                            throw new AssertionError("rolled back");
                        }
                    }
                }
                System.out.println("written");
                break;
            }
            case "read-file": {
                int recordSize = Integer.parseInt(args[2]);
                long fileSize = Long.parseLong(args[3]);
                try (MappedBusReader r = new MappedBusReader(path, fileSize, recordSize, true).setFrames(true).open()) {
                    if (args.length > 4) {
                        r.setTopics(args[4].split(","));
                    }
                    StringBuilder out = new StringBuilder();
                    try {
                        while (r.next()) {
                            FrameMessage m = r.message();
                            out.append("MSG ").append(m.position()).append(' ').append(m.topic()).append(' ')
                                    .append(m.flags()).append(' ').append(HexFormat.of().formatHex(m.payload()))
                                    .append('\n');
                        }
                    } catch (java.io.EOFException e) {
                        // the end of the file
                    }
                    System.out.print(out.append("END\n"));
                }
                break;
            }
            default:
                throw new IllegalArgumentException("unknown mode " + args[0]);
        }
    }

    private static void line(StringBuilder out, FrameMessage m) {
        CRC32 crc = new CRC32();
        crc.update(m.payload());
        out.append("MSG ").append(m.position()).append(' ').append(m.topic()).append(' ').append(m.payload().length)
                .append(' ').append(Long.toHexString(crc.getValue())).append('\n');
    }

    /** A framed writer of a single-file or rolling bus that exists. */
    interface Writer extends AutoCloseable {
        boolean write(byte[] payload, String topic) throws Exception;

        @Override
        void close();
    }

    static Writer open(String path, boolean rolling) throws Exception {
        if (rolling) {
            RollingBusWriter w = new RollingBusWriter(path).setFrames(true).open();
            return new Writer() {
                @Override
                public boolean write(byte[] payload, String topic) throws Exception {
                    return w.write(payload, topic);
                }

                @Override
                public void close() {
                    w.close();
                }
            };
        }
        MappedBusWriter w = new MappedBusWriter(path).setFrames(true).open();
        return new Writer() {
            @Override
            public boolean write(byte[] payload, String topic) throws Exception {
                return w.write(payload, topic);
            }

            @Override
            public void close() {
                w.close();
            }
        };
    }
}
