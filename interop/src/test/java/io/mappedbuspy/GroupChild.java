package io.mappedbuspy;

import java.io.EOFException;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * The Java member of tests/test_groups_java.py and GroupReaderTest: a work-group member in another JVM. Records carry
 * an 8-byte little-endian value.
 *
 * <pre>
 *  GroupChild consume PATH GROUP LEASE_MS
 *      joins (prints "member N"), then takes records and acks each: prints "acked V D" (D: its deliveries) when the
 *      ack was still this member's, "lost V" when not; stops at the end of a single-file bus or at a line on stdin,
 *      and prints "done"
 *  GroupChild hold PATH GROUP LEASE_MS N
 *      joins (prints "member N"), takes N records without settling them, prints "held V" for each and "holding",
 *      then waits for the end of stdin (a test SIGKILLs it)
 *  GroupChild reject PATH GROUP LEASE_MS
 *      joins (prints "member N"), takes one record and rejects it: prints "rejected V RESULT"
 * </pre>
 * Errors are printed as "error CLASS MESSAGE" (exit status 3).
 */
public final class GroupChild {
    private GroupChild() {
    }

    public static void main(String[] args) throws Exception {
        try (GroupReader m = new GroupReader(args[1], args[2]).setLease(Duration.ofMillis(Long.parseLong(args[3])))
                .setName("java").open()) {
            System.out.println("member " + m.member());
            System.out.flush();
            byte[] buf = new byte[m.recordSize()];
            switch (args[0]) {
                case "consume":
                    try {
                        while (System.in.available() == 0) {
                            if (!m.waitNext(20, TimeUnit.MILLISECONDS)) {
                                continue;
                            }
                            m.readBuffer(buf, 0);
                            long v = value(buf);
                            int d = m.deliveries();
                            System.out.println(m.ack() ? "acked " + v + " " + d : "lost " + v);
                        }
                    } catch (EOFException end) {
                        // a single-file bus read to its end, every record done
                    }
                    System.out.println("done");
                    break;
                case "hold": {
                    int n = Integer.parseInt(args[4]);
                    for (int i = 0; i < n; i++) {
                        if (!m.waitNext(10, TimeUnit.SECONDS)) {
                            throw new IllegalStateException("no record to hold");
                        }
                        m.readBuffer(buf, 0);
                        System.out.println("held " + value(buf));
                    }
                    System.out.println("holding");
                    System.out.flush();
                    while (System.in.read() >= 0) {
                        // until the end of stdin (or SIGKILL)
                    }
                    break;
                }
                case "reject":
                    if (!m.waitNext(10, TimeUnit.SECONDS)) {
                        throw new IllegalStateException("no record to reject");
                    }
                    m.readBuffer(buf, 0);
                    System.out.println("rejected " + value(buf) + " " + m.reject());
                    break;
                default:
                    throw new IllegalArgumentException("usage: GroupChild consume|hold|reject PATH GROUP LEASE_MS [N]");
            }
            System.out.flush();
        } catch (Exception e) {
            System.out.println("error " + e.getClass().getSimpleName() + " " + e.getMessage());
            System.out.flush();
            System.exit(3);
        }
    }

    private static long value(byte[] b) {
        long v = 0;
        for (int i = 7; i >= 0; i--) {
            v = (v << 8) | (b[i] & 0xFF);
        }
        return v;
    }
}
