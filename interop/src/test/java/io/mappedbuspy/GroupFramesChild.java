package io.mappedbuspy;

import java.time.Duration;
import java.util.HexFormat;
import java.util.concurrent.TimeUnit;

/**
 * The Java member of tests/groups/test_groups_frames_java.py: a work-group member of a framed bus in another JVM.
 * Each message it settles is printed with its position, length, SHA-256 of its payload, deliveries and topic
 * ("-": none).
 *
 * <pre>
 *  GroupFramesChild consume PATH GROUP LEASE_MS
 *      joins (prints "member N"), then takes messages by turns one by one (waitNext, ack) and in batches of up to 4
 *      (readBatch, ackBatch): prints "acked POS LEN SHA D TOPIC" for each acked; stops at a line on stdin and prints
 *      "done"
 *  GroupFramesChild hold PATH GROUP LEASE_MS N
 *      joins (prints "member N"), takes N messages without settling them, prints "held POS LEN SHA D TOPIC" for
 *      each and "holding", then waits for the end of stdin (a test SIGKILLs it)
 * </pre>
 * Errors are printed as "error CLASS MESSAGE" (exit status 3).
 */
public final class GroupFramesChild {
    private GroupFramesChild() {
    }

    public static void main(String[] args) throws Exception {
        try (GroupReader m = new GroupReader(args[1], args[2]).setLease(Duration.ofMillis(Long.parseLong(args[3])))
                .setName("java").open()) {
            System.out.println("member " + m.member());
            System.out.flush();
            switch (args[0]) {
                case "consume":
                    consume(m);
                    break;
                case "hold": {
                    int n = Integer.parseInt(args[4]);
                    for (int i = 0; i < n; i++) {
                        if (!m.waitNext(10, TimeUnit.SECONDS)) {
                            throw new IllegalStateException("no message to hold");
                        }
                        System.out.println("held " + line(m.message(), m.deliveries()));
                    }
                    System.out.println("holding");
                    System.out.flush();
                    while (System.in.read() >= 0) {
                        // until the end of stdin (or SIGKILL)
                    }
                    break;
                }
                default:
                    throw new IllegalArgumentException("usage: GroupFramesChild consume|hold PATH GROUP LEASE_MS [N]");
            }
            System.out.flush();
        } catch (Exception e) {
            System.out.println("error " + e.getClass().getSimpleName() + " " + e.getMessage());
            System.out.flush();
            System.exit(3);
        }
    }

    private static void consume(GroupReader m) throws Exception {
        GroupBatch batch = new GroupBatch(4, m.recordSize());
        for (int turn = 0; System.in.available() == 0; turn++) {
            if (turn % 2 == 0) {
                if (!m.waitNext(20, TimeUnit.MILLISECONDS)) {
                    continue;
                }
                FrameMessage msg = m.message();
                int d = m.deliveries();
                System.out.println(m.ack() ? "acked " + line(msg, d) : "lost " + msg.position());
            } else {
                if (m.readBatch(batch, 20, TimeUnit.MILLISECONDS) == 0) {
                    continue;
                }
                int acked = m.ackBatch(batch);
                if (acked != batch.size()) {
                    throw new IllegalStateException("ackBatch acked " + acked + " of " + batch.size());
                }
                for (int i = 0; i < batch.size(); i++) {
                    FrameMessage msg = batch.message(i);
                    System.out.println("acked " + line(msg, batch.record(i).deliveries()));
                }
            }
        }
        System.out.println("done");
    }

    private static String line(FrameMessage msg, int deliveries) throws Exception {
        byte[] sha = java.security.MessageDigest.getInstance("SHA-256").digest(msg.payload());
        return msg.position() + " " + msg.payload().length + " " + HexFormat.of().formatHex(sha) + " " + deliveries
                + " " + (msg.topic() == null ? "-" : msg.topic());
    }
}
