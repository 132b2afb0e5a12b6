package io.mappedbuspy.reliability;

import io.mappedbuspy.Layout;
import io.mappedbuspy.MappedBusWriter;
import io.mappedbuspy.internal.MemoryMappedFile;

/**
 * A writer process for the reliability tests (tests/reliability): the Java twin of
 * {@code tests/support/bus_child.py stream}.
 *
 * <pre>StreamWriter &lt;path&gt; &lt;fileSize&gt; &lt;recordSize&gt; &lt;count&gt; &lt;writerId&gt; [progressEvery [pauseMs]]</pre>
 *
 * Writes records of 8 bytes (int32 writerId, int32 i), printing {@code committed <i>} after every
 * {@code progressEvery}-th commit (default 100), pausing {@code pauseMs} there (default 0), and {@code wrote <count> committed <n>} at the end. With
 * {@code MAPPEDBUS_TEST_STALL_EVERY=k} in the environment, every k-th record is allocated and filled but
 * not committed: it prints {@code stalled <i> <offset>} and hangs, as a writer frozen between the two
 * steps, until the test kills it.
 */
public final class StreamWriter {
    private StreamWriter() {
    }

    /**
     * Runs the writer.
     *
     * @param args path, fileSize, recordSize, count, writerId and optionally progressEvery and pauseMs
     * @throws Exception on any failure (the test reads the exit status)
     */
    public static void main(String[] args) throws Exception {
        String path = args[0];
        long fileSize = Long.parseLong(args[1]);
        int recordSize = Integer.parseInt(args[2]);
        long count = Long.parseLong(args[3]);
        int writerId = Integer.parseInt(args[4]);
        long progress = args.length > 5 ? Long.parseLong(args[5]) : 100;
        long pauseMs = args.length > 6 ? Long.parseLong(args[6]) : 0;
        String env = System.getenv("MAPPEDBUS_TEST_STALL_EVERY");
        long stallEvery = env == null || env.isEmpty() ? 0 : Long.parseLong(env);
        byte[] rec = new byte[8];
        long committed = 0;
        try (MappedBusWriter w = new MappedBusWriter(path, fileSize, recordSize).open()) {
            for (long i = 0; i < count; i++) {
                putIntLE(rec, 0, writerId);
                putIntLE(rec, 4, (int) i);
                if (stallEvery > 0 && (i + 1) % stallEvery == 0) {
                    stall(path, fileSize, recordSize, rec, i);
                }
                if (w.write(rec, 0, rec.length)) {
                    committed++;
                    if ((i + 1) % progress == 0) {
                        System.out.println("committed " + i);
                        System.out.flush();
                        if (pauseMs > 0) {
                            Thread.sleep(pauseMs);
                        }
                    }
                }
            }
        }
        System.out.println("wrote " + count + " committed " + committed);
        System.out.flush();
    }

    // Allocates and fills a record the way MappedBusWriter does, but never commits it.
    private static void stall(String path, long fileSize, int recordSize, byte[] rec, long i) throws Exception {
        long slot = Layout.slotSize(recordSize);
        try (MemoryMappedFile mem = new MemoryMappedFile(path, fileSize)) {
            long offset = mem.getAndAddLong(Layout.LIMIT_OFFSET, slot);
            if (offset < Layout.FIRST_RECORD_OFFSET || offset > fileSize - slot) {
                throw new java.io.EOFException("bus full at " + offset);
            }
            mem.putInt(offset + Layout.METADATA_OFFSET, rec.length);
            mem.putBytes(offset + Layout.PAYLOAD_OFFSET, rec, 0, rec.length);
            System.out.println("stalled " + i + " " + offset);
            System.out.flush();
            for (;;) {
                Thread.sleep(60_000);
            }
        }
    }

    private static void putIntLE(byte[] b, int at, int v) {
        b[at] = (byte) v;
        b[at + 1] = (byte) (v >>> 8);
        b[at + 2] = (byte) (v >>> 16);
        b[at + 3] = (byte) (v >>> 24);
    }
}
