package io.mappedbuspy.spark.write;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import io.mappedbuspy.spark.BusOptions;

/** Writing rows: the record bytes are those of the Python Message declarations (WIRE-FORMAT.md). */
public final class RowEncoderTest {
    private static BusOptions options(String... kv) {
        Map<String, String> m = new HashMap<>();
        m.put("path", "/nonexistent/bus"); // parsing does not touch a plain path
        for (int i = 0; i < kv.length; i += 2) {
            m.put(kv[i], kv[i + 1]);
        }
        return BusOptions.parse(m);
    }

    private static StructType schema(String ddl) {
        return StructType.fromDDL(ddl);
    }

    private static byte[] encode(RowEncoder enc, RowEncoder.Record rec, Object... values) {
        enc.encode(new GenericInternalRow(values), rec);
        return Arrays.copyOf(rec.bytes, rec.length);
    }

    /** PriceUpdate(source=1, price=-2, quantity=3) is three little-endian int32s, type 0, as in Python. */
    @Test
    public void priceUpdateRowsEncodeAsThePythonMessage() {
        RowEncoder enc = new RowEncoder(options("layout", "PriceUpdate"), schema("source INT, price INT, quantity INT"));
        RowEncoder.Record rec = enc.newRecord();
        byte[] expected = ByteBuffer.allocate(12).order(ByteOrder.LITTLE_ENDIAN).putInt(1).putInt(-2).putInt(3).array();
        assertArrayEquals(expected, encode(enc, rec, 1, -2, 3), "payload");
        assertEquals(0, rec.meta, "type id");
        assertFalse(rec.metaIsLength, "typed records carry their type");
    }

    /** Trade: int64 id, float64 price, int32 quantity at 0, 8, 16; columns in any order and of wider types. */
    @Test
    public void tradeRowsEncodeFieldsAtTheirOffsets() {
        RowEncoder enc = new RowEncoder(options("layout", "Trade"), schema("quantity BIGINT, price FLOAT, id BIGINT"));
        RowEncoder.Record rec = enc.newRecord();
        byte[] expected = ByteBuffer.allocate(20).order(ByteOrder.LITTLE_ENDIAN)
                .putLong(-(1L << 62)).putDouble(2.5).putInt(-7).array();
        assertArrayEquals(expected, encode(enc, rec, -7L, 2.5f, -(1L << 62)), "payload");
        assertEquals(2, rec.meta, "Trade's type id");
    }

    /** A field list with every type and a meta column: small ints, floats, zero-padded bytes and strings. */
    @Test
    public void fieldListRowsEncodeEveryTypeAndAMetaColumn() {
        RowEncoder enc = new RowEncoder(options("layout", "a:int8,b:int16,c:float32,d:bytes4,e:bytes3", "typeId", "9"),
                schema("meta INT, a TINYINT, b SMALLINT, c DOUBLE, d BINARY, e STRING"));
        RowEncoder.Record rec = enc.newRecord();
        byte[] got = encode(enc, rec, 77, (byte) -1, (short) 0x1234, 0.5, new byte[] {1, 2}, UTF8String.fromString("xy"));
        byte[] expected = ByteBuffer.allocate(14).order(ByteOrder.LITTLE_ENDIAN).put((byte) -1).putShort((short) 0x1234)
                .putFloat(0.5f).put(new byte[] {1, 2, 0, 0}).put(new byte[] {'x', 'y', 0}).array();
        assertArrayEquals(expected, got, "payload");
        assertEquals(77, rec.meta, "meta from its column, not typeId");
        // A shorter value after a longer one leaves no stale bytes behind.
        encode(enc, rec, 1, (byte) 0, (short) 0, 0.0, new byte[] {9, 9, 9, 9}, UTF8String.fromString("abc"));
        got = encode(enc, rec, 1, (byte) 0, (short) 0, 0.0, new byte[] {5}, UTF8String.fromString(""));
        assertArrayEquals(new byte[] {5, 0, 0, 0, 0, 0, 0}, Arrays.copyOfRange(got, 7, 14), "padding");
    }

    /** Untyped rows: the payload bytes, metadata their length (a byte-array record) unless a meta column is given. */
    @Test
    public void untypedRowsAreByteArrayRecords() {
        RowEncoder enc = new RowEncoder(options("recordSize", "8"), schema("payload BINARY"));
        RowEncoder.Record rec = enc.newRecord();
        assertArrayEquals(new byte[] {4, 5, 6}, encode(enc, rec, (Object) new byte[] {4, 5, 6}), "payload");
        assertTrue(rec.metaIsLength, "byte-array record");
        RowEncoder withMeta = new RowEncoder(options("recordSize", "8"), schema("meta INT, payload BINARY"));
        RowEncoder.Record r2 = withMeta.newRecord();
        encode(withMeta, r2, 3, new byte[8]);
        assertEquals(3, r2.meta, "meta column");
        assertFalse(r2.metaIsLength, "meta given");
    }

    /** Values that do not fit are refused naming the column, never truncated. */
    @ParameterizedTest
    @ValueSource(ints = {128, -129, 1000})
    public void outOfRangeValuesAreRefusedNamingTheColumn(int value) {
        RowEncoder enc = new RowEncoder(options("layout", "small:int8"), schema("small INT"));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> enc.encode(new GenericInternalRow(new Object[] {value}), enc.newRecord()));
        assertTrue(e.getMessage().contains("column small value " + value + " does not fit in int8"), e.getMessage());
    }

    /** Nulls, long payloads and long byte fields are refused with the column and the problem. */
    @Test
    public void badRowsAreRefusedNamingTheColumnAndProblem() {
        RowEncoder raw = new RowEncoder(options("recordSize", "4"), schema("payload BINARY"));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> raw.encode(new GenericInternalRow(new Object[] {new byte[5]}), raw.newRecord()));
        assertTrue(e.getMessage().contains("payload of 5 bytes is longer than recordSize 4"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> raw.encode(new GenericInternalRow(new Object[] {null}), raw.newRecord()));
        assertTrue(e.getMessage().contains("column payload is null"), e.getMessage());
        RowEncoder typed = new RowEncoder(options("layout", "d:bytes2"), schema("d BINARY"));
        e = assertThrows(IllegalArgumentException.class,
                () -> typed.encode(new GenericInternalRow(new Object[] {new byte[3]}), typed.newRecord()));
        assertTrue(e.getMessage().contains("column d holds 3 bytes, longer than layout field"), e.getMessage());
    }

    /** Schemas the bus cannot take are refused when the write is planned, before any row. */
    @ParameterizedTest
    @ValueSource(strings = {
        "payload BINARY, extra INT|cannot write column(s) [extra int]",
        "meta INT|no payload column to write",
        "payload STRING|column payload is string, expected binary",
        "meta STRING, payload BINARY|column meta is string, expected an integer type",
    })
    public void untypedSchemasTheBusCannotTakeAreRefused(String caseText) {
        String[] c = caseText.split("\\|");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> new RowEncoder(options("recordSize", "8"), schema(c[0])));
        assertTrue(e.getMessage().contains(c[1]), e.getMessage());
    }

    /** A typed schema must have a column of a fitting type for every layout field. */
    @Test
    public void typedSchemasNeedAFittingColumnPerField() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> new RowEncoder(options("layout", "Token"), schema("from INT")));
        assertTrue(e.getMessage().contains("no column for layout field to"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> new RowEncoder(options("layout", "Token"), schema("from INT, to STRING")));
        assertTrue(e.getMessage().contains("column to is string but layout field"), e.getMessage());
        assertTrue(e.getMessage().contains("needs an integer column (cast it)"), e.getMessage());
        assertEquals(DataTypes.IntegerType, schema("to INT").apply("to").dataType());
    }
}
