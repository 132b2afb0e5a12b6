package io.mappedbuspy.spark.write;

import io.mappedbuspy.MappedBusMessage;
import io.mappedbuspy.internal.MemoryMappedFile;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import java.io.Serializable;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import io.mappedbuspy.spark.BusLayout;
import io.mappedbuspy.spark.BusOptions;

/**
 * Turns rows into records. Built (and its column checks made) on the driver; used by the tasks.
 *
 * <p>Untyped: a {@code payload} binary column, at most recordSize bytes, plus an optional {@code meta}
 * integer column (without it the metadata is the payload length, as for byte-array records). Typed (a
 * {@code layout}): one column per field, encoded little-endian at the field's offset, metadata the
 * layout's type id (or an optional {@code meta} column).
 */
public final class RowEncoder implements Serializable {
    private static final long serialVersionUID = 1L;

    private final int recordSize;
    private final BusLayout layout;
    private final int payloadCol;
    private final int metaCol;
    private final DataType metaType;
    /** Typed: for each layout field, its column index and column type. */
    private final int[] fieldCols;
    private final DataType[] fieldTypes;
    private final String[] colNames;
    /** A framed bus: rows are messages (payload binary of any size, an optional topic string column). */
    private final boolean frames;
    private final int topicCol;

    RowEncoder(BusOptions o, StructType schema) {
        recordSize = o.recordSize;
        layout = o.layout;
        frames = o.frames;
        StructField[] cols = schema.fields();
        colNames = new String[cols.length];
        if (frames) {
            int payload = -1;
            int topic = -1;
            List<String> other = new ArrayList<>();
            for (int i = 0; i < cols.length; i++) {
                String n = cols[i].name();
                colNames[i] = n;
                if (n.equalsIgnoreCase(BusOptions.PAYLOAD) && cols[i].dataType().equals(DataTypes.BinaryType)) {
                    payload = i;
                } else if (n.equalsIgnoreCase(BusOptions.TOPIC) && cols[i].dataType().equals(DataTypes.StringType)) {
                    topic = i;
                } else if (!n.equalsIgnoreCase(BusOptions.POSITION)) {
                    other.add(n + " " + cols[i].dataType().simpleString());
                }
            }
            if (payload < 0 || !other.isEmpty()) {
                throw new IllegalArgumentException("mappedbus: " + o.path + " is a framed bus: it takes payload binary "
                        + "[, topic string] (messages of any size)" + (other.isEmpty() ? ", and there is no payload "
                        + "binary column" : ", not " + other));
            }
            payloadCol = payload;
            topicCol = topic;
            metaCol = -1;
            metaType = null;
            fieldCols = null;
            fieldTypes = null;
            return;
        }
        topicCol = -1;
        int payload = -1;
        int meta = -1;
        List<String> unexpected = new ArrayList<>();
        for (int i = 0; i < cols.length; i++) {
            String n = cols[i].name();
            colNames[i] = n;
            if (n.equalsIgnoreCase(BusOptions.META)) {
                meta = i;
            } else if (layout == null && n.equalsIgnoreCase(BusOptions.PAYLOAD)) {
                payload = i;
            } else if (layout == null || layout.field(n) == null) {
                unexpected.add(n + " " + cols[i].dataType().simpleString());
            }
        }
        String expected = layout == null ? "payload binary [, meta int]"
                : "one column per field of " + layout + " [, meta int]";
        if (!unexpected.isEmpty()) {
            throw new IllegalArgumentException("mappedbus: cannot write column(s) " + unexpected
                    + ": the bus takes " + expected + (layout == null ? " (or give option 'layout')" : ""));
        }
        if (meta >= 0 && !isIntegral(cols[meta].dataType())) {
            throw new IllegalArgumentException("mappedbus: column meta is " + cols[meta].dataType().simpleString()
                    + ", expected an integer type (int32 metadata)");
        }
        metaCol = meta;
        metaType = meta >= 0 ? cols[meta].dataType() : null;
        if (layout == null) {
            if (payload < 0) {
                throw new IllegalArgumentException("mappedbus: no payload column to write: the bus takes "
                        + expected + " (or give option 'layout' for typed columns)");
            }
            if (!cols[payload].dataType().equals(DataTypes.BinaryType)) {
                throw new IllegalArgumentException("mappedbus: column payload is "
                        + cols[payload].dataType().simpleString() + ", expected binary");
            }
            payloadCol = payload;
            fieldCols = null;
            fieldTypes = null;
        } else {
            payloadCol = -1;
            List<BusLayout.Field> fields = layout.fields();
            fieldCols = new int[fields.size()];
            fieldTypes = new DataType[fields.size()];
            for (int k = 0; k < fields.size(); k++) {
                BusLayout.Field f = fields.get(k);
                int idx = -1;
                for (int i = 0; i < cols.length; i++) {
                    if (cols[i].name().equalsIgnoreCase(f.name)) {
                        idx = i;
                    }
                }
                if (idx < 0) {
                    throw new IllegalArgumentException("mappedbus: no column for layout field " + f
                            + " (columns: " + Arrays.toString(schema.fieldNames()) + ")");
                }
                DataType t = cols[idx].dataType();
                boolean ok;
                switch (f.kind) {
                    case BYTES:
                        ok = t.equals(DataTypes.BinaryType) || t.equals(DataTypes.StringType);
                        break;
                    case FLOAT32:
                    case FLOAT64:
                        ok = isIntegral(t) || t.equals(DataTypes.FloatType) || t.equals(DataTypes.DoubleType);
                        break;
                    case TIMESTAMP_NS:
                    case TIMESTAMP_US:
                        ok = t.equals(DataTypes.TimestampType) || t.equals(DataTypes.TimestampNTZType) || isIntegral(t);
                        break;
                    default:
                        ok = isIntegral(t);
                }
                if (!ok) {
                    throw new IllegalArgumentException("mappedbus: column " + cols[idx].name() + " is "
                            + t.simpleString() + " but layout field " + f + " needs "
                            + (f.kind == BusLayout.Kind.BYTES ? "binary or string"
                            : f.kind == BusLayout.Kind.FLOAT32 || f.kind == BusLayout.Kind.FLOAT64
                            ? "a numeric column" : "an integer column") + " (cast it)");
                }
                fieldCols[k] = idx;
                fieldTypes[k] = t;
            }
        }
    }

    private static boolean isIntegral(DataType t) {
        return t.equals(DataTypes.ByteType) || t.equals(DataTypes.ShortType) || t.equals(DataTypes.IntegerType)
                || t.equals(DataTypes.LongType);
    }

    private static long integral(InternalRow row, int col, DataType t) {
        if (t.equals(DataTypes.LongType)) {
            return row.getLong(col);
        } else if (t.equals(DataTypes.IntegerType)) {
            return row.getInt(col);
        } else if (t.equals(DataTypes.ShortType)) {
            return row.getShort(col);
        }
        return row.getByte(col);
    }

    private static double floating(InternalRow row, int col, DataType t) {
        if (t.equals(DataTypes.DoubleType)) {
            return row.getDouble(col);
        } else if (t.equals(DataTypes.FloatType)) {
            return row.getFloat(col);
        }
        return integral(row, col, t);
    }

    /** A record being written: payload bytes and metadata, reused for every row of a task. */
    public static final class Record implements MappedBusMessage {
        public final byte[] bytes;
        final ByteBuffer le;
        public int length;
        int meta;
        /** Whether the metadata is the length (byte-array record): write(byte[]) then. */
        public boolean metaIsLength;
        /** A framed bus's message (null otherwise) and its topic (null: none). */
        public byte[] frame;
        public String topic;

        Record(int recordSize) {
            bytes = new byte[recordSize];
            le = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
        }

        @Override
        public void write(MemoryMappedFile mem, long pos) {
            mem.putBytes(pos, bytes, 0, length);
        }

        @Override
        public void read(MemoryMappedFile mem, long pos) {
            throw new UnsupportedOperationException();
        }

        @Override
        public int type() {
            return meta;
        }
    }

    Record newRecord() {
        return new Record(recordSize);
    }

    /**
     * Encodes one row.
     *
     * @param row the row
     * @param rec the record to fill
     * @throws IllegalArgumentException naming the column and the problem (null, too long, out of range)
     */
    void encode(InternalRow row, Record rec) {
        if (frames) {
            notNull(row, payloadCol);
            rec.frame = row.getBinary(payloadCol);
            rec.topic = topicCol < 0 || row.isNullAt(topicCol) ? null : row.getUTF8String(topicCol).toString();
            return;
        }
        if (metaCol >= 0) {
            notNull(row, metaCol);
            rec.meta = (int) checkRange(integral(row, metaCol, metaType), 32, metaCol);
        }
        if (layout == null) {
            notNull(row, payloadCol);
            byte[] b = row.getBinary(payloadCol);
            if (b.length > recordSize) {
                throw new IllegalArgumentException("mappedbus: payload of " + b.length
                        + " bytes is longer than recordSize " + recordSize);
            }
            System.arraycopy(b, 0, rec.bytes, 0, b.length);
            rec.length = b.length;
            rec.metaIsLength = metaCol < 0;
            return;
        }
        List<BusLayout.Field> fields = layout.fields();
        ByteBuffer le = rec.le;
        for (int k = 0; k < fieldCols.length; k++) {
            BusLayout.Field f = fields.get(k);
            int c = fieldCols[k];
            notNull(row, c);
            DataType t = fieldTypes[k];
            switch (f.kind) {
                case INT8:
                    le.put(f.offset, (byte) checkRange(integral(row, c, t), 8, c));
                    break;
                case INT16:
                    le.putShort(f.offset, (short) checkRange(integral(row, c, t), 16, c));
                    break;
                case INT32:
                    le.putInt(f.offset, (int) checkRange(integral(row, c, t), 32, c));
                    break;
                case INT64:
                    le.putLong(f.offset, integral(row, c, t));
                    break;
                case FLOAT32:
                    le.putFloat(f.offset, (float) floating(row, c, t));
                    break;
                case FLOAT64:
                    le.putDouble(f.offset, floating(row, c, t));
                    break;
                case TIMESTAMP_US:
                case TIMESTAMP_NS:
                    // A timestamp column is microseconds; an integer column is already in the field's unit.
                    long v = isIntegral(t) ? integral(row, c, t) : row.getLong(c);
                    if (f.kind == BusLayout.Kind.TIMESTAMP_NS && !isIntegral(t)) {
                        v = Math.multiplyExact(v, 1000L);
                    }
                    le.putLong(f.offset, v);
                    break;
                default:
                    byte[] b = t.equals(DataTypes.StringType) ? row.getUTF8String(c).getBytes() : row.getBinary(c);
                    if (b.length > f.size) {
                        throw new IllegalArgumentException("mappedbus: column " + colNames[c] + " holds "
                                + b.length + " bytes, longer than layout field " + f);
                    }
                    System.arraycopy(b, 0, rec.bytes, f.offset, b.length);
                    Arrays.fill(rec.bytes, f.offset + b.length, f.offset + f.size, (byte) 0);
            }
        }
        rec.length = layout.size();
        if (metaCol < 0) {
            rec.meta = layout.typeId();
        }
        rec.metaIsLength = false;
    }

    private void notNull(InternalRow row, int col) {
        if (row.isNullAt(col)) {
            throw new IllegalArgumentException("mappedbus: column " + colNames[col] + " is null in a row "
                    + "(records have no nulls; filter or fill them)");
        }
    }

    private long checkRange(long v, int bits, int col) {
        long lo = -(1L << (bits - 1));
        long hi = (1L << (bits - 1)) - 1;
        if (v < lo || v > hi) {
            throw new IllegalArgumentException("mappedbus: column " + colNames[col] + " value " + v
                    + " does not fit in int" + bits);
        }
        return v;
    }

    @Override
    public String toString() {
        return layout == null ? "payload" + (metaCol >= 0 ? "+meta" : "") : layout.name();
    }
}
