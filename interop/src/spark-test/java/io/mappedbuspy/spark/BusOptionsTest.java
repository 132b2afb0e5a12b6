package io.mappedbuspy.spark;

import io.mappedbuspy.MappedBusWriter;
import io.mappedbuspy.RollingBusWriter;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Option parsing (interop/src/spark/README.md, Options): defaults, every option, and every refusal. */
public final class BusOptionsTest {
    @TempDir
    static Path shared;

    /**
     * A single-file bus (recordSize 12, fileSize 4096, sizes in its metadata), a file without metadata (as the
     * Java original makes: every size comes from the options) and a rolling bus (recordSize 8, segmentSize 4096).
     */
    private static String single;
    private static String legacy;
    private static String rolling;

    private static synchronized void makeBuses() throws IOException {
        if (single == null) {
            single = shared.resolve("single.bus").toString();
            new MappedBusWriter(single, 4096, 12).open().close();
            legacy = shared.resolve("legacy-single.bus").toString();
            new MappedBusWriter(legacy, 4096, 12).open().close();
            Files.delete(io.mappedbuspy.internal.BusMeta.metaPath(legacy));
            rolling = shared.resolve("rolling").toString();
            new RollingBusWriter(rolling, 4096, 8).open().close();
        }
    }

    /** Options from "key=value" pairs; "$single", "$legacy", "$rolling", "$dir" and "$missing" stand for paths. */
    private static Map<String, String> opts(String... kv) throws IOException {
        makeBuses();
        Map<String, String> m = new HashMap<>();
        for (String p : kv) {
            int eq = p.indexOf('=');
            m.put(p.substring(0, eq), p.substring(eq + 1).replace("$single", single).replace("$legacy", legacy)
                    .replace("$rolling", rolling)
                    .replace("$dir", shared.toString()).replace("$missing", shared.resolve("missing.bus").toString()));
        }
        return m;
    }

    /** Option topics: a framed bus's, names separated by commas (trimmed, each once); refused elsewhere. */
    @Test
    public void topicsAreAFramedBussNames() throws Exception {
        String framed = shared.resolve("framed.bus").toString();
        new MappedBusWriter(framed, 4096, 16).setFrames(true).open().close();
        assertNull(BusOptions.parse(opts("path=" + framed)).topics, "every message");
        assertEquals(java.util.List.of("quotes", "orders"), java.util.List.of(
                BusOptions.parse(opts("path=" + framed, "Topics=quotes, orders,quotes")).topics));
        assertTrue(BusOptions.parse(opts("path=" + framed)).topicsFile().endsWith("framed.bus.topics"));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> BusOptions.parse(opts("path=" + framed, "topics=a,,b")));
        assertTrue(e.getMessage().contains("empty topic"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> BusOptions.parse(opts("path=$single", "topics=a")));
        assertTrue(e.getMessage().contains("not one"), e.getMessage());
    }

    /** Without options other than path and recordSize, every default is the README's. */
    @Test
    public void defaultsAreTheDocumentedOnes() throws Exception {
        BusOptions o = BusOptions.parse(opts("path=$single", "recordSize=12"));
        assertEquals(12, o.recordSize, "recordSize");
        assertEquals(-1, o.fileSize, "fileSize: the file's length");
        assertNull(o.layout, "layout: raw");
        assertFalse(o.trimPayload, "trimPayload");
        assertEquals(-1, o.numPartitions, "numPartitions: defaultParallelism");
        assertEquals(-1, o.recordsPerPartition, "recordsPerPartition");
        assertTrue(o.columnar, "columnar");
        assertEquals(4096, o.batchSize, "batchSize");
        assertFalse(o.waitUncommitted, "uncommitted: stop");
        assertEquals(2000, o.timeoutMs, "timeoutMs");
        assertEquals("earliest", o.startingPosition, "startingPosition");
        assertEquals(-1, o.maxRecordsPerTrigger, "maxRecordsPerTrigger: none");
        assertTrue(o.checkHost, "checkHost");
        assertFalse(o.rolling, "a file is not a rolling bus");
        assertEquals(4096, o.resolveFileSize(true), "fileSize from the bus's metadata");
    }

    /** Every option is read, with names in any case. */
    @Test
    public void everyOptionIsReadCaseInsensitively() throws Exception {
        BusOptions o = BusOptions.parse(opts("PATH=$legacy", "recordsize=24", "FileSize=8192", "layout=Trade",
                "typeId=5", "trimPayload=TRUE", "numPartitions=3", "recordsPerPartition=100", "columnar=false",
                "batchSize=10", "uncommitted=Wait", "timeoutMs=10", "startingPosition=40",
                "maxRecordsPerTrigger=7", "checkHost=false"));
        assertEquals(24, o.recordSize, "recordSize");
        assertEquals(8192, o.fileSize, "fileSize");
        assertEquals("Trade", o.layout.name(), "layout");
        assertEquals(2, o.layout.typeId(), "a named layout keeps its type id");
        assertTrue(o.trimPayload, "trimPayload");
        assertEquals(3, o.numPartitions, "numPartitions");
        assertEquals(100, o.recordsPerPartition, "recordsPerPartition");
        assertFalse(o.columnar, "columnar");
        assertEquals(10, o.batchSize, "batchSize");
        assertTrue(o.waitUncommitted, "uncommitted");
        assertEquals(10, o.timeoutMs, "timeoutMs: the shortest rollback timeout");
        assertEquals("40", o.startingPosition, "startingPosition 8 + 1 * 32");
        assertEquals(7, o.maxRecordsPerTrigger, "maxRecordsPerTrigger");
        assertFalse(o.checkHost, "checkHost");
        assertEquals(5, BusOptions.parse(opts("path=$single", "layout=a:int32", "typeId=5")).layout.typeId(),
                "typeId of a field list");
    }

    /**
     * A bus's sizes come from its metadata (PATH.meta, or a rolling bus's bus.meta); for a file without any,
     * recordSize defaults to the layout's size.
     */
    @Test
    public void sizesComeFromTheMetadataOrTheLayout() throws Exception {
        assertEquals(20, BusOptions.parse(opts("path=$legacy", "layout=Trade")).recordSize, "Trade's size");
        assertEquals(12, BusOptions.parse(opts("path=$single")).recordSize, "recordSize from PATH.meta");
        assertEquals(12, BusOptions.parse(opts("path=$single", "layout=a:int32")).recordSize,
                "recordSize from PATH.meta, not the narrower layout's");
        BusOptions r = BusOptions.parse(opts("path=$rolling"));
        assertTrue(r.rolling, "rolling");
        assertEquals(8, r.recordSize, "recordSize from bus.meta");
        assertEquals(4096, r.segmentSize, "segmentSize from bus.meta");
        assertEquals(4096 + 8 + 16, Long.parseLong(BusOptions.parse(opts("path=$rolling",
                "startingPosition=4120")).startingPosition), "a position in segment 1");
    }

    /**
     * On a rolling bus whose records fill a segment to its last byte (8 + 256 slots of 16 = 4104), the end of
     * segment 0 is position 4104, a position as readers report it (RollingLayout.locate), not offset 0 of segment 1;
     * positions are checked on the grid of their segment.
     */
    @Test
    public void positionsOfAnExactlyFilledSegmentAreChecked() throws Exception {
        String exact = shared.resolve("rolling-exact").toString();
        if (!Files.exists(shared.resolve("rolling-exact"))) {
            new RollingBusWriter(exact, 4104, 8).open().close();
        }
        assertEquals("4104", BusOptions.parse(opts("path=" + exact, "startingPosition=4104")).startingPosition,
                "the end of segment 0");
        assertEquals("4112", BusOptions.parse(opts("path=" + exact, "endingPosition=4112")).endingPosition,
                "the first record of segment 1");
        for (String bad : new String[] {"0", "4", "4105", "4120"}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> BusOptions.parse(opts("path=" + exact, "startingPosition=" + bad)), bad);
            assertTrue(e.getMessage().contains("got '" + bad + "'"), e.getMessage());
        }
    }

    /**
     * The rolling-bus options: segmentSize makes a directory without bus.meta a rolling bus to create and must match
     * an existing one's; retainSegments/retainBytes/retainAgeMs are read (0: no limit); failOnDataLoss defaults to
     * true, as Kafka's.
     */
    @Test
    public void rollingBusAndDataLossOptionsAreRead() throws Exception {
        BusOptions fresh = BusOptions.parse(opts("path=$dir/new-rolling", "recordSize=8", "segmentSize=65536",
                "retainSegments=3", "retainBytes=1048576", "retainAgeMs=60000", "failOnDataLoss=false"));
        assertTrue(fresh.rolling, "segmentSize makes a rolling bus");
        assertEquals(65536, fresh.segmentSize, "segmentSize");
        assertEquals(3, fresh.retainSegments, "retainSegments");
        assertEquals(1048576, fresh.retainBytes, "retainBytes");
        assertEquals(60000, fresh.retainAgeMs, "retainAgeMs");
        assertFalse(fresh.failOnDataLoss, "failOnDataLoss");
        BusOptions dflt = BusOptions.parse(opts("path=$rolling"));
        assertTrue(dflt.failOnDataLoss, "failOnDataLoss defaults to true");
        assertEquals(0, dflt.retainSegments + dflt.retainBytes + dflt.retainAgeMs, "no retention by default");
        assertEquals(4096, BusOptions.parse(opts("path=$rolling", "segmentSize=4096")).segmentSize, "a matching size");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> BusOptions.parse(opts("path=$rolling", "segmentSize=8192")));
        assertTrue(e.getMessage().contains("segmentSize 8192 differs from segmentSize 4096"), e.getMessage());
    }

    /** The read schema: position, meta, then payload or the layout's columns. */
    @Test
    public void readSchemaIsPositionMetaThenPayloadOrFields() throws Exception {
        StructType raw = BusOptions.parse(opts("path=$single", "recordSize=12")).readSchema();
        assertEquals("struct<position:bigint,meta:int,payload:binary>", raw.simpleString());
        StructType typed = BusOptions.parse(opts("path=$single", "layout=PriceUpdate")).readSchema();
        assertEquals("struct<position:bigint,meta:int,source:int,price:int,quantity:int>", typed.simpleString());
        assertEquals(DataTypes.LongType, typed.apply("position").dataType(), "position");
    }

    static Stream<Arguments> refusals() {
        return Stream.of(
            Arguments.of(List.of("recordSize=12"), "option 'path' (the bus file) is required"),
            Arguments.of(List.of("path=", "recordSize=12"), "option 'path' (the bus file) is required"),
            Arguments.of(List.of("path=$legacy"), "option 'recordSize' is required"),
            Arguments.of(List.of("path=$missing"), "option 'recordSize' is required"),
            Arguments.of(List.of("path=$single", "recordSize=24"), "option recordSize 24 differs from record_size 12 in "),
            Arguments.of(List.of("path=$single", "fileSize=8192"), "option fileSize 8192 differs from file_size 4096 in "),
            Arguments.of(List.of("path=$single", "layout=Trade"), "needs 20 payload bytes but recordSize is 12"),
            Arguments.of(List.of("path=$single", "recordSize=0"), "option 'recordsize' must be >= 1, got 0"),
            Arguments.of(List.of("path=$single", "recordSize=twelve"), "option 'recordsize' must be an integer, got 'twelve'"),
            Arguments.of(List.of("path=$single", "recordSize=4294967296"), "option 'recordsize' is too large"),
            Arguments.of(List.of("path=$single", "recordSize=12", "fileSize=27"), "option 'filesize' must be >= 28"),
            Arguments.of(List.of("path=$legacy", "recordSize=8", "layout=Trade"), "needs 20 payload bytes but recordSize is 8"),
            Arguments.of(List.of("path=$single", "layout=Quote"), "neither a known message"),
            Arguments.of(List.of("path=$single", "layout=a:int32", "typeId=x"), "option 'typeid' must be an integer"),
            Arguments.of(List.of("path=$single", "recordSize=12", "trimPayload=yes"), "option 'trimpayload' must be true or false, got 'yes'"),
            Arguments.of(List.of("path=$single", "recordSize=12", "columnar=1"), "option 'columnar' must be true or false"),
            Arguments.of(List.of("path=$single", "recordSize=12", "checkHost=no"), "option 'checkhost' must be true or false"),
            Arguments.of(List.of("path=$single", "recordSize=12", "numPartitions=0"), "option 'numpartitions' must be >= 1"),
            Arguments.of(List.of("path=$single", "recordSize=12", "recordsPerPartition=0"), "option 'recordsperpartition' must be >= 1"),
            Arguments.of(List.of("path=$single", "recordSize=12", "batchSize=0"), "option 'batchsize' must be >= 1"),
            Arguments.of(List.of("path=$single", "recordSize=12", "timeoutMs=-1"), "option 'timeoutMs' is the rollback "
                    + "timeout: how long a slot may stay uncommitted before readers roll it back"),
            Arguments.of(List.of("path=$single", "timeoutMs=0"), "must be at least 10 ms, got 0"),
            Arguments.of(List.of("path=$single", "timeoutMs=9"), "must be at least 10 ms, got 9"),
            Arguments.of(List.of("path=$single", "recordSize=12", "maxRecordsPerTrigger=0"), "option 'maxrecordspertrigger' must be >= 1"),
            Arguments.of(List.of("path=$single", "recordSize=12", "uncommitted=skip"), "option 'uncommitted' must be stop or wait, got 'skip'"),
            Arguments.of(List.of("path=$single", "recordSize=12", "startingPosition=first"), "startingPosition must be earliest, latest or a record offset (8 + k * 20)"),
            Arguments.of(List.of("path=$single", "recordSize=12", "startingPosition=9"), "got '9'"),
            Arguments.of(List.of("path=$single", "recordSize=12", "startingPosition=-12"), "got '-12'"),
            Arguments.of(List.of("path=$dir", "recordSize=12"), "is a directory without bus.meta: not a rolling bus"),
            Arguments.of(List.of("path=$rolling", "recordSize=12"), "option recordSize 12 differs from recordSize 8 of rolling bus"),
            Arguments.of(List.of("path=$rolling", "segmentSize=8192"), "option segmentSize 8192 differs from segmentSize 4096"),
            Arguments.of(List.of("path=$rolling", "fileSize=4096"), "option 'fileSize' does not apply"),
            Arguments.of(List.of("path=$rolling", "startingPosition=4100"), "record position (segment * 4096 + 8 + k * 16)"),
            Arguments.of(List.of("path=$rolling", "retainSegments=-1"), "option 'retainsegments' must be >= 0")
        );
    }

    /** Each bad or missing option is refused at parse time, naming the option and the value. */
    @ParameterizedTest(name = "{0}")
    @MethodSource("refusals")
    public void badOptionsAreRefusedNamingTheProblem(List<String> kv, String problem) throws Exception {
        Map<String, String> o = opts(kv.toArray(new String[0]));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> BusOptions.parse(o));
        assertTrue(e.getMessage().contains(problem), () -> "expected <" + problem + "> in: " + e.getMessage());
    }

    /** A read of a missing file, or a write without a known size, is refused naming the file. */
    @Test
    public void fileSizeMustBeKnownToWrite() throws Exception {
        BusOptions missing = BusOptions.parse(opts("path=$missing", "recordSize=12"));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> missing.resolveFileSize(true));
        assertTrue(e.getMessage().contains("missing.bus does not exist (give option 'fileSize'"), e.getMessage());
        assertEquals(-1, missing.resolveFileSize(false), "an optional size of a missing file");
        Path legacy = shared.resolve("legacy.bus");
        Files.write(legacy, new byte[5000]); // a file without metadata: its length is not its logical size
        BusOptions noMeta = BusOptions.parse(opts("path=" + legacy, "recordSize=12"));
        e = assertThrows(IllegalArgumentException.class, noMeta::writeFileSize);
        assertTrue(e.getMessage().contains("has no metadata"), e.getMessage());
        assertEquals(5000, noMeta.resolveFileSize(true), "a read uses the length");
        assertEquals(4096, BusOptions.parse(opts("path=$single", "recordSize=12")).writeFileSize(),
                "a write takes the size from the metadata");
    }
}
