package io.mappedbuspy.spark.read;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import io.mappedbuspy.MappedBusWriter;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

import static io.mappedbuspy.spark.Fixtures.options;
import static io.mappedbuspy.spark.Fixtures.plan;
import static io.mappedbuspy.spark.Fixtures.read;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import io.mappedbuspy.spark.BusOptions;
import io.mappedbuspy.spark.Fixtures;

/**
 * The row reader ({@code columnar=false}) and the columnar reader decode the bytes other processes write
 * (README "Columns"). Two kinds of fixture: payloads that the Python {@code Message} classes produced
 * ({@code to_bytes()}, pasted below as hex, generated with the command in {@link #pythonPayloads}) written
 * into a bus here with the Java writer; and the golden files the Java original wrote
 * ({@code tests/data/golden}, whose bytes the Python reader decodes in {@code tests/core/test_golden.py}),
 * checked against their manifest.
 */
public final class BusReadersTest {
    @TempDir
    Path tmp;

    /**
     * Payloads from the Python side, produced by
     * <pre>
     * from mappedbus_py import Trade, PriceUpdate, Token, Message, int8, int16, int32, int64, float32, float64, fixed_bytes
     * Trade(id=-(1 &lt;&lt; 40) - 3, price=-1234.5, quantity=2**31 - 1).to_bytes().hex()
     * Trade(id=2**63 - 1, price=0.1, quantity=-2).to_bytes().hex()
     * PriceUpdate(source=3, price=-100, quantity=65536).to_bytes().hex()
     * Token(from_=-1, to=2**31 - 1).to_bytes().hex()
     * class Mixed(Message, type_id=9):
     *     a = int8(); b = int16(); c = float32(); d = fixed_bytes(4); e = int64(); f = float64(); g = int32()
     * Mixed(a=-2, b=-300, c=1.5, d=b'ab', e=-(2**63), f=-0.0, g=-7).to_bytes().hex()
     * </pre>
     * Each case: layout option, type id, payloads (hex), and the rows expected.
     */
    static Stream<Arguments> pythonPayloads() {
        return Stream.of(
            Arguments.of("Trade", 2, List.of("fdfffffffffeffff00000000004a93c0ffffff7f", "ffffffffffffff7f9a9999999999b93ffeffffff"),
                List.of("position=8,meta=2,id=-1099511627779,price=-1234.5,quantity=2147483647",
                        "position=36,meta=2,id=9223372036854775807,price=0.1,quantity=-2")),
            Arguments.of("PriceUpdate", 0, List.of("030000009cffffff00000100"),
                List.of("position=8,meta=0,source=3,price=-100,quantity=65536")),
            Arguments.of("Token", 0, List.of("ffffffffffffff7f"),
                List.of("position=8,meta=0,from=-1,to=2147483647")),
            Arguments.of("a:int8,b:int16,c:float32,d:bytes4,e:int64,f:float64,g:int32", 9,
                List.of("fed4fe0000c03f6162000000000000000000800000000000000080f9ffffff"),
                List.of("position=8,meta=9,a=-2,b=-300,c=1.5,d=61620000,e=-9223372036854775808,f=-0.0,g=-7")));
    }

    /** Each typed column holds the value the Python message was built with, in both readers. */
    @ParameterizedTest(name = "{0}")
    @MethodSource("pythonPayloads")
    public void pythonMessageBytesDecodeToTheirFieldValues(String layout, int type, List<String> payloads,
                                                           List<String> expected) throws Exception {
        String path = tmp.resolve("python.bus").toString();
        int rs = payloads.get(0).length() / 2;
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, rs).open()) {
            for (String hex : payloads) {
                assertTrue(w.write(new Fixtures.Raw(type, hex)), "write");
            }
        }
        BusOptions o = options(path, "layout", layout, "typeId", "" + type, "recordsPerPartition", "1");
        assertEquals(rs, o.recordSize, "the layout's size is the Python message's payload size");
        BusReaderFactory f = new BusReaderFactory(o, o.readSchema());
        InputPartition[] parts = plan(o);
        assertEquals(expected, read(f, parts, false), "row reader");
        assertEquals(expected, read(f, parts, true), "columnar reader");
    }

    private static List<JsonObject> slots(JsonObject manifest) {
        List<JsonObject> out = new ArrayList<>();
        for (JsonElement e : manifest.getAsJsonArray("slots")) {
            if (e.getAsJsonObject().get("status").getAsInt() == 1) {
                out.add(e.getAsJsonObject());
            }
        }
        return out;
    }

    /** Golden objects-r12.bus (PriceUpdate records of types 0 and 7): untyped and typed rows as its manifest says. */
    @Test
    public void goldenObjectRecordsReadAsTheManifestSays() throws Exception {
        String path = Fixtures.golden(tmp, "objects-r12.bus");
        JsonObject m = Fixtures.manifest("objects-r12.bus");
        List<String> raw = new ArrayList<>();
        List<String> typed = new ArrayList<>();
        List<String> type7 = new ArrayList<>();
        for (JsonObject s : slots(m)) {
            String hex = s.get("payload_hex").getAsString();
            ByteBuffer le = ByteBuffer.wrap(Fixtures.HEX.parseHex(hex)).order(ByteOrder.LITTLE_ENDIAN);
            String head = "position=" + s.get("offset").getAsLong() + ",meta=" + s.get("meta").getAsInt();
            raw.add(head + ",payload=" + hex);
            typed.add(head + ",source=" + le.getInt(0) + ",price=" + le.getInt(4) + ",quantity=" + le.getInt(8));
            if (s.get("meta").getAsInt() == 7) {
                type7.add(typed.get(typed.size() - 1));
            }
        }
        assertTrue(type7.size() > 0 && type7.size() < typed.size(), "the file mixes types");
        String size = "" + m.get("file_size").getAsLong();
        BusOptions untyped = options(path, "recordSize", "12", "fileSize", size, "recordsPerPartition", "7", "batchSize", "5");
        BusReaderFactory f = new BusReaderFactory(untyped, untyped.readSchema());
        assertEquals(raw, read(f, plan(untyped), false), "row reader, untyped");
        assertEquals(raw, read(f, plan(untyped), true), "columnar reader, untyped");
        BusOptions o = options(path, "layout", "PriceUpdate", "fileSize", size, "recordsPerPartition", "20");
        f = new BusReaderFactory(o, o.readSchema());
        assertEquals(typed, read(f, plan(o), false), "row reader, PriceUpdate");
        assertEquals(typed, read(f, plan(o), true), "columnar reader, PriceUpdate");
        // A pushed-down meta = 7 keeps only those records, before anything is decoded.
        f = new BusReaderFactory(o, o.readSchema(), new int[] {7});
        assertEquals(type7, read(f, plan(o), false), "row reader, meta = 7");
        assertEquals(type7, read(f, plan(o), true), "columnar reader, meta = 7");
    }

    /**
     * Golden bytearray-r10.bus (record size 10: statuses off 4-byte alignment): with trimPayload the
     * payload is the first meta bytes, as the byte-array writers wrote them.
     */
    @ParameterizedTest(name = "columnar={0}")
    @ValueSource(booleans = {false, true})
    public void trimmedPayloadsAreTheByteArraysWritten(boolean columnar) throws Exception {
        String path = Fixtures.golden(tmp, "bytearray-r10.bus");
        JsonObject m = Fixtures.manifest("bytearray-r10.bus");
        List<String> expected = new ArrayList<>();
        for (JsonObject s : slots(m)) {
            int len = s.get("meta").getAsInt();
            expected.add("position=" + s.get("offset").getAsLong() + ",meta=" + len + ",payload="
                    + s.get("payload_hex").getAsString().substring(0, 2 * len));
        }
        BusOptions o = options(path, "recordSize", "10", "fileSize", "" + m.get("file_size").getAsLong(),
                "trimPayload", "true", "recordsPerPartition", "6", "batchSize", "4");
        assertEquals(expected, read(new BusReaderFactory(o, o.readSchema()), plan(o), columnar));
    }

    /** trimPayload on a record whose meta is not a length in 0..recordSize fails naming the record. */
    @ParameterizedTest(name = "columnar={0}")
    @ValueSource(booleans = {false, true})
    public void trimmingARecordThatIsNotAByteArrayFails(boolean columnar) throws Exception {
        String path = tmp.resolve("typed.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 10).open()) {
            w.write(new byte[] {1, 2}, 0, 2);
            w.write(new Fixtures.Raw(11, "00000000000000000000"));
        }
        BusOptions o = options(path, "recordSize", "10", "trimPayload", "true", "numPartitions", "1");
        Exception e = assertThrows(Exception.class, () -> read(new BusReaderFactory(o, o.readSchema()), plan(o), columnar));
        assertTrue(e.getMessage().contains("record at position 26 in " + path + " has length 11 outside 0..10"),
                e.getMessage());
    }

    /** Only the columns asked for are produced; none at all (count()) still gives one row per record. */
    @ParameterizedTest(name = "columnar={0}")
    @ValueSource(booleans = {false, true})
    public void prunedColumnsAndCountsReadOnlyWhatIsAsked(boolean columnar) throws Exception {
        String path = tmp.resolve("trades.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 1 << 16, 20).open()) {
            for (int i = 0; i < 1000; i++) {
                ByteBuffer b = ByteBuffer.allocate(20).order(ByteOrder.LITTLE_ENDIAN).putLong(i).putDouble(i / 4.0).putInt(-i);
                w.write(new Fixtures.Raw(2, Fixtures.HEX.formatHex(b.array())));
            }
        }
        BusOptions o = options(path, "layout", "Trade", "recordsPerPartition", "300", "batchSize", "64");
        BusReaderFactory prices = new BusReaderFactory(o, new StructType().add("price", "double"));
        List<String> rows = read(prices, plan(o), columnar);
        assertEquals(1000, rows.size());
        assertEquals("price=249.75", rows.get(999));
        List<String> counted = read(new BusReaderFactory(o, new StructType()), plan(o), columnar);
        assertEquals(1000, counted.size(), "count() rows");
        assertEquals("", counted.get(0), "no column decoded");
    }
}
