package io.mappedbuspy.spark.write;

import io.mappedbuspy.Layout;
import io.mappedbuspy.internal.MemoryMappedFile;
import io.mappedbuspy.RollingBusWriter;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The commit log of a rolling bus ({@code DIR/bus.commits}): a task's rows take one range per segment
 * they fill, sealed together, and a crashed attempt's ranges are voided or finished as on a single file.
 */
public final class RollingCommitLogTest {
    private static final int RECORD = 8;
    private static final long SLOT = Layout.slotSize(RECORD);
    /** Ten record slots a segment: a 25-record task takes three ranges. */
    private static final long SEGMENT = Layout.FIRST_RECORD_OFFSET + 10 * SLOT;
    private static final String QUERY = "0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f70";

    @TempDir
    Path tmp;

    private static final class Killed extends RuntimeException {
        private static final long serialVersionUID = 1L;
    }

    private static byte[] records(int n, long base) {
        ByteBuffer b = ByteBuffer.allocate((int) (n * SLOT)).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < n; i++) {
            b.putInt((int) (i * SLOT) + Layout.METADATA_OFFSET, 7);
            b.putLong((int) (i * SLOT) + Layout.PAYLOAD_OFFSET, base + i);
        }
        return b.array();
    }

    private String newBus() throws IOException {
        String d = tmp.resolve("roll").toString();
        new RollingBusWriter(d, SEGMENT, RECORD).open().close();
        return d;
    }

    private static Path segment(String dir, long index) {
        return Path.of(dir, Layout.segmentName(index));
    }

    /** The payloads of the committed records of every segment present, in bus order. */
    private static List<Long> committed(String dir) throws IOException {
        List<Long> out = new ArrayList<>();
        for (long s = 0; s < 64; s++) {
            if (!Files.exists(segment(dir, s))) {
                continue;
            }
            try (MemoryMappedFile m = new MemoryMappedFile(segment(dir, s).toString(), SEGMENT, true)) {
                long limit = m.getLongAcquire(Layout.LIMIT_OFFSET);
                for (long pos = Layout.FIRST_RECORD_OFFSET; pos < limit && pos + SLOT <= SEGMENT; pos += SLOT) {
                    if (m.getStatus(pos) == Layout.STATUS_COMMITTED) {
                        out.add(m.getLong(pos + Layout.PAYLOAD_OFFSET));
                    }
                }
            }
        }
        return out;
    }

    private static List<CommitLog.Entry> entries(String dir) throws IOException {
        try (FileChannel ch = FileChannel.open(Path.of(dir, CommitLog.ROLLING_FILE), StandardOpenOption.READ)) {
            return CommitLog.readAll(ch);
        }
    }

    private static List<Long> range(long from, int n) {
        List<Long> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            out.add(from + i);
        }
        return out;
    }

    /** Dies right after the {@code nth} log entry of kind {@code kind}. */
    private static java.util.function.IntConsumer killAfter(int kind, int nth) {
        int[] seen = {0};
        return k -> {
            if (k == kind && ++seen[0] == nth) {
                throw new Killed();
            }
        };
    }

    @Test
    public void aTaskLargerThanASegmentTakesOneRangePerSegmentSealedOnce() throws IOException {
        String bus = newBus();
        CommitLog log = CommitLog.rolling(bus, SEGMENT, RECORD);
        CommitLog.Key k = new CommitLog.Key(QUERY, 5, 0);
        CommitLog.Outcome o = log.write(k, records(25, 100), 25, null);
        assertEquals(25, o.committed());
        assertEquals(range(100, 25), committed(bus));
        List<CommitLog.Entry> e = entries(bus);
        List<Integer> kinds = new ArrayList<>();
        for (CommitLog.Entry x : e) {
            kinds.add(x.kind);
        }
        assertEquals(List.of(CommitLog.INTENT, CommitLog.INTENT, CommitLog.INTENT, CommitLog.SEALED, CommitLog.DONE),
                kinds);
        // Global positions, each range inside one segment.
        assertEquals(List.of((long) Layout.FIRST_RECORD_OFFSET, SEGMENT + Layout.FIRST_RECORD_OFFSET,
                2 * SEGMENT + Layout.FIRST_RECORD_OFFSET), List.of(e.get(0).first, e.get(1).first, e.get(2).first));
        assertEquals(List.of(10L, 10L, 5L), List.of(e.get(0).count, e.get(1).count, e.get(2).count));
        assertEquals(25, e.get(3).count);
        assertTrue(log.write(k, records(25, 100), 25, null).alreadyDone());
        assertEquals(range(100, 25), committed(bus));
    }

    /**
     * Killed between two INTENTs (unsealed), after SEALED (sealed, nothing committed) or in the middle of
     * the commits: the next attempt, with other rows, leaves one attempt's rows committed, once each.
     */
    @ParameterizedTest
    @ValueSource(strings = {"intent", "sealed", "done"})
    public void aKilledAttemptOverSeveralSegmentsIsVoidedOrFinishedNeverDoubled(String where) throws IOException {
        String bus = newBus();
        CommitLog log = CommitLog.rolling(bus, SEGMENT, RECORD);
        CommitLog.Key k = new CommitLog.Key(QUERY, 2, 1);
        java.util.function.IntConsumer hook = where.equals("intent") ? killAfter(CommitLog.INTENT, 2)
                : where.equals("sealed") ? killAfter(CommitLog.SEALED, 1) : killAfter(CommitLog.DONE, 1);
        assertThrows(Killed.class, () -> log.write(k, records(25, 1000), 25, hook));
        CommitLog.Outcome o = log.write(k, records(12, 2000), 12, null);
        if (where.equals("intent")) {
            assertEquals(range(2000, 12), committed(bus));
            assertFalse(o.recovered());
            // Both unsealed ranges rolled back: a reader does not wait on them.
            try (MemoryMappedFile m = new MemoryMappedFile(segment(bus, 0).toString(), SEGMENT, true)) {
                assertEquals(Layout.STATUS_ROLLED_BACK, m.getStatus(Layout.FIRST_RECORD_OFFSET));
            }
        } else if (where.equals("sealed")) {
            assertEquals(range(1000, 25), committed(bus));
            assertTrue(o.recovered());
            assertEquals(25, o.committed());
        } else {
            assertEquals(range(1000, 25), committed(bus));
            assertTrue(o.alreadyDone());
        }
        assertTrue(log.write(k, records(12, 3000), 12, null).alreadyDone());
    }

    @Test
    public void slotsRolledBackInSeveralSegmentsAreRepairedOnce() throws IOException {
        String bus = newBus();
        CommitLog log = CommitLog.rolling(bus, SEGMENT, RECORD);
        CommitLog.Key k = new CommitLog.Key(QUERY, 1, 0);
        assertThrows(Killed.class, () -> log.write(k, records(25, 10), 25, killAfter(CommitLog.SEALED, 1)));
        // A reader that timed out on the sealed group rolled back a slot in segment 0 and one in segment 2.
        for (long[] at : new long[][] {{0, 3}, {2, 4}}) {
            try (MemoryMappedFile m = new MemoryMappedFile(segment(bus, at[0]).toString(), SEGMENT)) {
                assertTrue(m.casStatus(Layout.FIRST_RECORD_OFFSET + at[1] * SLOT, Layout.STATUS_NOT_SET,
                        Layout.STATUS_ROLLED_BACK));
            }
        }
        CommitLog.Outcome o = log.write(k, records(25, 10), 25, null);
        assertEquals(2, o.repaired());
        List<Long> got = committed(bus);
        Collections.sort(got);
        assertEquals(range(10, 25), got);
    }

    @Test
    public void aSealedRangeInASegmentRetentionRemovedFailsTheWriteNamingTaskRangeAndBus() throws IOException {
        String bus = newBus();
        CommitLog log = CommitLog.rolling(bus, SEGMENT, RECORD);
        CommitLog.Key k = new CommitLog.Key(QUERY, 4, 3);
        assertThrows(Killed.class, () -> log.write(k, records(25, 0), 25, killAfter(CommitLog.SEALED, 1)));
        Files.delete(segment(bus, 0));
        IOException e = assertThrows(IOException.class, () -> log.write(k, records(25, 0), 25, null));
        String m = e.getMessage();
        assertTrue(m.contains(k.toString()) && m.contains("[8, 168)") && m.contains(bus)
                && m.contains("retention removed"), m);
        assertTrue(e.getCause() instanceof NoSuchFileException, String.valueOf(e.getCause()));
        // Nothing of the group was committed: the other segments' ranges wait, unchanged.
        assertEquals(List.of(), committed(bus));
    }

    @Test
    public void anUnsealedRangeInASegmentRetentionRemovedIsVoidedAndTheRowsWrittenAgain() throws IOException {
        String bus = newBus();
        CommitLog log = CommitLog.rolling(bus, SEGMENT, RECORD);
        CommitLog.Key k = new CommitLog.Key(QUERY, 6, 0);
        assertThrows(Killed.class, () -> log.write(k, records(25, 0), 25, killAfter(CommitLog.INTENT, 3)));
        Files.delete(segment(bus, 0));
        CommitLog.Outcome o = log.write(k, records(25, 500), 25, null);
        assertFalse(o.recovered());
        assertEquals(range(500, 25), committed(bus));
        long voids = entries(bus).stream().filter(x -> x.kind == CommitLog.VOID).count();
        assertEquals(3, voids);
    }
}
