package io.mappedbuspy.spark.write;

import io.mappedbuspy.FrameMessage;
import io.mappedbuspy.Layout;
import io.mappedbuspy.MappedBusReader;
import io.mappedbuspy.MappedBusWriter;
import io.mappedbuspy.RollingBusReader;
import io.mappedbuspy.RollingBusWriter;
import io.mappedbuspy.internal.MemoryMappedFile;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The exactly-once sink's commit log on a framed bus: a task's messages (0 bytes to several slots, with topics) are
 * committed once each, whole, whatever attempt crashed where; readers walk them by their counts.
 */
public final class FramedCommitLogTest {
    private static final int RECORD = 56;
    private static final long FILE = 1 << 18;
    private static final long SLOT = Layout.slotSize(RECORD);
    private static final String QUERY = "0b7e4c1a-2b7d-4e8f-9a0b-1c2d3e4f5a6b";

    @TempDir
    Path dir;

    /** Thrown by the test hook: the attempt "dies" right after a given log entry. */
    private static final class Killed extends RuntimeException {
        private static final long serialVersionUID = 1L;
    }

    /** A message as the test compares it. */
    private record Msg(String topic, List<Byte> bytes) {
        static Msg of(byte[] payload, String topic) {
            List<Byte> b = new ArrayList<>();
            for (byte x : payload) {
                b.add(x);
            }
            return new Msg(topic, b);
        }
    }

    /** {@code n} messages of 0 bytes to several slots, seeded; topics a, b or none. */
    private static List<byte[]> payloads(int n, int seed) {
        Random r = new Random(seed);
        List<byte[]> out = new ArrayList<>();
        int[] sizes = {0, 1, 40, 41, 48, 200, 700};
        for (int i = 0; i < n; i++) {
            byte[] b = new byte[sizes[r.nextInt(sizes.length)]];
            r.nextBytes(b);
            out.add(b);
        }
        return out;
    }

    private static List<String> topics(int n) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            out.add(i % 3 == 0 ? null : i % 3 == 1 ? "a" : "b");
        }
        return out;
    }

    private static List<Msg> msgs(List<byte[]> p, List<String> t) {
        List<Msg> out = new ArrayList<>();
        for (int i = 0; i < p.size(); i++) {
            out.add(Msg.of(p.get(i), t.get(i)));
        }
        return out;
    }

    private String newBus() throws IOException {
        String p = dir.resolve("out.bus").toString();
        new MappedBusWriter(p, FILE, RECORD).setFrames(true).open().close();
        return p;
    }

    /** Every committed message, in bus order, as a framed reader delivers them. */
    private static List<Msg> read(String path) throws IOException {
        List<Msg> out = new ArrayList<>();
        try (MappedBusReader r = new MappedBusReader(path, FILE, RECORD).setFrames(true).open()) {
            r.setTimeout(50);
            while (r.next()) {
                FrameMessage m = r.message();
                out.add(Msg.of(m.payload(), m.topic()));
            }
        }
        return out;
    }

    @Test
    public void aReplayedTaskWritesNothingAndReadersGetEachMessageWhole() throws IOException {
        String bus = newBus();
        CommitLog log = new CommitLog(bus, FILE, RECORD, true);
        CommitLog.Key k = new CommitLog.Key(QUERY, 3, 1);
        List<byte[]> p = payloads(30, 1);
        List<String> t = topics(30);
        assertEquals(30, log.writeFrames(k, p, t, null).committed());
        assertTrue(log.writeFrames(k, p, t, null).alreadyDone());
        assertEquals(msgs(p, t), read(bus));
        assertThrows(IllegalStateException.class, () -> log.write(k, new byte[0], 0, null));
    }

    /** An attempt killed after each kind of entry: one attempt's messages end up committed, once each. */
    @ParameterizedTest
    @ValueSource(ints = {CommitLog.INTENT, CommitLog.SEALED, CommitLog.DONE})
    public void anAttemptKilledAfterAnyEntryIsFinishedOrVoidedNeverDoubled(int killedAfter) throws IOException {
        String bus = newBus();
        CommitLog log = new CommitLog(bus, FILE, RECORD, true);
        CommitLog.Key k = new CommitLog.Key(QUERY, 9, 0);
        List<byte[]> first = payloads(12, 2);
        List<byte[]> replay = payloads(7, 3);
        assertThrows(Killed.class, () -> log.writeFrames(k, first, topics(12), kind -> {
            if (kind == killedAfter) {
                throw new Killed();
            }
        }));
        CommitLog.Outcome o = log.writeFrames(k, replay, topics(7), null);
        if (killedAfter == CommitLog.INTENT) {
            assertEquals(msgs(replay, topics(7)), read(bus)); // the first attempt's range voided, skipped whole
            assertFalse(o.recovered());
        } else if (killedAfter == CommitLog.SEALED) {
            assertEquals(msgs(first, topics(12)), read(bus)); // its messages were all in place: committed
            assertTrue(o.recovered());
        } else {
            assertEquals(msgs(first, topics(12)), read(bus));
            assertTrue(o.alreadyDone());
        }
        assertTrue(log.writeFrames(k, replay, topics(7), null).alreadyDone());
    }

    /** A reader gave up messages of a sealed group (its writer died): they are copied from their slots, once. */
    @Test
    public void messagesGivenUpAfterTheSealAreRepairedOnce() throws IOException {
        String bus = newBus();
        CommitLog log = new CommitLog(bus, FILE, RECORD, true);
        CommitLog.Key k = new CommitLog.Key(QUERY, 1, 0);
        List<byte[]> p = payloads(8, 4);
        List<String> t = topics(8);
        assertThrows(Killed.class, () -> log.writeFrames(k, p, t, kind -> {
            if (kind == CommitLog.SEALED) {
                throw new Killed();
            }
        }));
        try (MemoryMappedFile m = new MemoryMappedFile(bus, FILE)) {
            long pos = Layout.FIRST_RECORD_OFFSET;
            for (int i = 0; i < 8; i++) { // messages 1 and 5 given up, as a reader does (their counts are set)
                if (i == 1 || i == 5) {
                    assertTrue(m.casStatus(pos, Layout.STATUS_NOT_SET, Layout.STATUS_ROLLED_BACK));
                }
                pos += Layout.frameMetaSlots(m.getInt(pos + Layout.METADATA_OFFSET)) * SLOT;
            }
        }
        CommitLog.Outcome o = log.writeFrames(k, p, t, null);
        assertEquals(2, o.repaired());
        List<Msg> want = new ArrayList<>(msgs(p, t));
        List<Msg> moved = List.of(want.get(1), want.get(5));
        want.removeAll(moved);
        want.addAll(moved); // the repair comes after the group
        assertEquals(want, read(bus));
    }

    /** A rolling bus: a segment's end cuts no message (the rest of the segment is a padding outside the group). */
    @Test
    public void onARollingBusSegmentEndsCutNoMessage() throws IOException {
        String bus = dir.resolve("rolling").toString();
        long segment = 4096;
        new RollingBusWriter(bus, segment, RECORD).setFrames(true).open().close();
        CommitLog log = CommitLog.rolling(bus, segment, RECORD, true);
        List<byte[]> p = payloads(80, 5);
        List<String> t = topics(80);
        assertEquals(80, log.writeFrames(new CommitLog.Key(QUERY, 0, 0), p, t, null).committed());
        List<Msg> got = new ArrayList<>();
        List<Long> segments = new ArrayList<>();
        try (RollingBusReader r = new RollingBusReader(bus, segment, RECORD).setFrames(true).open()) {
            r.setTimeout(50);
            while (r.next()) {
                FrameMessage m = r.message();
                got.add(Msg.of(m.payload(), m.topic()));
                segments.add(m.position() / segment);
            }
        }
        assertEquals(msgs(p, t), got);
        assertTrue(segments.stream().distinct().count() > 2, segments.toString());
        byte[] big = new byte[5000]; // larger than a segment: refused, nothing committed
        assertThrows(IOException.class, () -> log.writeFrames(new CommitLog.Key(QUERY, 1, 0),
                List.of(big), Arrays.asList((String) null), null));
    }
}
