package io.mappedbuspy.spark.write;

import io.mappedbuspy.Layout;
import io.mappedbuspy.internal.RollingLayout;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.LongPredicate;
import java.util.stream.Stream;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import org.junit.jupiter.api.DynamicContainer;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The language-neutral vectors of {@code tests/vectors/commitlog.json}, run against {@link CommitLog}: its entries'
 * bytes both ways, the entries read from a log file, and the recovery decision ({@link CommitLog#recover}).
 * tests/formats/test_commitlog_vectors.py runs the same file against {@code mappedbus_py/formats/commitlog.py}.
 */
public final class CommitLogVectorsTest {
    private static final String[] SECTIONS = {"entries", "files", "recovery"};

    /** tests/vectors/commitlog.json: under {@code -Dmappedbuspy.root}, else the first directory upwards holding it. */
    private static Path vectorsFile() {
        String rel = "tests/vectors/commitlog.json";
        String prop = System.getProperty("mappedbuspy.root");
        if (prop != null) {
            return Paths.get(prop).toAbsolutePath().resolve(rel);
        }
        for (Path p = Paths.get("").toAbsolutePath(); p != null; p = p.getParent()) {
            if (Files.isRegularFile(p.resolve(rel))) {
                return p.resolve(rel);
            }
        }
        throw new IllegalStateException(
                "repository root not found: set -Dmappedbuspy.root or run from inside the repository");
    }

    private static Map<String, JsonArray> sections() throws Exception {
        JsonObject all = JsonParser.parseString(new String(Files.readAllBytes(vectorsFile()), StandardCharsets.UTF_8))
                .getAsJsonObject();
        Map<String, JsonArray> out = new LinkedHashMap<>();
        for (Map.Entry<String, JsonElement> e : all.entrySet()) {
            if (e.getValue().isJsonArray()) {
                out.put(e.getKey(), e.getValue().getAsJsonArray());
            }
        }
        return out;
    }

    @Test
    void everySectionHasCases() throws Exception {
        Map<String, Integer> counts = new TreeMap<>();
        int total = 0;
        for (Map.Entry<String, JsonArray> e : sections().entrySet()) {
            counts.put(e.getKey(), e.getValue().size());
            total += e.getValue().size();
        }
        System.out.println("commitlog vectors: " + counts + " total " + total);
        assertEquals(Set.of(SECTIONS), counts.keySet(), "the sections of commitlog.json");
        counts.forEach((k, n) -> assertTrue(n > 0, "section " + k + " has no case"));
    }

    @TestFactory
    Stream<DynamicContainer> vectorCases() throws Exception {
        List<DynamicContainer> out = new ArrayList<>();
        Map<String, Integer> counts = new TreeMap<>();
        for (Map.Entry<String, JsonArray> section : sections().entrySet()) {
            List<DynamicTest> cases = new ArrayList<>();
            int i = 0;
            for (JsonElement c : section.getValue()) {
                JsonObject v = c.getAsJsonObject();
                String name = i++ + ": " + v.get("why").getAsString();
                switch (section.getKey()) {
                    case "entries":
                        cases.add(DynamicTest.dynamicTest(name, () -> entry(v)));
                        break;
                    case "files":
                        cases.add(DynamicTest.dynamicTest(name, () -> file(v)));
                        break;
                    case "recovery":
                        cases.add(DynamicTest.dynamicTest(name, () -> recovery(v)));
                        break;
                    default:
                        continue; // everySectionHasCases fails
                }
            }
            counts.put(section.getKey(), cases.size());
            out.add(DynamicContainer.dynamicContainer(section.getKey(), cases));
        }
        System.out.println("commitlog vectors run by JUnit: " + counts + " total "
                + counts.values().stream().mapToInt(Integer::intValue).sum());
        return out.stream();
    }

    private static byte[] hex(String s) {
        byte[] b = new byte[s.length() / 2];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        }
        return b;
    }

    private static long l(JsonObject v, String k) {
        return v.get(k).getAsLong();
    }

    private static void entry(JsonObject v) {
        byte[] bytes = hex(v.get("hex").getAsString());
        assertEquals(Layout.COMMIT_ENTRY_SIZE, bytes.length);
        CommitLog.Entry e = CommitLog.decode(ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN), 0);
        if (!v.get("valid").getAsBoolean()) {
            assertNull(e, "not an entry");
            return;
        }
        CommitLog.Entry want = new CommitLog.Entry((int) l(v, "kind"), l(v, "query_hi"), l(v, "query_lo"),
                l(v, "epoch"), (int) l(v, "partition"), l(v, "first"), l(v, "count"), l(v, "source"));
        assertEquals(fields(want), fields(e), "decoded");
        assertArrayEquals(bytes, want.encode(), "encoded");
    }

    private static List<Long> fields(CommitLog.Entry e) {
        return List.of((long) e.kind, e.queryHi, e.queryLo, e.epoch, (long) e.partition, e.first, e.count, e.source);
    }

    private static void file(JsonObject v) throws Exception {
        Path p = Files.createTempFile("commitlog-vector", ".commits");
        try {
            Files.write(p, hex(v.get("hex").getAsString()));
            List<Long> kinds = new ArrayList<>();
            try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ)) {
                for (CommitLog.Entry e : CommitLog.readAll(ch)) {
                    kinds.add((long) e.kind);
                }
            }
            List<Long> want = new ArrayList<>();
            v.getAsJsonArray("kinds").forEach(k -> want.add(k.getAsLong()));
            assertEquals(want, kinds);
        } finally {
            Files.delete(p);
        }
    }

    private static void recovery(JsonObject v) {
        JsonObject key = v.getAsJsonObject("key");
        CommitLog.Key k = new CommitLog.Key(l(key, "query_hi"), l(key, "query_lo"), l(key, "epoch"),
                (int) l(key, "partition"));
        List<CommitLog.Entry> log = new ArrayList<>();
        for (JsonElement x : v.getAsJsonArray("log")) {
            JsonObject e = x.getAsJsonObject();
            log.add(new CommitLog.Entry((int) l(e, "kind"), l(e.has("query_hi") ? e : key, "query_hi"),
                    l(e.has("query_lo") ? e : key, "query_lo"), l(e.has("epoch") ? e : key, "epoch"),
                    (int) l(e.has("partition") ? e : key, "partition"), l(e, "first"), l(e, "count"), l(e, "source")));
        }
        LongPredicate present;
        if (v.get("segment_size").isJsonNull()) {
            present = p -> true; // a single file
        } else {
            long ss = l(v, "segment_size");
            int rs = (int) l(v, "record_size");
            Set<Long> segments = new HashSet<>();
            v.getAsJsonArray("segments").forEach(s -> segments.add(s.getAsLong()));
            present = p -> segments.contains(RollingLayout.locate(p, ss, rs).segment());
        }
        CommitLog.Recovery r = CommitLog.recover(log, k, present);
        assertEquals(v.get("action").getAsString(), action(r), "action");
        assertEquals(ranges(v.getAsJsonArray("voids")), ranges(r.voids()), "voids");
        CommitLog.Group group = r instanceof CommitLog.Recovery.Finish f ? f.group()
                : r instanceof CommitLog.Recovery.Fail f ? f.group() : null;
        if (v.get("group").isJsonNull()) {
            assertNull(group, "group");
        } else {
            JsonObject g = v.getAsJsonObject("group");
            assertEquals(List.of(l(g, "first"), l(g, "source")), List.of(group.first, group.source), "group");
            assertEquals(ranges(g.getAsJsonArray("ranges")), ranges(group.parts), "group's ranges");
        }
        if (v.get("removed").isJsonNull()) {
            assertFalse(r instanceof CommitLog.Recovery.Fail, "removed");
        } else {
            CommitLog.Range removed = ((CommitLog.Recovery.Fail) r).removed();
            assertEquals(ranges(List.of(v.getAsJsonArray("removed"))), ranges(List.of(removed)), "removed");
        }
    }

    /** The vectors' name of a decision (mappedbus_py's commit log names its actions so). */
    private static String action(CommitLog.Recovery r) {
        if (r instanceof CommitLog.Recovery.Nothing) {
            return "nothing";
        } else if (r instanceof CommitLog.Recovery.Write) {
            return "write";
        } else if (r instanceof CommitLog.Recovery.Finish) {
            return "finish";
        } else if (r instanceof CommitLog.Recovery.Fail) {
            return "fail";
        }
        return "corrupt";
    }

    private static List<List<Long>> ranges(Iterable<?> rs) {
        List<List<Long>> out = new ArrayList<>();
        for (Object o : rs) {
            if (o instanceof CommitLog.Range) {
                CommitLog.Range r = (CommitLog.Range) o;
                out.add(List.of(r.first, r.count, r.source));
            } else {
                JsonArray a = ((JsonElement) o).getAsJsonArray();
                out.add(List.of(a.get(0).getAsLong(), a.get(1).getAsLong(), a.get(2).getAsLong()));
            }
        }
        return out;
    }
}
