package io.mappedbuspy;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Consumer;
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
import io.mappedbuspy.internal.BusMeta;
import io.mappedbuspy.internal.ConsumerEntry;
import io.mappedbuspy.internal.ConsumerRetention;
import io.mappedbuspy.internal.Liveness;
import io.mappedbuspy.internal.RollingLayout;

/**
 * The language-neutral vectors of {@code tests/vectors/rolling.json}, run against the JVM side's pure functions
 * ({@link RollingLayout}, {@link Layout}, {@link ConsumerRetention}); tests/rolling/test_vectors.py runs the same file
 * against Python's. Every case of every section is one dynamic test, named by its "why".
 */
public final class VectorsTest {
    /** Each section of the file and how one of its cases is checked; a section without a runner fails. */
    private static final Map<String, Consumer<JsonObject>> RUNNERS = new LinkedHashMap<>();

    static {
        RUNNERS.put("positions", VectorsTest::positions);
        RUNNERS.put("grid", VectorsTest::grid);
        RUNNERS.put("slot_index", VectorsTest::slotIndex);
        RUNNERS.put("retention", VectorsTest::retention);
        RUNNERS.put("gaps", VectorsTest::gaps);
        RUNNERS.put("lag", VectorsTest::lag);
        RUNNERS.put("consumer_needs", VectorsTest::consumerNeeds);
        RUNNERS.put("consumer_retention", VectorsTest::consumerRetention);
    }

    /** tests/vectors/rolling.json: under {@code -Dmappedbuspy.root}, else the first directory upwards holding it. */
    private static Path vectorsFile() {
        String rel = "tests/vectors/rolling.json";
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

    private static JsonObject vectors() throws Exception {
        return JsonParser.parseString(new String(Files.readAllBytes(vectorsFile()), StandardCharsets.UTF_8))
                .getAsJsonObject();
    }

    /** The sections of the file (every array in it) with their cases. */
    private static Map<String, JsonArray> sections() throws Exception {
        Map<String, JsonArray> out = new LinkedHashMap<>();
        for (Map.Entry<String, JsonElement> e : vectors().entrySet()) {
            if (e.getValue().isJsonArray()) {
                out.put(e.getKey(), e.getValue().getAsJsonArray());
            }
        }
        return out;
    }

    @Test
    void everySectionHasCasesAndARunner() throws Exception {
        Map<String, Integer> counts = new TreeMap<>();
        int total = 0;
        for (Map.Entry<String, JsonArray> e : sections().entrySet()) {
            counts.put(e.getKey(), e.getValue().size());
            total += e.getValue().size();
        }
        System.out.println("vectors: " + counts + " total " + total);
        assertEquals(Set.copyOf(RUNNERS.keySet()), counts.keySet(), "a section of rolling.json without a Java runner");
        counts.forEach((k, n) -> assertEquals(true, n > 0, "section " + k + " has no case"));
    }

    @TestFactory
    Stream<DynamicContainer> vectorCases() throws Exception {
        List<DynamicContainer> out = new ArrayList<>();
        Map<String, Integer> counts = new TreeMap<>();
        for (Map.Entry<String, JsonArray> section : sections().entrySet()) {
            Consumer<JsonObject> run = RUNNERS.get(section.getKey());
            if (run == null) {
                continue; // everySectionHasCasesAndARunner fails
            }
            List<DynamicTest> cases = new ArrayList<>();
            int i = 0;
            for (JsonElement c : section.getValue()) {
                JsonObject v = c.getAsJsonObject();
                String name = i++ + ": " + (v.has("why") ? v.get("why").getAsString() : v.toString());
                cases.add(DynamicTest.dynamicTest(name, () -> run.accept(v)));
            }
            counts.put(section.getKey(), cases.size());
            out.add(DynamicContainer.dynamicContainer(section.getKey(), cases));
        }
        System.out.println("vectors run by JUnit: " + counts + " total "
                + counts.values().stream().mapToInt(Integer::intValue).sum());
        return out.stream();
    }

    private static long l(JsonObject v, String k) {
        return v.get(k).getAsLong();
    }

    private static int i(JsonObject v, String k) {
        return v.get(k).getAsInt();
    }

    /** A nullable segment index: null is {@link RollingLayout#NO_HOLD}. */
    private static long hold(JsonObject v, String k) {
        return v.get(k).isJsonNull() ? RollingLayout.NO_HOLD : v.get(k).getAsLong();
    }

    private static long[] longs(JsonObject v, String k) {
        JsonArray a = v.getAsJsonArray(k);
        long[] out = new long[a.size()];
        for (int j = 0; j < out.length; j++) {
            out[j] = a.get(j).getAsLong();
        }
        return out;
    }

    private static List<String> strings(JsonObject v, String k) {
        List<String> out = new ArrayList<>();
        for (JsonElement e : v.getAsJsonArray(k)) {
            out.add(e.getAsString());
        }
        return out;
    }

    static void positions(JsonObject v) {
        long seg = l(v, "segment_size");
        int rec = i(v, "record_size");
        RollingLayout.SegmentOffset at = RollingLayout.locate(l(v, "position"), seg, rec);
        assertEquals(new RollingLayout.SegmentOffset(l(v, "segment"), l(v, "offset")), at, "locate");
        assertEquals(l(v, "position"), Layout.joinPosition(at.segment(), at.offset(), seg), "joinPosition");
        assertEquals(v.get("on_grid").getAsBoolean(), RollingLayout.onGrid(at.offset(), seg, rec), "onGrid");
        assertEquals(v.get("on_grid").getAsBoolean(), RollingLayout.isPosition(l(v, "position"), seg, rec),
                "isPosition");
    }

    static void grid(JsonObject v) {
        long seg = l(v, "segment_size");
        int rec = i(v, "record_size");
        assertEquals(l(v, "slot_size"), Layout.slotSize(rec), "slotSize");
        assertEquals(l(v, "end_boundary"), RollingLayout.endBoundary(seg, rec), "endBoundary");
        assertEquals(l(v, "slots_per_segment"), RollingLayout.slotsPerSegment(seg, rec), "slotsPerSegment");
        assertEquals(l(v, "spare_trigger"), RollingLayout.spareTrigger(seg, rec), "spareTrigger");
    }

    static void slotIndex(JsonObject v) {
        assertEquals(l(v, "slot_index"), Layout.recordIndex(l(v, "offset"), i(v, "record_size")), "recordIndex");
    }

    static void retention(JsonObject v) {
        BusMeta meta = BusMeta.rolling(8, l(v, "segment_size"),
                new Retention(l(v, "retain_segments"), l(v, "retain_bytes"), l(v, "retain_age_ms")));
        Map<Long, Long> full = new HashMap<>();
        for (Map.Entry<String, JsonElement> e : v.getAsJsonObject("full_ms").entrySet()) {
            full.put(Long.parseLong(e.getKey()), e.getValue().getAsLong());
        }
        long[] removes = RollingLayout.retentionPlan(longs(v, "segments"), meta, l(v, "newest"), l(v, "keep_from"),
                l(v, "now_ms"), full::get, hold(v, "hold_from"));
        assertArrayEquals(longs(v, "removes"), removes, "retentionPlan");
    }

    static void gaps(JsonObject v) {
        RollingLayout.Gap g = RollingLayout.gapRange(l(v, "from_segment"), l(v, "from_offset"), l(v, "oldest"),
                l(v, "segment_size"), i(v, "record_size"));
        assertEquals(new RollingLayout.Gap(l(v, "lost_from"), l(v, "lost_to"), l(v, "lost")), g, "gapRange");
    }

    static void lag(JsonObject v) {
        assertEquals(l(v, "records"), RollingLayout.recordsBetween(l(v, "position"), l(v, "head_segment"),
                l(v, "head_limit"), l(v, "segment_size"), i(v, "record_size")), "recordsBetween");
    }

    static void consumerNeeds(JsonObject v) {
        assertEquals(l(v, "needs"), RollingLayout.consumerSegment(l(v, "position"), l(v, "segment_size"),
                i(v, "record_size")), "consumerSegment");
    }

    static void consumerRetention(JsonObject v) {
        BusMeta meta = BusMeta.rolling(i(v, "record_size"), l(v, "segment_size"), Retention.NONE,
                new ConsumerPolicy(l(v, "max_consumer_lag"), OnConsumerLag.of(v.get("on_consumer_lag").getAsString()),
                        Layout.DEFAULT_CONSUMER_BLOCK_MS));
        List<ConsumerEntry> entries = new ArrayList<>();
        int index = 0;
        for (JsonElement c : v.getAsJsonArray("consumers")) {
            JsonObject o = c.getAsJsonObject();
            int flags = o.get("expired").getAsBoolean() ? Layout.CONSUMER_FLAG_EXPIRED : 0;
            entries.add(new ConsumerEntry(index++, 1, flags, 0, 0, l(o, "position"), 0, 0,
                    new byte[Layout.CONSUMER_BUS_ID_SIZE], o.get("name").getAsString(), Liveness.DEAD));
        }
        ConsumerRetention.Plan plan = ConsumerRetention.consumerRetention(entries, meta, l(v, "current"));
        assertEquals(hold(v, "hold_from"), plan.hold, "consumerRetention: hold");
        assertEquals(strings(v, "expire"), names(plan.expire), "consumerRetention: expire");
        if (v.has("target")) {
            assertEquals(strings(v, "blockers"), names(ConsumerRetention.consumerBlockers(entries, meta,
                    l(v, "target"))), "consumerBlockers");
        }
    }

    private static List<String> names(List<ConsumerEntry> entries) {
        List<String> out = new ArrayList<>();
        for (ConsumerEntry e : entries) {
            out.add(e.name);
        }
        return out;
    }
}
