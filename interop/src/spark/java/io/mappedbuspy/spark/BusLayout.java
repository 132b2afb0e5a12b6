package io.mappedbuspy.spark;

import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * The typed layout of a record's payload: named fields, little-endian, at consecutive offsets from 0 with
 * no padding (the same bytes as the Python {@code Message} declarations and the Java message classes).
 *
 * <p>Parsed from the {@code layout} option: a named message ({@code PriceUpdate}, {@code Token},
 * {@code Trade}) or a field list such as {@code source:int32,price:int32,quantity:int32} with the types
 * {@code int8 int16 int32 int64 float32 float64 bytes<N>}.
 */
public final class BusLayout implements Serializable {
    private static final long serialVersionUID = 1L;

    /** The wire type of a field. */
    public enum Kind {
        INT8(1, DataTypes.ByteType), INT16(2, DataTypes.ShortType), INT32(4, DataTypes.IntegerType),
        INT64(8, DataTypes.LongType), FLOAT32(4, DataTypes.FloatType), FLOAT64(8, DataTypes.DoubleType),
        BYTES(-1, DataTypes.BinaryType),
        /** int64 nanoseconds since the epoch (UTC), as Spark timestamps (microseconds: truncated). */
        TIMESTAMP_NS(8, DataTypes.TimestampType),
        /** int64 microseconds since the epoch (UTC), as Spark timestamps. */
        TIMESTAMP_US(8, DataTypes.TimestampType);

        final int size;
        final DataType sparkType;

        Kind(int size, DataType sparkType) {
            this.size = size;
            this.sparkType = sparkType;
        }
    }

    /** One field: name, wire type, payload offset and size in bytes. */
    public static final class Field implements Serializable {
        private static final long serialVersionUID = 1L;
        public final String name;
        public final Kind kind;
        public final int offset;
        public final int size;

        Field(String name, Kind kind, int offset, int size) {
            this.name = name;
            this.kind = kind;
            this.offset = offset;
            this.size = size;
        }

        /** @return the field (column) name */
        public String name() {
            return name;
        }

        @Override
        public String toString() {
            return name + ":" + (kind == Kind.BYTES ? "bytes" + size : kind.name().toLowerCase(Locale.ROOT))
                    + "@" + offset;
        }
    }

    private final String name;
    private final int typeId;
    private final List<Field> fields;
    private final int size;

    private BusLayout(String name, int typeId, List<Field> fields) {
        this.name = name;
        this.typeId = typeId;
        this.fields = Collections.unmodifiableList(fields);
        int end = 0;
        for (Field f : fields) {
            end = Math.max(end, f.offset + f.size);
        }
        this.size = end;
    }

    /**
     * Parses a {@code layout} option value.
     *
     * @param spec   a message name or a field list
     * @param typeId the type id for a field list (named messages have their own)
     * @return the layout
     * @throws IllegalArgumentException naming the bad part of {@code spec}
     */
    public static BusLayout parse(String spec, int typeId) {
        String s = spec.trim();
        switch (s.toLowerCase(Locale.ROOT)) {
            case "priceupdate":
                return parseFields("PriceUpdate", 0, "source:int32,price:int32,quantity:int32");
            case "token":
                return parseFields("Token", 0, "from:int32,to:int32");
            case "trade":
                return parseFields("Trade", 2, "id:int64,price:float64,quantity:int32");
            default:
                if (!s.contains(":")) {
                    throw new IllegalArgumentException("layout '" + spec + "' is neither a known message "
                            + "(PriceUpdate, Token, Trade) nor a field list like 'a:int32,b:float64'");
                }
                return parseFields(s, typeId, s);
        }
    }

    private static BusLayout parseFields(String name, int typeId, String list) {
        List<Field> fields = new ArrayList<>();
        Set<String> seen = new HashSet<>();
        int offset = 0;
        for (String part : list.split(",")) {
            String p = part.trim();
            int colon = p.indexOf(':');
            if (colon <= 0 || colon == p.length() - 1) {
                throw new IllegalArgumentException("layout field '" + p + "' is not 'name:type'");
            }
            String fname = p.substring(0, colon).trim();
            String type = p.substring(colon + 1).trim().toLowerCase(Locale.ROOT);
            if (!seen.add(fname.toLowerCase(Locale.ROOT))) {
                throw new IllegalArgumentException("layout field '" + fname + "' appears twice");
            }
            if (fname.equalsIgnoreCase("position") || fname.equalsIgnoreCase("meta")) {
                throw new IllegalArgumentException("layout field name '" + fname
                        + "' clashes with the record column of that name");
            }
            Kind kind;
            int size;
            if (type.startsWith("bytes")) {
                kind = Kind.BYTES;
                try {
                    size = Integer.parseInt(type.substring(5));
                } catch (NumberFormatException e) {
                    size = -1;
                }
                if (size <= 0) {
                    throw new IllegalArgumentException("layout field '" + p + "': bytes needs a size, e.g. bytes16");
                }
            } else {
                try {
                    kind = Kind.valueOf(type.toUpperCase(Locale.ROOT));
                } catch (IllegalArgumentException e) {
                    kind = null;
                }
                if (kind == null || kind == Kind.BYTES) {
                    throw new IllegalArgumentException("layout field '" + p + "' has unknown type '" + type
                            + "' (int8, int16, int32, int64, float32, float64, timestamp_ns, timestamp_us, bytes<N>)");
                }
                size = kind.size;
            }
            fields.add(new Field(fname, kind, offset, size));
            offset += size;
        }
        return new BusLayout(name, typeId, fields);
    }

    /** @return the message name, or the field list it was parsed from */
    public String name() {
        return name;
    }

    /** @return the type id written to the metadata of records written with this layout */
    public int typeId() {
        return typeId;
    }

    /** @return the fields in payload order */
    public List<Field> fields() {
        return fields;
    }

    /** @return the payload bytes the fields use */
    public int size() {
        return size;
    }

    /** @return one non-nullable Spark column per field */
    public List<StructField> sparkFields() {
        List<StructField> out = new ArrayList<>();
        for (Field f : fields) {
            out.add(DataTypes.createStructField(f.name, f.kind.sparkType, false));
        }
        return out;
    }

    /**
     * Finds a field by name, ignoring case.
     *
     * @param column a column name
     * @return the field, or null
     */
    public Field field(String column) {
        for (Field f : fields) {
            if (f.name.equalsIgnoreCase(column)) {
                return f;
            }
        }
        return null;
    }

    @Override
    public String toString() {
        return name + " (type " + typeId + ", " + size + " bytes: " + fields + ")";
    }
}
