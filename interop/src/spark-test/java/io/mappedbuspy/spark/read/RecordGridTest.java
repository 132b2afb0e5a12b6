package io.mappedbuspy.spark.read;

import io.mappedbuspy.internal.BusMeta;
import io.mappedbuspy.CorruptBusException;
import io.mappedbuspy.Layout;
import io.mappedbuspy.MappedBusWriter;
import io.mappedbuspy.internal.MemoryMappedFile;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static io.mappedbuspy.spark.Fixtures.options;
import static io.mappedbuspy.spark.Fixtures.plan;
import static io.mappedbuspy.spark.Fixtures.read;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import io.mappedbuspy.spark.stream.BusMicroBatchStream;
import io.mappedbuspy.spark.BusOptions;
import io.mappedbuspy.spark.stream.BusRealTimePartition;
import io.mappedbuspy.spark.stream.BusRealTimeReader;
import io.mappedbuspy.spark.Fixtures;

/**
 * The record size a read uses is the bus's: from its metadata ({@code PATH.meta}) when it has one, so a layout
 * narrower than the records (PriceUpdate's 12 bytes in 32-byte records) reads every record; an option that
 * disagrees is refused. A file without metadata (as the Java original writes) is checked against the grid its
 * options give: a limit off the grid, a status other than 0, 1 or 2 (in the planned range, past an uncommitted
 * slot that ends the batch, or in a task, a micro-batch or Real-time Mode) and a byte-array length outside
 * 0..recordSize are {@link CorruptBusException}s, never a read that ends early without a word.
 */
public final class RecordGridTest {
    private static final long FILE_SIZE = 1 << 16;
    private static final int RECORDS = 40;

    @TempDir
    Path tmp;

    /** RECORDS PriceUpdates (source 7, price 100 + i, quantity 1000 + i) in records of {@code recordSize} bytes. */
    private String prices(String name, int recordSize) throws Exception {
        String path = tmp.resolve(name).toString();
        try (MappedBusWriter w = new MappedBusWriter(path, FILE_SIZE, recordSize).open()) {
            for (int i = 0; i < RECORDS; i++) {
                byte[] b = ByteBuffer.allocate(12).order(ByteOrder.LITTLE_ENDIAN).putInt(7).putInt(100 + i)
                        .putInt(1000 + i).array();
                w.write(new Fixtures.Raw(0, Fixtures.HEX.formatHex(b)));
            }
        }
        return path;
    }

    /** As the Java original leaves a bus: no metadata. */
    private String withoutMetadata(String path) throws Exception {
        Files.delete(BusMeta.metaPath(path));
        return path;
    }

    @ParameterizedTest(name = "columnar={0}")
    @ValueSource(booleans = {false, true})
    public void theLayoutAloneReadsEveryRecordOfAWiderBus(boolean columnar) throws Exception {
        String path = prices("wide.bus", 32);
        BusOptions o = options(path, "layout", "PriceUpdate", "recordsPerPartition", "16");
        assertEquals(32, o.recordSize, "from " + path + ".meta");
        assertEquals(FILE_SIZE, o.resolveFileSize(true), "from " + path + ".meta");
        List<String> rows = read(new BusReaderFactory(o, o.readSchema()), plan(o), columnar);
        assertEquals(RECORDS, rows.size(), rows.toString());
        for (int i = 0; i < RECORDS; i++) {
            assertEquals("position=" + (8 + 40 * i) + ",meta=0,source=7,price=" + (100 + i) + ",quantity="
                    + (1000 + i), rows.get(i));
        }
        BusScan count = new BusScan(o, new StructType().add("count", "bigint"));
        assertEquals(RECORDS, count.count(), "count(*) answered at planning");
    }

    @Test
    public void sizesThatDisagreeWithTheMetadataAreRefusedNamingBoth() throws Exception {
        String path = prices("wide.bus", 32);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> options(path, "layout", "PriceUpdate", "recordSize", "12"));
        assertTrue(e.getMessage().contains("option recordSize 12 differs from record_size 32 in " + path + ".meta"),
                e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> options(path, "recordSize", "32", "fileSize", "4096"));
        assertTrue(e.getMessage().contains("option fileSize 4096 differs from file_size " + FILE_SIZE + " in "
                + path + ".meta"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> options(path, "layout", "a:bytes33"));
        assertTrue(e.getMessage().contains("needs 33 payload bytes but recordSize is 32"), e.getMessage());
        assertEquals(32, options(path, "recordSize", "32", "fileSize", "" + FILE_SIZE).recordSize, "the same sizes");
    }

    /** Metadata of another file (the bus was replaced by one without any) is not this file's: the options rule. */
    @Test
    public void metadataOfAnotherInodeIsIgnored() throws Exception {
        String path = prices("wide.bus", 32);
        Path p = Path.of(path);
        Path copy = tmp.resolve("copy.bus");
        Files.copy(p, copy);
        Files.move(copy, p, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        assertEquals(12, options(path, "layout", "PriceUpdate").recordSize, "the layout's size");
        assertEquals(24, options(path, "recordSize", "24").recordSize, "the option");
    }

    /**
     * 32-byte records read as 24 (slots of 32 bytes: the limit 8 + 40 * 40 is on that grid too). Slot 1 lands on
     * zero payload bytes, an "uncommitted" slot that ends the batch; slot 3 on a quantity (1002), which the
     * batch, looking past the slot that stopped it, reports.
     */
    @ParameterizedTest(name = "uncommitted={0}")
    @ValueSource(strings = {"stop", "wait"})
    public void aWrongRecordSizeWithoutMetadataIsCorruptionNotAShortRead(String uncommitted) throws Exception {
        String path = withoutMetadata(prices("legacy.bus", 32));
        BusOptions o = options(path, "layout", "PriceUpdate", "recordSize", "24", "fileSize", "" + FILE_SIZE,
                "recordsPerPartition", "16", "uncommitted", uncommitted, "timeoutMs", "10");
        UncheckedIOException e = assertThrows(UncheckedIOException.class, () -> plan(o));
        assertInstanceOf(CorruptBusException.class, e.getCause());
        assertTrue(e.getCause().getMessage().contains("record at position 104 in " + path + " has invalid status 1002 "
                + "(wrong recordSize 24"), e.getCause().getMessage());
        BusScan count = new BusScan(o, new StructType().add("count", "bigint"));
        assertThrows(UncheckedIOException.class, count::count, "count(*) too");
        // Off the grid (slots of 28 bytes): the limit tells at once.
        BusOptions off = options(path, "layout", "PriceUpdate", "recordSize", "20", "fileSize", "" + FILE_SIZE,
                "recordsPerPartition", "16");
        e = assertThrows(UncheckedIOException.class, () -> plan(off));
        assertTrue(e.getCause().getMessage().contains("limit 1608 in " + path + " is not on a record boundary for "
                + "recordSize 20"), e.getCause().getMessage());
    }

    /**
     * A status that turns invalid after planning (the file overwritten in place) fails the task that meets it,
     * in the row, columnar and count(*) readers alike.
     */
    @ParameterizedTest(name = "reader={0}")
    @ValueSource(strings = {"row", "columnar", "count"})
    public void aTaskThatMeetsAnInvalidStatusFails(String reader) throws Exception {
        String path = withoutMetadata(prices("legacy.bus", 12));
        BusOptions o = options(path, "layout", "PriceUpdate", "recordSize", "12", "fileSize", "" + FILE_SIZE,
                "numPartitions", "1");
        InputPartition[] parts = plan(o);
        long bad = Layout.recordOffset(17, 12);
        try (MemoryMappedFile m = new MemoryMappedFile(path, FILE_SIZE)) {
            m.putInt(bad, 0x01010101);
        }
        CorruptBusException e;
        if (reader.equals("count")) {
            BusReaderFactory f = new BusReaderFactory(o, new StructType().add("count", "bigint"));
            f.counts = 1;
            e = assertThrows(CorruptBusException.class, () -> {
                try (PartitionReader<?> r = f.createColumnarReader(parts[0])) {
                    r.next();
                }
            });
        } else {
            e = assertThrows(CorruptBusException.class,
                    () -> read(new BusReaderFactory(o, o.readSchema()), parts, reader.equals("columnar")));
        }
        assertTrue(e.getMessage().contains("record at position " + bad + " in " + path + " has invalid status "
                + 0x01010101 + " (wrong recordSize 12"), e.getMessage());
    }

    private static BusOptions streamOptions(String path, String... kv) {
        Map<String, String> m = new HashMap<>();
        m.put("path", path);
        m.put("recordSize", "24");
        m.put("fileSize", Long.toString(FILE_SIZE));
        m.put("timeoutMs", "10");
        m.put("checkHost", "false");
        for (int i = 0; i < kv.length; i += 2) {
            m.put(kv[i], kv[i + 1]);
        }
        return BusOptions.parse(new org.apache.spark.sql.util.CaseInsensitiveStringMap(m));
    }

    /** A micro-batch stream finds its batches' ends with a bus reader, which reports the invalid status. */
    @Test
    public void aMicroBatchStreamReportsTheInvalidStatus() throws Exception {
        String path = withoutMetadata(prices("legacy.bus", 32));
        BusOptions o = streamOptions(path, "layout", "PriceUpdate");
        BusMicroBatchStream s = new BusMicroBatchStream(o, new BusReaderFactory(o, o.readSchema()));
        try {
            UncheckedIOException e = assertThrows(UncheckedIOException.class, () -> {
                // Triggers, each from the last one's end: the slot of zeros at 40 is rolled back after 10 ms.
                org.apache.spark.sql.connector.read.streaming.Offset at = s.initialOffset();
                long deadline = System.nanoTime() + 10_000_000_000L;
                while (System.nanoTime() < deadline) {
                    at = s.latestOffset(at, org.apache.spark.sql.connector.read.streaming.ReadLimit.allAvailable());
                    Thread.sleep(5);
                }
            });
            assertInstanceOf(CorruptBusException.class, e.getCause());
            // refused when the source's reader opens (issue 33), before any record is read
            assertTrue(e.getMessage().contains("with recordSize 24 the record at 104 has status 1002"), e.getMessage());
            assertTrue(e.getMessage().contains("another recordSize"), e.getMessage());
        } finally {
            s.stop();
        }
    }

    /** Real-time Mode: the reader refuses a wrong record size at open and fails the batch on a byte-array length out of range. */
    @Test
    public void theRealTimeReaderReportsInvalidStatusesAndLengths() throws Exception {
        String path = withoutMetadata(prices("legacy.bus", 32));
        BusOptions o = streamOptions(path, "layout", "PriceUpdate");
        BusReaderFactory f = new BusReaderFactory(o, new StructType(
                o.layout.sparkFields().toArray(new org.apache.spark.sql.types.StructField[0])));
        try {
            // refused when the reader opens the bus (issue 33), before any record is delivered
            CorruptBusException e = assertThrows(CorruptBusException.class,
                    () -> BusRealTimeReader.open(f, new BusRealTimePartition(o, FILE_SIZE, 8, null, null, null)));
            assertTrue(e.getMessage().contains("with recordSize 24 the record at 104 has status 1002"), e.getMessage());
        } finally {
            BusRealTimeReader.closeParked(path);
        }
        String bytes = tmp.resolve("bytes.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(bytes, FILE_SIZE, 24).open()) {
            w.write(new byte[] {1, 2, 3}, 0, 3);
            w.write(new Fixtures.Raw(25, "00"));
        }
        BusOptions t = streamOptions(bytes, "trimPayload", "true");
        BusRealTimeReader tr = BusRealTimeReader.open(new BusReaderFactory(t, t.readSchema()),
                new BusRealTimePartition(t, FILE_SIZE, 8, null, null, null));
        try {
            assertTrue(tr.nextWithTimeout(System.currentTimeMillis(), 5_000L).hasRecord(), "a byte array");
            CorruptBusException e = assertThrows(CorruptBusException.class,
                    () -> tr.nextWithTimeout(System.currentTimeMillis(), 5_000L));
            assertTrue(e.getMessage().contains("record at position 40 in " + bytes + " has length 25 outside 0..24"),
                    e.getMessage());
        } finally {
            tr.close();
            BusRealTimeReader.closeParked(bytes);
        }
        assertFalse(BusRealTimeReader.parkedCount() > 0, "failed readers are closed, not parked");
    }
}
