package io.mappedbuspy;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import io.mappedbuspy.internal.Liveness;

/**
 * The Java side of tests/jvm/test_writer_liveness_java.py: a writer stopped between its reservation and its commit, and a
 * reader waiting on a stalled slot (issue 33: a crashed writer costs readers microseconds, a paused one nothing).
 * Records carry an int64 little-endian in their first 8 bytes.
 *
 * <pre>
 *  WriterLivenessChild hold PATH
 *      writes the record -1, reserves one more slot (its claim published in PATH.writers) and prints
 *      "reserved OFFSET native|polling"; at the stdin line "commit" writes 42 into it, commits and prints
 *      "committed true|false"
 *  WriterLivenessChild read-rolling DIR STOP
 *      the same on a rolling bus; prints "END records inOrder rollbacks skipped"
 *  WriterLivenessChild read PATH STOP
 *      prints "ready"; reads records (waitNext, up to 30 s each) until one holds STOP, checking that the others are
 *      -1 then 0, 1, 2, ... in order; prints "END records rollbacks skipped inOrder"
 * </pre>
 */
public final class WriterLivenessChild {
    private WriterLivenessChild() {
    }

    public static void main(String[] args) throws Exception {
        String path = args[1];
        switch (args[0]) {
            case "hold": {
                try (MappedBusWriter w = new MappedBusWriter(path).open()) {
                    w.write(bytes(-1), 0, 8);
                    long pos = w.allocateOnly();
                    System.out.println("reserved " + pos + " " + (Liveness.available() ? "native" : "polling"));
                    System.out.flush();
                    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
                    for (String line; (line = in.readLine()) != null; ) {
                        if (line.equals("commit")) {
                            System.out.println("committed " + w.commitReserved(pos, bytes(42)));
                            System.out.flush();
                        }
                    }
                }
                break;
            }
            case "read-rolling": {
                try (RollingBusReader r = new RollingBusReader(path).open()) {
                    read(r, Long.parseLong(args[2]), r.recordSize());
                    System.out.println(" " + r.rollbacks() + " " + r.rolledBackSkipped());
                }
                break;
            }
            case "read": {
                long stop = Long.parseLong(args[2]);
                try (MappedBusReader r = new MappedBusReader(path).open()) {
                    System.out.println("ready");
                    System.out.flush();
                    long n = 0;
                    long expect = -1;
                    boolean inOrder = true;
                    String firstBad = "";
                    byte[] buf = new byte[r.recordSize()];
                    while (r.waitNext(30, TimeUnit.SECONDS)) {
                        r.readBuffer(buf, 0);
                        long v = ByteBuffer.wrap(buf).order(ByteOrder.LITTLE_ENDIAN).getLong();
                        n++;
                        if (v == stop) {
                            break;
                        }
                        if (v != expect && inOrder) {
                            inOrder = false;
                            firstBad = " record " + n + " held " + v + " not " + expect;
                        }
                        expect = v + 1;
                    }
                    System.out.println("END " + n + " " + r.rollbacks() + " " + r.rolledBackSkipped() + " " + inOrder + firstBad);
                }
                break;
            }
            default:
                throw new IllegalArgumentException("unknown command " + args[0]);
        }
    }

    // Reads until a record holds stop (the others: -1, then 0, 1, 2, ...); prints "END records inOrder" without
    // a newline (the caller adds its counts).
    private static void read(RollingBusReader r, long stop, int recordSize) throws Exception {
        System.out.println("ready");
        System.out.flush();
        long n = 0;
        long expect = -1;
        boolean inOrder = true;
        byte[] buf = new byte[recordSize];
        while (r.waitNext(30, TimeUnit.SECONDS)) {
            r.readBuffer(buf, 0);
            long v = ByteBuffer.wrap(buf).order(ByteOrder.LITTLE_ENDIAN).getLong();
            n++;
            if (v == stop) {
                break;
            }
            inOrder &= v == expect;
            expect = v + 1;
        }
        System.out.print("END " + n + " " + inOrder);
    }

    private static byte[] bytes(long v) {
        return ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(v).array();
    }
}
