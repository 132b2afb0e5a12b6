package io.mappedbuspy;

import java.io.EOFException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import io.mappedbuspy.internal.MemoryMappedFile;

/** Files written by the Java original (tests/data/golden) read exactly as manifest.json says. */
public final class GoldenTest {
    /** Scratch directory, new for each test and deleted after it. */
    @TempDir
    Path tmp;

    /**
     * The repository root: the system property {@code mappedbuspy.root}, else the first directory from
     * the working directory upwards that holds the golden manifest.
     */
    private static Path goldenDir() {
        String prop = System.getProperty("mappedbuspy.root");
        if (prop != null) {
            return Paths.get(prop).toAbsolutePath().resolve("tests/data/golden");
        }
        for (Path p = Paths.get("").toAbsolutePath(); p != null; p = p.getParent()) {
            if (Files.isRegularFile(p.resolve("tests/data/golden/manifest.json"))) {
                return p.resolve("tests/data/golden");
            }
        }
        throw new IllegalStateException(
                "repository root not found: set -Dmappedbuspy.root or run from inside the repository");
    }

    private static List<JsonObject> manifest() throws Exception {
        String text = new String(Files.readAllBytes(goldenDir().resolve("manifest.json")), StandardCharsets.UTF_8);
        List<JsonObject> files = new ArrayList<>();
        for (JsonElement f : JsonParser.parseString(text).getAsJsonObject().getAsJsonArray("files")) {
            files.add(f.getAsJsonObject());
        }
        return files;
    }

    /** One case per golden file and reader mode, named after the file. */
    static Stream<Arguments> goldenFiles() throws Exception {
        List<Arguments> cases = new ArrayList<>();
        for (JsonObject f : manifest()) {
            cases.add(Arguments.of(f.get("file").getAsString(), f, false));
            cases.add(Arguments.of(f.get("file").getAsString(), f, true));
        }
        return cases.stream();
    }

    private static long num(JsonObject m, String key) {
        return m.get(key).getAsLong();
    }

    private static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for (byte x : b) {
            sb.append(String.format("%02x", x & 0xFF));
        }
        return sb.toString();
    }

    /** Reads every record until EOF or until nothing arrives for a while; returns "offset meta hex" lines. */
    private static List<String> readAll(String path, long fileSize, int recordSize, boolean readOnly)
            throws Exception {
        List<String> out = new ArrayList<>();
        try (MappedBusReader r = new MappedBusReader(path, fileSize, recordSize, readOnly).open()) {
            r.setTimeout(20);
            byte[] payload = new byte[recordSize];
            MappedBusMessage raw = new MappedBusMessage() {
                @Override
                public void write(MemoryMappedFile mem, long pos) {
                }

                @Override
                public void read(MemoryMappedFile mem, long pos) {
                    mem.getBytes(pos, payload, 0, recordSize);
                }

                @Override
                public int type() {
                    return 0;
                }
            };
            for (;;) {
                boolean got;
                try {
                    got = Buses.await(r, 200);
                } catch (EOFException e) {
                    break;
                }
                if (!got) {
                    break;
                }
                r.readMessage(raw);
                out.add(r.recordPosition() + " " + r.readType() + " " + hex(payload));
            }
        }
        return out;
    }

    /** The manifest lists every scenario the original was made to write (so no case is silently lost). */
    @Test
    public void manifestListsTheGoldenFiles() throws Exception {
        assertTrue(manifest().size() >= 7, "manifest lists files");
    }

    /**
     * A read-write reader delivers what the manifest lists (rolling back the uncommitted slot); a read-only
     * reader delivers the same records and leaves the file byte-identical.
     */
    @ParameterizedTest(name = "{0} readOnly={2}")
    @MethodSource("goldenFiles")
    public void goldenFileReadsAsManifestSays(String name, JsonObject f, boolean readOnly) throws Exception {
        Path src = goldenDir().resolve(name);
        assertEquals(num(f, "bytes_on_disk"), Files.size(src), name + " bytes on disk");
        Path path = tmp.resolve(name);
        Files.copy(src, path);
        assertTrue(path.toFile().setWritable(true, true)); // the shared originals are read-only
        byte[] before = Files.readAllBytes(path);
        long fileSize = num(f, "file_size");
        int recordSize = (int) num(f, "record_size");
        try (MemoryMappedFile mem = new MemoryMappedFile(path.toString(), fileSize, true)) {
            assertEquals(num(f, "limit"), mem.getLongAcquire(Layout.LIMIT_OFFSET), name + " limit");
            for (JsonElement e : f.getAsJsonArray("slots")) {
                JsonObject s = e.getAsJsonObject();
                assertEquals(num(s, "status"), mem.getStatus(num(s, "offset")), name + " status at " + num(s, "offset"));
            }
        }
        List<String> expected = new ArrayList<>();
        JsonElement delivered = f.get("delivered_when_uncommitted_rolled_back");
        assertNotNull(delivered, name + ": delivered_when_uncommitted_rolled_back");
        for (JsonElement e : delivered.getAsJsonArray()) {
            JsonObject d = e.getAsJsonObject();
            expected.add(num(d, "offset") + " " + num(d, "meta") + " " + d.get("payload_hex").getAsString());
        }
        assertEquals(expected, readAll(path.toString(), fileSize, recordSize, readOnly), name + " records");
        if (readOnly) {
            assertArrayEquals(before, Files.readAllBytes(path), name + " untouched by a read-only reader");
        }
    }
}
