package io.mappedbuspy;

import java.time.Duration;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.concurrent.TimeUnit;

/**
 * The Java member of tests/groups/test_groups_archive_java.py: a work-group member of a rolling bus whose segments
 * move to its archive while it reads, in another JVM. Fixed-size records or framed messages, whichever the bus holds.
 *
 * <pre>
 *  GroupArchiveChild consume PATH GROUP LEASE_MS
 *      joins (prints "member N"), then takes records by turns one by one (waitNext) and in batches of up to 4
 *      (readBatch, ackBatch); the first delivery of every fifth one taken alone is released ("released POS"), to come
 *      back; prints "acked POS LEN SHA D TOPIC" for each acked (SHA: SHA-256 of its bytes, TOPIC "-": none), and
 *      "gap FROM TO SLOTS" for a BusGapException; stops at a line on stdin and prints "done"
 * </pre>
 * Errors are printed as "error CLASS MESSAGE" (exit status 3).
 */
public final class GroupArchiveChild {
    private GroupArchiveChild() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 4 || !args[0].equals("consume")) {
            throw new IllegalArgumentException("usage: GroupArchiveChild consume PATH GROUP LEASE_MS");
        }
        try (GroupReader m = new GroupReader(args[1], args[2]).setLease(Duration.ofMillis(Long.parseLong(args[3])))
                .setName("java").open()) {
            System.out.println("member " + m.member());
            System.out.flush();
            consume(m);
            System.out.flush();
        } catch (Exception e) {
            System.out.println("error " + e.getClass().getSimpleName() + " " + e.getMessage());
            System.out.flush();
            System.exit(3);
        }
    }

    private static void consume(GroupReader m) throws Exception {
        GroupBatch batch = new GroupBatch(4, m.recordSize());
        byte[] buf = new byte[m.recordSize()];
        int alone = 0;
        for (int turn = 0; System.in.available() == 0; turn++) {
            try {
                if (turn % 2 == 0) {
                    if (!m.waitNext(20, TimeUnit.MILLISECONDS)) {
                        continue;
                    }
                    byte[] data = m.framed() ? m.readPayload() : Arrays.copyOf(buf, m.readBuffer(buf, 0));
                    String topic = m.framed() ? m.topic() : null;
                    int d = m.deliveries();
                    if (d == 1 && alone++ % 5 == 0) {
                        System.out.println(m.release() ? "released " + m.position() : "lost " + m.position());
                        continue;
                    }
                    long pos = m.position();
                    System.out.println(m.ack() ? "acked " + line(pos, data, d, topic) : "lost " + pos);
                } else {
                    if (m.readBatch(batch, 20, TimeUnit.MILLISECONDS) == 0) {
                        continue;
                    }
                    int acked = m.ackBatch(batch);
                    if (acked != batch.size()) {
                        throw new IllegalStateException("ackBatch acked " + acked + " of " + batch.size());
                    }
                    for (int i = 0; i < batch.size(); i++) {
                        GroupRecord rec = batch.record(i);
                        if (m.framed()) {
                            FrameMessage msg = batch.message(i);
                            System.out.println("acked " + line(msg.position(), msg.payload(), rec.deliveries(),
                                    msg.topic()));
                        } else {
                            byte[] data = Arrays.copyOf(buf, batch.readBuffer(i, buf, 0));
                            System.out.println("acked " + line(rec.position(), data, rec.deliveries(), null));
                        }
                    }
                }
            } catch (BusGapException gap) {
                System.out.println("gap " + gap.lostFrom() + " " + gap.lostTo() + " " + gap.lost());
            }
        }
        System.out.println("done");
    }

    private static String line(long position, byte[] data, int deliveries, String topic) throws Exception {
        byte[] sha = java.security.MessageDigest.getInstance("SHA-256").digest(data);
        return position + " " + data.length + " " + HexFormat.of().formatHex(sha) + " " + deliveries + " "
                + (topic == null ? "-" : topic);
    }
}
