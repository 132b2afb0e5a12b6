package io.mappedbuspy.spark;

import io.mappedbuspy.MappedBusReader;
import io.mappedbuspy.MappedBusWriter;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What needs Spark itself: {@code format("mappedbus")} found through its service file, the schema Spark
 * sees, a position filter that reaches the scan, and a write through Spark's write path. One local
 * session for the class (starting one costs seconds).
 */
public final class SparkSessionTest {
    @TempDir
    static Path tmp;
    private static SparkSession spark;

    /** Python {@code Trade(...).to_bytes().hex()} for the rows of {@link #TRADES} (see BusReadersTest). */
    private static final String[] TRADE_BYTES = {
        "fdfffffffffeffff00000000004a93c0ffffff7f", "ffffffffffffff7f9a9999999999b93ffeffffff"};
    private static final Object[][] TRADES = {{-(1L << 40) - 3, -1234.5, Integer.MAX_VALUE}, {Long.MAX_VALUE, 0.1, -2}};

    @BeforeAll
    @Timeout(value = 5, unit = TimeUnit.MINUTES)
    static void startSpark() {
        spark = SparkSession.builder().master("local[1]").appName("mappedbus-junit")
                .config("spark.ui.enabled", "false")
                .config("spark.sql.shuffle.partitions", "1")
                .config("spark.ui.showConsoleProgress", "false")
                .getOrCreate();
    }

    @AfterAll
    static void stopSpark() {
        if (spark != null) {
            spark.stop();
        }
    }

    private static List<String> rows(Dataset<Row> df) {
        List<String> out = new ArrayList<>();
        for (Row r : df.collectAsList()) {
            out.add(r.toString());
        }
        return out;
    }

    /** A batch read with a layout has the documented columns and the values the Python messages hold. */
    @Test
    public void batchReadWithALayoutGivesTypedRows() throws Exception {
        String path = tmp.resolve("trades.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 20).open()) {
            for (String hex : TRADE_BYTES) {
                w.write(new Fixtures.Raw(2, hex));
            }
        }
        Dataset<Row> df = spark.read().format("mappedbus").option("path", path).option("layout", "Trade").load();
        assertEquals("struct<position:bigint,meta:int,id:bigint,price:double,quantity:int>",
                df.schema().simpleString(), "schema");
        assertEquals(List.of("[8,2,-1099511627779,-1234.5,2147483647]", "[36,2,9223372036854775807,0.1,-2]"),
                rows(df.orderBy("position")));
    }

    /** A position range reaches the scan (only those slots are planned) and gives exactly those rows. */
    @Test
    public void positionFiltersArePushedIntoTheScan() throws Exception {
        String path = tmp.resolve("bytes.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 1 << 16, 4).open()) {
            for (int i = 0; i < 200; i++) {
                w.write(new byte[] {(byte) i}, 0, 1);
            }
        }
        // Slots of 12 bytes: records 50..59 are at positions 608..716.
        Dataset<Row> df = spark.read().format("mappedbus").option("path", path).option("recordSize", "4")
                .option("trimPayload", "true").load()
                .filter("position >= 608 AND position < 720").select("position", "payload");
        String plan = df.queryExecution().executedPlan().toString();
        assertTrue(plan.contains("positions=[608, 720)"), "the scan's range in the plan:\n" + plan);
        List<Row> got = df.orderBy("position").collectAsList();
        assertEquals(10, got.size(), got.toString());
        for (int k = 0; k < 10; k++) {
            assertEquals(608L + 12L * k, got.get(k).getLong(0), "position");
            assertEquals(50 + k, ((byte[]) got.get(k).get(1))[0], "payload");
        }
    }

    /**
     * A DataFrame appended through Spark becomes records any bus reader reads, with the bytes the Python
     * Trade message has, and reads back through Spark as the same rows.
     */
    @Test
    public void writtenRowsAreTheMessageBytesAndReadBack() throws Exception {
        String path = tmp.resolve("written.bus").toString();
        List<Row> in = new ArrayList<>();
        for (Object[] t : TRADES) {
            in.add(RowFactory.create(t));
        }
        StructType schema = StructType.fromDDL("id BIGINT, price DOUBLE, quantity INT");
        spark.createDataFrame(in, schema).coalesce(1).write().format("mappedbus").mode("append")
                .option("path", path).option("fileSize", "4096").option("layout", "Trade").save();
        List<String> bytes = new ArrayList<>();
        try (MappedBusReader r = new MappedBusReader(path, 4096, 20, true).open()) {
            byte[] b = new byte[20];
            while (r.next()) {
                assertEquals(2, r.readType(), "Trade's type id");
                bytes.add(Fixtures.HEX.formatHex(rawPayload(path, r.recordPosition(), b)));
            }
        }
        assertEquals(List.of(TRADE_BYTES), bytes, "payload bytes");
        Dataset<Row> back = spark.read().format("mappedbus").option("path", path).option("layout", "Trade").load()
                .select("id", "price", "quantity");
        assertEquals(List.of("[-1099511627779,-1234.5,2147483647]", "[9223372036854775807,0.1,-2]"), rows(back));
    }

    private static byte[] rawPayload(String path, long position, byte[] into) throws Exception {
        try (java.nio.channels.FileChannel ch = java.nio.channels.FileChannel.open(Path.of(path))) {
            ch.read(java.nio.ByteBuffer.wrap(into), position + io.mappedbuspy.Layout.PAYLOAD_OFFSET);
        }
        return into;
    }
}
