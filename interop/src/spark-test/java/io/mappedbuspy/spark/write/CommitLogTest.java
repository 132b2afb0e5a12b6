package io.mappedbuspy.spark.write;

import io.mappedbuspy.Layout;
import io.mappedbuspy.MappedBusWriter;
import io.mappedbuspy.internal.MemoryMappedFile;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
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

/** The exactly-once sink's commit log: a task's records are committed once, whatever attempt crashed where. */
public final class CommitLogTest {
    private static final int RECORD = 8;
    private static final long FILE = 1 << 16;
    private static final long SLOT = Layout.slotSize(RECORD);
    private static final String QUERY = "6a1f3c4e-2b7d-4e8f-9a0b-1c2d3e4f5a6b";

    @TempDir
    Path dir;

    /** Thrown by the test hook: the attempt "dies" right after a given log entry. */
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
        String p = dir.resolve("out.bus").toString();
        new MappedBusWriter(p, FILE, RECORD).open().close();
        return p;
    }

    /** The payloads of the committed records, in bus order. */
    private static List<Long> committed(String path) throws IOException {
        List<Long> out = new ArrayList<>();
        try (MemoryMappedFile m = new MemoryMappedFile(path, FILE, true)) {
            long limit = m.getLongAcquire(Layout.LIMIT_OFFSET);
            for (long pos = Layout.FIRST_RECORD_OFFSET; pos < limit && pos + SLOT <= FILE; pos += SLOT) {
                if (m.getStatus(pos) == Layout.STATUS_COMMITTED) {
                    out.add(m.getLong(pos + Layout.PAYLOAD_OFFSET));
                }
            }
        }
        return out;
    }

    private static List<Long> range(long from, int n) {
        List<Long> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            out.add(from + i);
        }
        return out;
    }

    @Test
    public void aReplayedTaskWritesNothing() throws IOException {
        String bus = newBus();
        CommitLog log = new CommitLog(bus, FILE, RECORD);
        CommitLog.Key k = new CommitLog.Key(QUERY, 3, 1);
        CommitLog.Outcome first = log.write(k, records(5, 100), 5, null);
        assertEquals(5, first.committed());
        CommitLog.Outcome again = log.write(k, records(5, 100), 5, null);
        assertTrue(again.alreadyDone());
        assertEquals(range(100, 5), committed(bus));
        // Another epoch or partition of the same query is another key.
        log.write(new CommitLog.Key(QUERY, 4, 1), records(2, 200), 2, null);
        log.write(new CommitLog.Key(QUERY, 3, 0), records(2, 300), 2, null);
        List<Long> want = new ArrayList<>(range(100, 5));
        want.addAll(range(200, 2));
        want.addAll(range(300, 2));
        assertEquals(want, committed(bus));
    }

    /**
     * An attempt killed after each kind of log entry: the next attempt (with other rows, as a replay
     * of a nondeterministic query may have) leaves exactly one attempt's records committed, once each.
     */
    @ParameterizedTest
    @ValueSource(ints = {CommitLog.INTENT, CommitLog.SEALED, CommitLog.DONE})
    public void anAttemptKilledAfterAnyEntryIsFinishedOrVoidedNeverDoubled(int killedAfter) throws IOException {
        String bus = newBus();
        CommitLog log = new CommitLog(bus, FILE, RECORD);
        CommitLog.Key k = new CommitLog.Key(QUERY, 9, 0);
        assertThrows(Killed.class, () -> log.write(k, records(6, 1000), 6, kind -> {
            if (kind == killedAfter) {
                throw new Killed();
            }
        }));
        CommitLog.Outcome o = log.write(k, records(4, 2000), 4, null);
        if (killedAfter == CommitLog.INTENT) {
            // Nothing of the first attempt was committed: its slots are rolled back, the replay's rows written.
            assertEquals(range(2000, 4), committed(bus));
            assertFalse(o.recovered());
        } else if (killedAfter == CommitLog.SEALED) {
            // The first attempt's bytes were all in place: they are committed, the replay's rows dropped.
            assertEquals(range(1000, 6), committed(bus));
            assertTrue(o.recovered());
        } else {
            assertEquals(range(1000, 6), committed(bus));
            assertTrue(o.alreadyDone());
        }
        assertTrue(log.write(k, records(4, 3000), 4, null).alreadyDone());
    }

    /** A reader that timed out on slots of a sealed range rolled them back: their records are copied once. */
    @Test
    public void slotsRolledBackByAReaderAreRepairedOnce() throws IOException {
        String bus = newBus();
        CommitLog log = new CommitLog(bus, FILE, RECORD);
        CommitLog.Key k = new CommitLog.Key(QUERY, 1, 0);
        assertThrows(Killed.class, () -> log.write(k, records(5, 10), 5, kind -> {
            if (kind == CommitLog.SEALED) {
                throw new Killed();
            }
        }));
        long first = Layout.FIRST_RECORD_OFFSET;
        try (MemoryMappedFile m = new MemoryMappedFile(bus, FILE)) {
            assertTrue(m.casStatus(first + SLOT, Layout.STATUS_NOT_SET, Layout.STATUS_ROLLED_BACK));
            assertTrue(m.casStatus(first + 3 * SLOT, Layout.STATUS_NOT_SET, Layout.STATUS_ROLLED_BACK));
        }
        // The repair itself is killed before it is sealed: voided, and done again by the next attempt.
        assertThrows(Killed.class, () -> log.write(k, records(5, 10), 5, kind -> {
            if (kind == CommitLog.INTENT) {
                throw new Killed();
            }
        }));
        CommitLog.Outcome o = log.write(k, records(5, 10), 5, null);
        assertEquals(2, o.repaired());
        List<Long> got = committed(bus);
        Collections.sort(got);
        assertEquals(range(10, 5), got);
    }

    @Test
    public void aFullBusRollsBackWhatFitAndFailsNamingTheBus() throws IOException {
        String bus = newBus();
        CommitLog log = new CommitLog(bus, FILE, RECORD);
        int n = (int) (FILE / SLOT);
        IOException e = assertThrows(IOException.class,
                () -> log.write(new CommitLog.Key(QUERY, 0, 0), records(n, 0), n, null));
        assertTrue(e.getMessage().contains(bus) && e.getMessage().contains("full"), e.getMessage());
        try (MemoryMappedFile m = new MemoryMappedFile(bus, FILE, true)) {
            assertEquals(Layout.STATUS_ROLLED_BACK, m.getStatus(Layout.FIRST_RECORD_OFFSET));
        }
        assertEquals(List.of(), committed(bus));
    }
}
