package io.mappedbuspy.spark.read;

import io.mappedbuspy.Layout;
import io.mappedbuspy.MappedBusWriter;
import io.mappedbuspy.internal.MemoryMappedFile;
import io.mappedbuspy.RollingBusWriter;
import io.mappedbuspy.internal.RollingDir;
import io.mappedbuspy.internal.RollingLayout;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.stream.Stream;

import org.apache.spark.sql.connector.read.InputPartition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import static io.mappedbuspy.spark.Fixtures.options;
import static io.mappedbuspy.spark.Fixtures.plan;
import static io.mappedbuspy.spark.Fixtures.read;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import io.mappedbuspy.spark.BusOptions;
import io.mappedbuspy.spark.Fixtures;

/**
 * Batch planning (README "Batch reads"): partitions are slot ranges whose every status is settled, the
 * read ends before the first uncommitted slot ({@code uncommitted=stop}) or skips it ({@code wait}),
 * rolled-back slots are skipped, nothing past the end of the file is planned, and on a rolling bus a
 * partition is a range of one segment file. No SparkSession: options give the partition sizes.
 */
public final class PartitionPlanningTest {
    @TempDir
    Path tmp;

    private static BusPartition[] partitions(InputPartition[] parts) {
        return Arrays.copyOf(parts, parts.length, BusPartition[].class);
    }

    /** PriceUpdate rows of a golden file as the manifest's bytes say (source, price, quantity). */
    private static String priceRow(long position, String payloadHex) {
        byte[] b = Fixtures.HEX.parseHex(payloadHex);
        java.nio.ByteBuffer le = java.nio.ByteBuffer.wrap(b).order(java.nio.ByteOrder.LITTLE_ENDIAN);
        return "position=" + position + ",meta=0,source=" + le.getInt(0) + ",price=" + le.getInt(4)
                + ",quantity=" + le.getInt(8);
    }

    /** Golden uncommitted-r12.bus (slot 2 of 3 uncommitted): stop ends before it; wait skips it. */
    @Test
    public void anUncommittedSlotEndsTheReadOrIsSkippedWithWait() throws Exception {
        String path = Fixtures.golden(tmp, "uncommitted-r12.bus");
        var slots = Fixtures.manifest("uncommitted-r12.bus").getAsJsonArray("slots");
        BusOptions stop = options(path, "layout", "PriceUpdate", "recordsPerPartition", "1");
        BusPartition[] parts = partitions(plan(stop));
        assertEquals(1, parts.length, Arrays.toString(parts));
        assertEquals(8, parts[0].start, "start");
        assertEquals(28, parts[0].end, "ends before the uncommitted slot at 28");
        assertFalse(parts[0].skipUncommitted, "a stopped range holds only settled slots");
        BusReaderFactory f = new BusReaderFactory(stop, stop.readSchema());
        assertEquals(List.of(priceRow(8, slots.get(0).getAsJsonObject().get("payload_hex").getAsString())),
                read(f, parts, false));

        BusOptions wait = options(path, "layout", "PriceUpdate", "recordsPerPartition", "10",
                "uncommitted", "wait", "timeoutMs", "30");
        long t0 = System.nanoTime();
        parts = partitions(plan(wait));
        assertTrue(System.nanoTime() - t0 >= 30_000_000L, "planning waited timeoutMs for the slot to commit");
        assertEquals(1, parts.length, Arrays.toString(parts));
        assertEquals(68, parts[0].end, "the read goes on past the skipped slot to the limit");
        assertTrue(parts[0].skipUncommitted, "the range holds a slot left uncommitted");
        List<String> expected = List.of(
                priceRow(8, slots.get(0).getAsJsonObject().get("payload_hex").getAsString()),
                priceRow(48, slots.get(2).getAsJsonObject().get("payload_hex").getAsString()));
        BusReaderFactory fw = new BusReaderFactory(wait, wait.readSchema());
        assertEquals(expected, read(fw, parts, false), "row reader");
        assertEquals(expected, read(fw, parts, true), "columnar reader");
        assertEquals(0, Fixtures.HEX.formatHex(java.nio.file.Files.readAllBytes(Path.of(path))).compareTo(
                Fixtures.HEX.formatHex(java.nio.file.Files.readAllBytes(Fixtures.goldenDir().resolve("uncommitted-r12.bus")))),
                "a batch read never writes (no rollback)");
    }

    /** Golden rollback-r12.bus: the rolled-back slot is inside the range and skipped by the readers. */
    /**
     * Issue 33: with uncommitted=wait, a slot whose writer is alive (here a writer of this JVM, stopped between its
     * reservation and its commit; its claim is in the writers file) is waited for past timeoutMs, never skipped, and
     * read once committed. A dead writer's batch: tests/spark/test_writer_liveness.py (a SIGKILLed process).
     */
    @Test
    public void waitPlanningWaitsForALiveWriterPastTheTimeout() throws Exception {
        org.junit.jupiter.api.Assumptions.assumeTrue(io.mappedbuspy.internal.Liveness.available(), "needs the JNI library");
        String path = tmp.resolve("live.bus").toString();
        java.util.concurrent.CountDownLatch inWrite = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        io.mappedbuspy.MappedBusMessage slow = new io.mappedbuspy.MappedBusMessage() {
            @Override
            public void write(MemoryMappedFile mem, long pos) {
                inWrite.countDown();
                try {
                    release.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                mem.putBytes(pos, new byte[] {7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 0, 12);
            }

            @Override
            public void read(MemoryMappedFile mem, long pos) {
            }

            @Override
            public int type() {
                return 0;
            }
        };
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 12).open()) {
            Thread writer = new Thread(() -> {
                try {
                    w.write(slow);
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            writer.start();
            assertTrue(inWrite.await(10, java.util.concurrent.TimeUnit.SECONDS), "the writer reserved its slot");
            BusOptions o = options(path, "layout", "PriceUpdate", "uncommitted", "wait", "timeoutMs", "20",
                    "numPartitions", "1");
            java.util.concurrent.CompletableFuture<InputPartition[]> planned =
                    java.util.concurrent.CompletableFuture.supplyAsync(() -> plan(o));
            Thread.sleep(300); // 15 timeouts
            assertFalse(planned.isDone(), "still waiting for the live writer, not skipped after 20 ms");
            release.countDown();
            writer.join(10_000);
            BusPartition[] parts = partitions(planned.get(10, java.util.concurrent.TimeUnit.SECONDS));
            assertEquals(1, parts.length);
            assertEquals(8 + Layout.slotSize(12), parts[0].end, "the committed record is in the read");
            assertFalse(parts[0].skipUncommitted, "nothing was skipped");
            BusReaderFactory f = new BusReaderFactory(o, o.readSchema());
            assertEquals(1, read(f, parts, false).size());
        }
    }

    @Test
    public void rolledBackSlotsArePlannedAndSkipped() throws Exception {
        String path = Fixtures.golden(tmp, "rollback-r12.bus");
        var slots = Fixtures.manifest("rollback-r12.bus").getAsJsonArray("slots");
        BusOptions o = options(path, "layout", "PriceUpdate", "numPartitions", "1");
        BusPartition[] parts = partitions(plan(o));
        assertEquals(1, parts.length);
        assertEquals(8, parts[0].start);
        assertEquals(68, parts[0].end, "up to the limit");
        List<String> expected = List.of(
                priceRow(8, slots.get(0).getAsJsonObject().get("payload_hex").getAsString()),
                priceRow(48, slots.get(2).getAsJsonObject().get("payload_hex").getAsString()));
        BusReaderFactory f = new BusReaderFactory(o, o.readSchema());
        assertEquals(expected, read(f, parts, false), "row reader");
        assertEquals(expected, read(f, parts, true), "columnar reader");
    }

    /** Golden full-r16.bus: its limit (104) is past its logical end (80); only the 3 slots that fit are planned. */
    @Test
    public void nothingPastTheEndOfTheFileIsPlanned() throws Exception {
        String path = Fixtures.golden(tmp, "full-r16.bus");
        BusOptions o = options(path, "recordSize", "16", "fileSize", "80", "recordsPerPartition", "2");
        BusPartition[] parts = partitions(plan(o));
        assertEquals(2, parts.length, Arrays.toString(parts));
        assertEquals(8, parts[0].start);
        assertEquals(56, parts[0].end, "2 records per partition");
        assertEquals(80, parts[1].end, "the last slot that fits ends at the logical size");
        BusReaderFactory f = new BusReaderFactory(o, o.readSchema());
        assertEquals(3, read(f, parts, true).size(), "three records");
    }

    /** An empty bus, and a bus whose first slot is uncommitted, plan no partition. */
    @Test
    public void nothingSettledPlansNoPartition() throws Exception {
        String path = tmp.resolve("empty.bus").toString();
        new MappedBusWriter(path, 4096, 8).open().close();
        assertEquals(0, plan(options(path, "recordSize", "8", "numPartitions", "4")).length, "empty bus");
        try (MemoryMappedFile m = new MemoryMappedFile(path, 4096)) {
            m.compareAndSetLong(Layout.LIMIT_OFFSET, 0, 8);
            m.getAndAddLong(Layout.LIMIT_OFFSET, Layout.slotSize(8)); // allocated, never committed
        }
        assertEquals(0, plan(options(path, "recordSize", "8", "numPartitions", "4")).length, "first slot hangs");
    }

    static Stream<String> seeds() {
        return Fixtures.seeds(200);
    }

    /**
     * Any mix of committed, rolled-back and uncommitted slots at any record size, with any partition sizes:
     * the partitions tile the settled range in order, and both readers return exactly its committed records.
     */
    @ParameterizedTest(name = "seed={0}")
    @MethodSource("seeds")
    public void partitionsTileTheSettledRangeAndReadersReturnItsCommittedRecords(String seed) throws Exception {
        SplittableRandom r = Fixtures.random(seed);
        int rs = r.nextInt(1, 65);
        long slot = Layout.slotSize(rs);
        int n = r.nextInt(0, 60);
        // Sometimes the file is too small for every slot allocated: the limit runs past its end.
        long capacity = r.nextInt(5) == 0 ? r.nextLong(1, n + 2) : n + 1;
        long fileSize = Math.max(16 + rs, 8 + capacity * slot + r.nextLong(0, slot));
        capacity = (fileSize - 8) / slot;
        boolean wait = r.nextBoolean();
        String path = tmp.resolve("plan.bus").toString();
        List<String> committed = new ArrayList<>(); // the expected rows
        long firstUncommitted = -1;
        boolean skippedInside = false;
        new MappedBusWriter(path, fileSize, rs).open().close(); // a bus with its metadata; slots made below
        try (MemoryMappedFile m = new MemoryMappedFile(path, fileSize)) {
            m.compareAndSetLong(Layout.LIMIT_OFFSET, 0, Layout.FIRST_RECORD_OFFSET);
            for (int k = 0; k < n; k++) {
                byte[] payload = new byte[rs];
                r.nextBytes(payload);
                int meta = r.nextInt(-3, 1000);
                int status = r.nextInt(10) < 6 ? 1 : r.nextBoolean() ? 2 : 0;
                long pos = m.getAndAddLong(Layout.LIMIT_OFFSET, slot);
                if (k >= capacity) {
                    continue; // a write that found the bus full
                }
                m.putInt(pos + Layout.METADATA_OFFSET, meta);
                m.putBytes(pos + Layout.PAYLOAD_OFFSET, payload, 0, rs);
                if (status != 0) {
                    assertTrue(m.casStatus(pos, 0, status), "status");
                } else if (firstUncommitted < 0) {
                    firstUncommitted = pos;
                }
                if (status == 0 && wait) {
                    skippedInside = true;
                }
                if (status == 1 && (wait || firstUncommitted < 0)) {
                    committed.add("position=" + pos + ",meta=" + meta + ",payload=" + Fixtures.HEX.formatHex(payload));
                }
            }
        }
        long settledEnd = !wait && firstUncommitted >= 0 ? firstUncommitted : 8 + Math.min(n, capacity) * slot;
        long per = r.nextInt(1, 12);
        boolean byCount = r.nextBoolean();
        String batch = Integer.toString(r.nextInt(1, 9));
        BusOptions o = byCount
                ? options(path, "recordSize", "" + rs, "fileSize", "" + fileSize, "numPartitions", "" + per,
                        "uncommitted", wait ? "wait" : "stop", "timeoutMs", "10", "batchSize", batch)
                : options(path, "recordSize", "" + rs, "fileSize", "" + fileSize, "recordsPerPartition", "" + per,
                        "uncommitted", wait ? "wait" : "stop", "timeoutMs", "10", "batchSize", batch);
        BusPartition[] parts = partitions(plan(o));
        long at = 8;
        for (BusPartition p : parts) {
            assertEquals(at, p.start, "partitions follow each other: " + Arrays.toString(parts));
            assertTrue(p.end > p.start && (p.end - p.start) % slot == 0, "a whole number of slots: " + p);
            if (!byCount) {
                assertTrue(p.records() <= per, p + " holds more than recordsPerPartition " + per);
            }
            assertEquals(skippedInside, p.skipUncommitted, "skipUncommitted of " + p);
            at = p.end;
        }
        assertEquals(settledEnd, at, "the planned range ends at the settled end: " + Arrays.toString(parts));
        if (byCount) {
            assertTrue(parts.length <= per, parts.length + " partitions for numPartitions " + per);
        }
        BusReaderFactory f = new BusReaderFactory(o, o.readSchema());
        assertEquals(committed, read(f, parts, false), "row reader");
        assertEquals(committed, read(f, parts, true), "columnar reader");
    }

    /**
     * A rolling bus over several segments: every partition is a range of one segment file, positions are
     * global ({@code segment * segmentSize + offset}), and the rows are every record in order.
     */
    @Test
    public void rollingPartitionsNeverSpanSegments() throws Exception {
        String dir = tmp.resolve("rolling").toString();
        int rs = 12;
        long segmentSize = 1024; // 50 slots of 20 bytes
        int n = 180;
        try (RollingBusWriter w = new RollingBusWriter(dir, segmentSize, rs).open()) {
            for (int i = 0; i < n; i++) {
                w.write(new Fixtures.Raw(0, String.format("%08x%08x%08x", i, i, i)));
            }
        }
        BusOptions o = options(dir, "layout", "PriceUpdate", "recordsPerPartition", "40");
        BusPartition[] parts = partitions(plan(o));
        RollingDir bus = RollingDir.open(dir, false);
        long[] segments = bus.segments();
        // 180 records of 50 a segment fill three and 30 slots of a fourth, past its middle: the writer that took
        // the trigger made the spare (docs/files-and-rolling.md, "Spare segment"), which holds no record.
        assertEquals(5, segments.length, "four segments with records and the spare");
        for (BusPartition p : parts) {
            long k = p.base / segmentSize;
            assertEquals(k * segmentSize, p.base, "base of " + p);
            assertEquals(bus.segmentPath(k).toString(), p.path, "a partition reads one segment file");
            assertTrue(p.start >= 8 && p.end <= RollingLayout.endBoundary(segmentSize, rs) && p.records() <= 40,
                    p.toString());
        }
        assertEquals(2 + 2 + 2 + 1, parts.length, "50 slots per segment in ranges of 40, 30 in the last");
        BusReaderFactory f = new BusReaderFactory(o, o.readSchema());
        List<String> rows = read(f, parts, true);
        assertEquals(read(f, parts, false), rows, "row and columnar readers agree");
        assertEquals(n, rows.size());
        for (int i = 0; i < n; i++) {
            long pos = (i / 50) * segmentSize + 8 + (i % 50) * 20L;
            int v = Integer.reverseBytes(i);
            assertEquals("position=" + pos + ",meta=0,source=" + v + ",price=" + v + ",quantity=" + v, rows.get(i));
        }
    }

    /** uncommitted=stop ends a rolling read at the first uncommitted slot, whatever segment it is in. */
    @Test
    public void anUncommittedSlotEndsARollingReadInItsSegment() throws Exception {
        String dir = tmp.resolve("rolling-hung").toString();
        long segmentSize = 1024;
        try (RollingBusWriter w = new RollingBusWriter(dir, segmentSize, 12).open()) {
            for (int i = 0; i < 150; i++) {
                w.write(new byte[12], 0, 12);
            }
        }
        BusOptions o = options(dir, "recordSize", "12", "recordsPerPartition", "1000");
        RollingDir bus = RollingDir.open(dir, false);
        long hung = 8 + 7 * 20; // record 57: segment 1, slot 7
        try (MemoryMappedFile m = new MemoryMappedFile(bus.segmentPath(1).toString(), segmentSize)) {
            assertTrue(m.casStatus(hung, 1, 0), "made uncommitted");
        }
        BusPartition[] parts = partitions(plan(o));
        assertEquals(2, parts.length, Arrays.toString(parts));
        assertEquals(bus.segmentPath(0).toString(), parts[0].path);
        assertEquals(RollingLayout.endBoundary(segmentSize, 12), parts[0].end, "segment 0 whole");
        assertEquals(bus.segmentPath(1).toString(), parts[1].path);
        assertEquals(hung, parts[1].end, "segment 1 up to the uncommitted slot; segment 2 not read");
        BusOptions wait = options(dir, "recordSize", "12", "recordsPerPartition", "1000", "uncommitted", "wait",
                "timeoutMs", "10");
        BusPartition[] all = partitions(plan(wait));
        assertEquals(3, all.length, Arrays.toString(all));
        BusReaderFactory f = new BusReaderFactory(wait, wait.readSchema());
        assertEquals(149, read(f, all, false).size(), "all but the uncommitted record");
    }
}
