package io.mappedbuspy;

import io.mappedbuspy.internal.*;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.OptionalLong;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The journal's shared vectors (tests/vectors/journal, made by tests/vectors/make_journal.py;
 * tests/formats/test_journal_vectors.py runs them against Python): each archive form read by {@link ArchiveFiles}
 * gives the records of the vector, and the time index read by {@link TimeIndex} gives the vector's entries and
 * seek_time answers.
 */
public final class JournalVectorsTest {
    private static Path root() {
        String rel = "tests/vectors/journal/journal.json";
        String prop = System.getProperty("mappedbuspy.root");
        if (prop != null) {
            return Paths.get(prop).toAbsolutePath().resolve("tests/vectors/journal");
        }
        for (Path p = Paths.get("").toAbsolutePath(); p != null; p = p.getParent()) {
            if (Files.isRegularFile(p.resolve(rel))) {
                return p.resolve("tests/vectors/journal");
            }
        }
        throw new IllegalStateException("repository root not found: set -Dmappedbuspy.root");
    }

    private static JsonObject vectors() throws Exception {
        return JsonParser.parseString(Files.readString(root().resolve("journal.json"), StandardCharsets.UTF_8))
                .getAsJsonObject();
    }

    @ParameterizedTest
    @ValueSource(strings = {"none", "zstd", "lz4"})
    void archivedSegmentReadsAsTheVectorsRecords(String how) throws Exception {
        JsonObject v = vectors();
        Path dir = root().resolve("archive-" + how);
        long segment = v.get("segment").getAsLong();
        long segmentSize = v.get("segment_size").getAsLong();
        int recordSize = v.get("record_size").getAsInt();
        BusMeta meta = BusMeta.read(dir.resolve(Layout.META_FILE), true);
        ArchiveFiles.Config cfg = ArchiveFiles.config(meta, dir.toString());
        assertEquals(ArchiveFiles.Compression.of(how), cfg.compress());
        ArchiveFiles.Archived a = ArchiveFiles.find(dir, segment);
        assertEquals(ArchiveFiles.Compression.of(how), a.compression());
        assertEquals(a, ArchiveFiles.list(dir).get(segment));
        try (MemoryMappedFile m = ArchiveFiles.open(a, segmentSize, recordSize, true)) {
            assertEquals(v.get("mapped_size").getAsLong(), m.size());
            long base = segment * segmentSize;
            for (JsonElement e : v.getAsJsonArray("records")) {
                JsonObject r = e.getAsJsonObject();
                long off = r.get("position").getAsLong() - base;
                assertEquals(Layout.STATUS_COMMITTED, m.getInt(off + Layout.STATUS_OFFSET));
                assertEquals(r.get("meta").getAsInt(), m.getInt(off + Layout.METADATA_OFFSET));
                byte[] payload = r.get("payload").getAsString().getBytes(StandardCharsets.UTF_8);
                byte[] got = new byte[payload.length];
                m.getBytes(off + Layout.PAYLOAD_OFFSET, got, 0, got.length);
                assertEquals(new String(payload, StandardCharsets.UTF_8), new String(got, StandardCharsets.UTF_8));
            }
            for (JsonElement e : v.getAsJsonArray("rolled_back")) {
                assertEquals(Layout.STATUS_ROLLED_BACK, m.getInt(e.getAsLong() - base + Layout.STATUS_OFFSET));
            }
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"none", "zstd", "lz4"})
    void timeIndexGivesTheVectorsEntriesAndSeekAnswers(String how) throws Exception {
        JsonObject v = vectors();
        long segment = v.get("segment").getAsLong();
        TimeIndex ix = TimeIndex.read(TimeIndex.path(root().resolve("archive-" + how), segment),
                v.get("bus_id").getAsString(), segment, v.get("segment_size").getAsLong(),
                v.get("record_size").getAsInt(), true);
        assertEquals(v.getAsJsonObject("torn_bytes").get("archive-" + how).getAsInt(), ix.torn());
        int n = v.getAsJsonArray("index_entries").size();
        assertEquals(n, ix.times().length);
        long[] times = ix.times();
        for (int i = 1; i < n; i++) {
            assertTrue(times[i - 1] <= times[i]);
        }
        for (JsonElement e : v.getAsJsonArray("seek_time")) {
            JsonObject c = e.getAsJsonObject();
            OptionalLong got = ix.firstAtOrAfter(TimeIndex.floorMs(c.get("t_ns").getAsLong()));
            JsonElement want = c.get("position");
            assertEquals(want.isJsonNull() ? OptionalLong.empty() : OptionalLong.of(want.getAsLong()), got,
                    "seek_time(" + c.get("t_ns") + ")");
        }
    }
}
