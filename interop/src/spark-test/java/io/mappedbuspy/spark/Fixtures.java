package io.mappedbuspy.spark;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import io.mappedbuspy.MappedBusMessage;
import io.mappedbuspy.internal.MemoryMappedFile;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.stream.Stream;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import io.mappedbuspy.spark.read.BusReaderFactory;
import io.mappedbuspy.spark.read.BusScan;

/**
 * What the connector tests share: options, the golden bus files of {@code tests/data/golden} (written by
 * the Java original; {@code tests/core/test_golden.py} reads the same bytes as the Python {@code Message}
 * classes), records with payload bytes given as they are (hex), rows of both readers as text, and seeds
 * for generated cases.
 */
public final class Fixtures {
    public static final HexFormat HEX = HexFormat.of();

    private Fixtures() {
    }

    public static BusOptions options(String path, String... kv) {
        Map<String, String> m = new HashMap<>();
        m.put("path", path);
        for (int i = 0; i < kv.length; i += 2) {
            m.put(kv[i], kv[i + 1]);
        }
        return BusOptions.parse(m);
    }

    /** The repository root: -Dmappedbuspy.root (interop/test.sh sets it), else found upwards from here. */
    public static Path goldenDir() {
        String prop = System.getProperty("mappedbuspy.root");
        if (prop != null) {
            return Paths.get(prop).toAbsolutePath().resolve("tests/data/golden");
        }
        for (Path p = Paths.get("").toAbsolutePath(); p != null; p = p.getParent()) {
            if (Files.isRegularFile(p.resolve("tests/data/golden/manifest.json"))) {
                return p.resolve("tests/data/golden");
            }
        }
        throw new IllegalStateException("repository root not found: set -Dmappedbuspy.root");
    }

    /** A golden file's manifest entry: file_size, record_size, limit, slots [{offset, status, meta, payload_hex}]. */
    public static JsonObject manifest(String name) throws IOException {
        String text = new String(Files.readAllBytes(goldenDir().resolve("manifest.json")), StandardCharsets.UTF_8);
        for (JsonElement e : JsonParser.parseString(text).getAsJsonObject().getAsJsonArray("files")) {
            if (e.getAsJsonObject().get("file").getAsString().equals(name)) {
                return e.getAsJsonObject();
            }
        }
        throw new IllegalArgumentException("no golden file " + name + " in the manifest");
    }

    /** A copy of a golden file in {@code dir} (the originals stay untouched). */
    public static String golden(Path dir, String name) throws IOException {
        Path to = dir.resolve(name);
        Files.copy(goldenDir().resolve(name), to);
        return to.toString();
    }

    /** A record whose metadata and payload bytes are given as they are. */
    public static final class Raw implements MappedBusMessage {
        final int type;
        final byte[] payload;

        public Raw(int type, String hex) {
            this.type = type;
            this.payload = HEX.parseHex(hex);
        }

        @Override
        public void write(MemoryMappedFile mem, long pos) {
            mem.putBytes(pos, payload, 0, payload.length);
        }

        @Override
        public void read(MemoryMappedFile mem, long pos) {
            throw new UnsupportedOperationException("write-only test record");
        }

        @Override
        public int type() {
            return type;
        }
    }

    /** A row as "name=value,..." (binary as hex), from the getters Spark itself would use for each type. */
    public static String text(StructType schema, InternalRow row) {
        StringBuilder s = new StringBuilder();
        StructField[] fields = schema.fields();
        for (int i = 0; i < fields.length; i++) {
            DataType t = fields[i].dataType();
            Object v;
            if (t.equals(DataTypes.LongType)) {
                v = row.getLong(i);
            } else if (t.equals(DataTypes.IntegerType)) {
                v = row.getInt(i);
            } else if (t.equals(DataTypes.ShortType)) {
                v = row.getShort(i);
            } else if (t.equals(DataTypes.ByteType)) {
                v = row.getByte(i);
            } else if (t.equals(DataTypes.FloatType)) {
                v = row.getFloat(i);
            } else if (t.equals(DataTypes.DoubleType)) {
                v = row.getDouble(i);
            } else if (t.equals(DataTypes.BinaryType)) {
                v = HEX.formatHex(row.getBinary(i));
            } else {
                throw new AssertionError("unexpected column type " + t);
            }
            s.append(i == 0 ? "" : ",").append(fields[i].name()).append('=').append(v);
        }
        return s.toString();
    }

    /** Every row of the partitions, read by the row reader ({@code columnar=false}) or the columnar one. */
    public static List<String> read(BusReaderFactory f, InputPartition[] parts, boolean columnar) throws IOException {
        List<String> out = new ArrayList<>();
        for (InputPartition p : parts) {
            if (columnar) {
                try (PartitionReader<ColumnarBatch> r = f.createColumnarReader(p)) {
                    while (r.next()) {
                        ColumnarBatch b = r.get();
                        for (Iterator<InternalRow> it = b.rowIterator(); it.hasNext(); ) {
                            out.add(text(f.schema, it.next()));
                        }
                    }
                }
            } else {
                try (PartitionReader<InternalRow> r = f.createReader(p)) {
                    while (r.next()) {
                        out.add(text(f.schema, r.get()));
                    }
                }
            }
        }
        return out;
    }

    /** Plans a batch read as the driver does (options must set recordsPerPartition or numPartitions). */
    public static InputPartition[] plan(BusOptions o) {
        return new BusScan(o, o.readSchema()).planInputPartitions();
    }

    /**
     * Seeds of generated cases, shown in each case's name; {@code -Dmappedbuspy.seed=HEX} runs only that
     * one (JAVA_TOOL_OPTIONS=-Dmappedbuspy.seed=... interop/test.sh spark --select-class ...), and
     * {@code -Dmappedbuspy.cases=N} sets how many.
     */
    public static Stream<String> seeds(int n) {
        String replay = System.getProperty("mappedbuspy.seed");
        if (replay != null && !replay.isBlank()) {
            return Stream.of(String.format("%016x", Long.parseUnsignedLong(replay.trim().replaceFirst("^seed=", ""), 16)));
        }
        SplittableRandom base = new SplittableRandom();
        return Stream.generate(base::nextLong).limit(Integer.getInteger("mappedbuspy.cases", n))
                .map(s -> String.format("%016x", s));
    }

    public static SplittableRandom random(String seed) {
        return new SplittableRandom(Long.parseUnsignedLong(seed, 16));
    }
}
