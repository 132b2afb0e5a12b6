package io.mappedbuspy;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import io.mappedbuspy.internal.BusMeta;

/**
 * The other process of ConsumersTest and tests/jvm/test_consumers_java.py: a named consumer in another JVM. The bus is a
 * single file when PATH is a file, a rolling bus when it is a directory; sizes come from its metadata.
 *
 * <pre>
 *  ConsumerChild hold PATH NAME
 *      opens the consumer, prints "held PID POSITION", then waits for a line on stdin ("commit P" commits position P
 *      and prints "committed"; anything else, or the end of input, closes the reader and exits)
 *  ConsumerChild read PATH NAME COUNT
 *      opens the consumer, prints "held PID POSITION", then until COUNT records were read in all: waits for the next
 *      record, prints "got V" (V: the record's first 8 bytes, little-endian), commits; prints "done" at the end
 *  ConsumerChild list PATH
 *      prints each consumer as "NAME POSITION LAG ALIVE PID EXPIRED"
 *  ConsumerChild create DIR SEGMENT_SIZE RECORD_SIZE MAX_CONSUMER_LAG ON_CONSUMER_LAG BLOCK_MS
 *      creates a rolling bus with that consumer policy; prints "created"
 *  ConsumerChild meta FILE
 *      decodes a metadata file and prints "same" when encoding it again gives its bytes, then
 *      "MAX_CONSUMER_LAG ON_CONSUMER_LAG CONSUMER_BLOCK_MS"
 *  ConsumerChild write DIR COUNT
 *      writes records 0..COUNT-1 (8-byte little-endian values) to a rolling bus; prints "wrote COUNT", or
 *      "backpressure V NAME POSITION LAG" when the write of value V gave up on a consumer
 * </pre>
 * Errors are printed as "error CLASS MESSAGE" (exit status 3).
 */
public final class ConsumerChild {
    private ConsumerChild() {
    }

    public static void main(String[] args) throws Exception {
        String path = args[1];
        boolean rolling = Files.isDirectory(Path.of(path), LinkOption.NOFOLLOW_LINKS);
        try {
            switch (args[0]) {
                case "hold":
                    hold(path, args[2], rolling);
                    break;
                case "read":
                    read(path, args[2], Long.parseLong(args[3]), rolling);
                    break;
                case "list":
                    for (ConsumerInfo c : Consumers.consumers(path)) {
                        System.out.println(c.name() + " " + c.position() + " " + c.lag() + " " + c.alive() + " "
                                + c.pid() + " " + c.expired());
                    }
                    break;
                case "create":
                    new RollingBusWriter(path, Long.parseLong(args[2]), Integer.parseInt(args[3]))
                            .setMaxConsumerLag(Long.parseLong(args[4])).setOnConsumerLag(args[5])
                            .setConsumerBlockTimeout(Long.parseLong(args[6]), java.util.concurrent.TimeUnit.MILLISECONDS)
                            .open().close();
                    System.out.println("created");
                    break;
                case "meta": {
                    byte[] data = Files.readAllBytes(Path.of(path));
                    BusMeta m = BusMeta.decode(data, path);
                    System.out.println(java.util.Arrays.equals(data, m.encode()) ? "same" : "different");
                    System.out.println(m.maxConsumerLag() + " " + m.onConsumerLag() + " " + m.consumerBlockMs());
                    break;
                }
                case "write":
                    write(path, Long.parseLong(args[2]));
                    break;
                default:
                    throw new IllegalArgumentException("usage: ConsumerChild hold|read|list PATH ...");
            }
        } catch (Exception e) {
            System.out.println("error " + e.getClass().getSimpleName() + " " + e.getMessage());
            System.out.flush();
            System.exit(3);
        }
        System.out.flush();
    }

    // A consumer reader of either kind.
    private interface Reader extends AutoCloseable {
        boolean next() throws Exception;

        long value() throws Exception;

        long position();

        void commit(long position);

        @Override
        void close();
    }

    private static Reader open(String path, String name, boolean rolling) throws Exception {
        byte[] buf = new byte[8];
        if (rolling) {
            RollingBusReader r = new RollingBusReader(path).setConsumer(name).open();
            return new Reader() {
                public boolean next() throws Exception {
                    return r.next();
                }

                public long value() throws Exception {
                    r.readBuffer(buf, 0);
                    return ByteBuffer.wrap(buf).order(ByteOrder.LITTLE_ENDIAN).getLong(0);
                }

                public long position() {
                    return r.position();
                }

                public void commit(long position) {
                    r.commit(position);
                }

                public void close() {
                    r.close();
                }
            };
        }
        MappedBusReader r = new MappedBusReader(path).setConsumer(name).open();
        return new Reader() {
            public boolean next() throws Exception {
                return r.next();
            }

            public long value() throws Exception {
                r.readBuffer(buf, 0);
                return ByteBuffer.wrap(buf).order(ByteOrder.LITTLE_ENDIAN).getLong(0);
            }

            public long position() {
                return r.position();
            }

            public void commit(long position) {
                r.commit(position);
            }

            public void close() {
                r.close();
            }
        };
    }

    private static void write(String dir, long count) throws Exception {
        try (RollingBusWriter w = new RollingBusWriter(dir).open()) {
            for (long v = 0; v < count; v++) {
                byte[] b = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(0, v).array();
                try {
                    w.write(b, 0, 8);
                } catch (BusBackPressureException e) {
                    System.out.println("backpressure " + v + " " + e.consumer() + " " + e.position() + " " + e.lag());
                    return;
                }
            }
            System.out.println("wrote " + count);
        }
    }

    private static void hold(String path, String name, boolean rolling) throws Exception {
        try (Reader r = open(path, name, rolling);
             BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            System.out.println("held " + ProcessHandle.current().pid() + " " + r.position());
            System.out.flush();
            for (String line; (line = in.readLine()) != null; ) {
                if (!line.startsWith("commit ")) {
                    break;
                }
                r.commit(Long.parseLong(line.substring(7).trim()));
                System.out.println("committed");
                System.out.flush();
            }
        }
    }

    private static void read(String path, String name, long count, boolean rolling) throws Exception {
        try (Reader r = open(path, name, rolling)) {
            System.out.println("held " + ProcessHandle.current().pid() + " " + r.position());
            System.out.flush();
            long deadline = System.nanoTime() + 60_000_000_000L;
            for (;;) {
                if (!r.next()) {
                    if (System.nanoTime() - deadline > 0) {
                        throw new IllegalStateException("no record within 60 s");
                    }
                    Thread.onSpinWait();
                    continue;
                }
                long v = r.value();
                System.out.println("got " + v);
                System.out.flush();
                r.commit(r.position());
                if (v + 1 >= count) {
                    break;
                }
            }
            System.out.println("done");
        }
    }
}
