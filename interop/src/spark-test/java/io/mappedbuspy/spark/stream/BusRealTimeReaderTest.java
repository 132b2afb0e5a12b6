package io.mappedbuspy.spark.stream;

import io.mappedbuspy.Layout;
import io.mappedbuspy.MappedBusWriter;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeRead.RecordStatus;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import io.mappedbuspy.spark.BusOptions;
import io.mappedbuspy.spark.read.BusReaderFactory;

/** The Real-time Mode partition reader (interop/src/spark/README.md, Real-time Mode). */
public final class BusRealTimeReaderTest {
    private static final int RECORD = 16;
    private static final long FILE_SIZE = 1 << 16;
    private static final long SLOT = Layout.slotSize(RECORD);

    @TempDir
    Path dir;

    private BusOptions options(String path) {
        return options(path, "seq:int64,ts:int64");
    }

    private BusOptions options(String path, String layout) {
        Map<String, String> m = new HashMap<>();
        m.put("path", path);
        m.put("fileSize", Long.toString(FILE_SIZE));
        m.put("layout", layout);
        m.put("timeoutMs", "300");
        m.put("checkHost", "false");
        return BusOptions.parse(new org.apache.spark.sql.util.CaseInsensitiveStringMap(m));
    }

    private static byte[] rec(long seq) {
        return ByteBuffer.allocate(RECORD).order(ByteOrder.LITTLE_ENDIAN).putLong(seq).putLong(0).array();
    }

    private static BusRealTimeReader reader(BusOptions o, long start, String busId) throws Exception {
        StructType schema = o.layout == null ? null : new StructType(
                o.layout.sparkFields().toArray(new org.apache.spark.sql.types.StructField[0]));
        BusReaderFactory f = new BusReaderFactory(o, schema);
        return BusRealTimeReader.open(f, new BusRealTimePartition(o, FILE_SIZE, start, busId, null, null));
    }

    @Test
    public void aRecordWrittenWhileTheReaderWaitsIsHandedOverAtOnce() throws Exception {
        String path = dir.resolve("bus").toString();
        BusOptions o = options(path);
        try (MappedBusWriter w = new MappedBusWriter(path, FILE_SIZE, RECORD).open()) {
            BusRealTimeReader r = reader(o, Layout.FIRST_RECORD_OFFSET, null);
            CountDownLatch waiting = new CountDownLatch(1);
            Thread t = new Thread(() -> {
                try {
                    waiting.await();
                    Thread.sleep(200);
                    w.write(rec(7), 0, RECORD);
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            t.start();
            waiting.countDown();
            long t0 = System.nanoTime();
            RecordStatus s = r.nextWithTimeout(System.currentTimeMillis(), 10_000L);
            long tookMs = (System.nanoTime() - t0) / 1_000_000;
            t.join();
            assertTrue(s.hasRecord());
            InternalRow row = r.get();
            assertEquals(7L, row.getLong(0));
            // Woken by the record, not by the 10 s timeout.
            assertTrue(tookMs < 5_000, "took " + tookMs + " ms");
            assertEquals(Layout.FIRST_RECORD_OFFSET + SLOT, ((BusPartitionOffset) r.getOffset()).position);
            r.close();
        } finally {
            BusRealTimeReader.closeParked(path);
        }
    }

    @Test
    public void withNothingCommittedTheReaderWaitsOutTheTimeoutAndKeepsItsPosition() throws Exception {
        String path = dir.resolve("bus").toString();
        BusOptions o = options(path);
        try (MappedBusWriter w = new MappedBusWriter(path, FILE_SIZE, RECORD).open()) {
            w.write(rec(1), 0, RECORD);
            BusRealTimeReader r = reader(o, Layout.FIRST_RECORD_OFFSET, null);
            assertTrue(r.nextWithTimeout(0L, 1000L).hasRecord());
            long t0 = System.nanoTime();
            assertFalse(r.nextWithTimeout(0L, 150L).hasRecord());
            long tookMs = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(tookMs >= 140, "returned after " + tookMs + " ms, before the timeout");
            PartitionOffset end = r.getOffset();
            assertEquals(Layout.FIRST_RECORD_OFFSET + SLOT, ((BusPartitionOffset) end).position);
            r.close();
        } finally {
            BusRealTimeReader.closeParked(path);
        }
    }

    @Test
    public void theNextBatchTakesOverTheReaderAtTheEndOffsetOfTheLast() throws Exception {
        String path = dir.resolve("bus").toString();
        BusOptions o = options(path);
        try (MappedBusWriter w = new MappedBusWriter(path, FILE_SIZE, RECORD).open()) {
            w.write(rec(1), 0, RECORD);
            BusRealTimeReader first = reader(o, Layout.FIRST_RECORD_OFFSET, null);
            assertTrue(first.nextWithTimeout(0L, 1000L).hasRecord());
            assertFalse(first.nextWithTimeout(0L, 10L).hasRecord());
            BusPartitionOffset end = (BusPartitionOffset) first.getOffset();
            first.close();
            assertEquals(1, BusRealTimeReader.parkedCount());
            BusRealTimeReader second = reader(o, end.position, end.busId);
            assertEquals(0, BusRealTimeReader.parkedCount()); // handed over, not reopened
            w.write(rec(2), 0, RECORD);
            assertTrue(second.nextWithTimeout(0L, 1000L).hasRecord());
            assertEquals(2L, second.get().getLong(0));
            second.close();
        } finally {
            BusRealTimeReader.closeParked(path);
        }
        assertEquals(0, BusRealTimeReader.parkedCount());
    }

    @Test
    public void mergeOffsetsGivesTheReadersPositionWithTheBusId() throws Exception {
        String path = dir.resolve("bus").toString();
        new MappedBusWriter(path, FILE_SIZE, RECORD).open().close();
        BusOptions o = options(path);
        BusMicroBatchStream s = new BusMicroBatchStream(o, new BusReaderFactory(o, new StructType()));
        try {
            BusOffset start = (BusOffset) s.initialOffset();
            assertEquals(1, s.planInputPartitions(start).length);
            BusOffset merged = BusOffset.of(s.mergeOffsets(new PartitionOffset[] {
                new BusPartitionOffset(Layout.FIRST_RECORD_OFFSET + 3 * SLOT, start.busId)}));
            assertEquals(Layout.FIRST_RECORD_OFFSET + 3 * SLOT, merged.position);
            assertEquals(start.busId, merged.busId);
            // No reader reported (no task ran): the batch ends where it started.
            assertEquals(start.json(), s.mergeOffsets(new PartitionOffset[0]).json());
            assertSame(BusRealTimeReaderFactory.class, s.createReaderFactory().getClass());
        } finally {
            s.stop();
        }
    }

    @Test
    public void realTimeModeRefusesMaxRecordsPerTrigger() throws Exception {
        String path = dir.resolve("bus").toString();
        new MappedBusWriter(path, FILE_SIZE, RECORD).open().close();
        Map<String, String> m = new HashMap<>();
        m.put("path", path);
        m.put("recordSize", Integer.toString(RECORD));
        m.put("maxRecordsPerTrigger", "10");
        BusOptions o = BusOptions.parse(new org.apache.spark.sql.util.CaseInsensitiveStringMap(m));
        BusMicroBatchStream s = new BusMicroBatchStream(o, new BusReaderFactory(o, new StructType()));
        try {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, s::prepareForRealTimeMode);
            assertTrue(e.getMessage().contains("maxRecordsPerTrigger") && e.getMessage().contains(path),
                    e.getMessage());
        } finally {
            s.stop();
        }
    }

    /** Timestamp fields decode as in batch and micro-batch reads: Spark's microseconds, from ns or us. */
    @Test
    public void timestampFieldsAreSparkTimestamps() throws Exception {
        String path = dir.resolve("ts").toString();
        BusOptions o = options(path, "at:timestamp_ns,us:timestamp_us");
        try (MappedBusWriter w = new MappedBusWriter(path, FILE_SIZE, RECORD).open()) {
            byte[] b = ByteBuffer.allocate(RECORD).order(ByteOrder.LITTLE_ENDIAN)
                    .putLong(1_700_000_000_123_456_789L).putLong(1_700_000_000_123_456L).array();
            w.write(b, 0, RECORD);
            BusRealTimeReader r = reader(o, Layout.FIRST_RECORD_OFFSET, null);
            assertTrue(r.nextWithTimeout(System.currentTimeMillis(), 10_000L).hasRecord());
            assertEquals(1_700_000_000_123_456L, r.get().getLong(0));
            assertEquals(1_700_000_000_123_456L, r.get().getLong(1));
            r.close();
        } finally {
            BusRealTimeReader.closeParked(path);
        }
    }
}
