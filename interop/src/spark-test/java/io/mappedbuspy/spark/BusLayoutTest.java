package io.mappedbuspy.spark;

import java.util.List;
import java.util.stream.Collectors;

import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The {@code layout} option: message names and field lists, their wire offsets and Spark columns. */
public final class BusLayoutTest {
    /** "name kind offset size" per field, to compare a layout in one line. */
    private static String describe(BusLayout l) {
        return l.fields().stream().map(f -> f.name + " " + f.kind + " " + f.offset + " " + f.size)
                .collect(Collectors.joining(", "));
    }

    /** The named messages have the Python Message declarations' fields, offsets, sizes and type ids. */
    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', value = {
        "PriceUpdate | 0 | 12 | source INT32 0 4, price INT32 4 4, quantity INT32 8 4",
        "token       | 0 | 8  | from INT32 0 4, to INT32 4 4",
        "TRADE       | 2 | 20 | id INT64 0 8, price FLOAT64 8 8, quantity INT32 16 4",
    })
    public void namedMessagesHaveTheirDeclaredFields(String name, int typeId, int size, String fields) {
        BusLayout l = BusLayout.parse(name, 99); // a named message keeps its own type id
        assertEquals(typeId, l.typeId(), "type id of " + name);
        assertEquals(size, l.size(), "payload size of " + name);
        assertEquals(fields, describe(l), "fields of " + name);
    }

    /** A field list packs little-endian fields at consecutive offsets, without padding, with the given type id. */
    @Test
    public void fieldListPacksFieldsWithoutPadding() {
        BusLayout l = BusLayout.parse(" a:int8, b:INT16 ,c:int32,d:int64,e:float32,f:float64,g:bytes5 ", 7);
        assertEquals("a INT8 0 1, b INT16 1 2, c INT32 3 4, d INT64 7 8, e FLOAT32 15 4, f FLOAT64 19 8, g BYTES 27 5",
                describe(l));
        assertEquals(32, l.size(), "size");
        assertEquals(7, l.typeId(), "type id from the typeId option");
        assertEquals("d", l.field("D").name(), "columns are found ignoring case");
        assertNull(l.field("nope"), "unknown column");
    }

    /** Each wire type gives the documented Spark type; columns are non-nullable. */
    @Test
    public void sparkColumnsHaveTheDocumentedTypes() {
        List<StructField> cols = BusLayout.parse("a:int8,b:int16,c:int32,d:int64,e:float32,f:float64,g:bytes3", 0)
                .sparkFields();
        assertEquals(List.of(DataTypes.ByteType, DataTypes.ShortType, DataTypes.IntegerType, DataTypes.LongType,
                DataTypes.FloatType, DataTypes.DoubleType, DataTypes.BinaryType),
                cols.stream().map(StructField::dataType).collect(Collectors.toList()));
        assertTrue(cols.stream().noneMatch(StructField::nullable), "records have no nulls");
    }

    /** Every malformed layout is refused with a message naming the bad part. */
    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', value = {
        "Quote                 | neither a known message",
        "a:int32,b             | 'b' is not 'name:type'",
        "a:int32,:int8         | ':int8' is not 'name:type'",
        "a:int32,b:            | 'b:' is not 'name:type'",
        "a:int32,A:int8        | 'A' appears twice",
        "position:int64        | clashes with the record column",
        "Meta:int32            | clashes with the record column",
        "a:bytes               | bytes needs a size",
        "a:bytes0              | bytes needs a size",
        "a:bytesX              | bytes needs a size",
        "a:int128              | unknown type 'int128'",
        "a:string              | unknown type 'string'",
    })
    public void malformedLayoutsAreRefusedNamingTheProblem(String spec, String problem) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> BusLayout.parse(spec, 0));
        assertTrue(e.getMessage().contains(problem), () -> "expected <" + problem + "> in: " + e.getMessage());
    }
}
