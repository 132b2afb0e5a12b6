package io.mappedbuspy;

import io.mappedbuspy.testing.MiniJson;
import io.mappedbuspy.testing.Test;
import io.mappedbuspy.testing.TestFiles;

import java.io.EOFException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static io.mappedbuspy.testing.Assert.assertArrayEquals;
import static io.mappedbuspy.testing.Assert.assertEquals;
import static io.mappedbuspy.testing.Assert.assertTrue;
import static io.mappedbuspy.testing.Assert.fail;

/** Files written by the Java original (tests/data/golden) read exactly as manifest.json says. */
public final class GoldenTest {
    private static Path goldenDir() {
        Path root = TestFiles.repoRoot();
        if (root == null) {
            fail("repository root not found: set -Dmappedbuspy.root or run from inside the repository");
        }
        return root.resolve("tests/data/golden");
    }

    @SuppressWarnings("unchecked")
    private static List<Map<String, Object>> manifest() throws Exception {
        String text = new String(Files.readAllBytes(goldenDir().resolve("manifest.json")), StandardCharsets.UTF_8);
        return (List<Map<String, Object>>) ((Map<String, Object>) MiniJson.parse(text)).get("files");
    }

    private static long num(Map<String, Object> m, String key) {
        return ((Number) m.get(key)).longValue();
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

    private static void checkAll(boolean readOnly) throws Exception {
        List<Map<String, Object>> files = manifest();
        assertTrue("manifest lists files", files.size() >= 7);
        for (Map<String, Object> f : files) {
            String name = (String) f.get("file");
            Path src = goldenDir().resolve(name);
            assertEquals(name + " bytes on disk", num(f, "bytes_on_disk"), Files.size(src));
            String path = TestFiles.newPath(name);
            Files.copy(src, Paths.get(path));
            Paths.get(path).toFile().setWritable(true, true); // the shared originals are read-only
            byte[] before = Files.readAllBytes(Paths.get(path));
            long fileSize = num(f, "file_size");
            int recordSize = (int) num(f, "record_size");
            try (MemoryMappedFile mem = new MemoryMappedFile(path, fileSize, true)) {
                assertEquals(name + " limit", num(f, "limit"), mem.getLongAcquire(Layout.LIMIT_OFFSET));
                @SuppressWarnings("unchecked")
                List<Map<String, Object>> slots = (List<Map<String, Object>>) f.get("slots");
                for (Map<String, Object> s : slots) {
                    assertEquals(name + " status at " + s.get("offset"), num(s, "status"), mem.getStatus(num(s, "offset")));
                }
            }
            List<String> expected = new ArrayList<>();
            @SuppressWarnings("unchecked")
            List<Map<String, Object>> delivered = (List<Map<String, Object>>) f.get("delivered_when_uncommitted_rolled_back");
            for (Map<String, Object> d : delivered) {
                expected.add(num(d, "offset") + " " + num(d, "meta") + " " + d.get("payload_hex"));
            }
            List<String> got = readAll(path, fileSize, recordSize, readOnly);
            assertEquals(name + " records", expected.size(), got.size());
            for (int i = 0; i < expected.size(); i++) {
                assertEquals(name + " record " + i, expected.get(i), got.get(i));
            }
            if (readOnly) {
                assertArrayEquals(name + " untouched by a read-only reader", before, Files.readAllBytes(Paths.get(path)));
            }
        }
    }

    /** A read-write reader delivers what the manifest lists (rolling back the uncommitted slot). */
    @Test
    public void goldenFilesReadAsManifestSays() throws Exception {
        checkAll(false);
    }

    /** A read-only reader delivers the same records and leaves the files byte-identical. */
    @Test
    public void goldenFilesReadOnlyLeavesThemUntouched() throws Exception {
        checkAll(true);
    }
}
