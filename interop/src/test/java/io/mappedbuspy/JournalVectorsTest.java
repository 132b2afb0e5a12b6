package io.mappedbuspy;

import io.mappedbuspy.internal.*;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.stream.Collectors;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The journal's shared vectors (tests/vectors/journal, made by tests/vectors/make_journal.py;
 * tests/formats/test_journal_vectors.py runs them against Python): each archive form read by {@link ArchiveFiles}
 * (none; zstd, the seekable format of four frames; zstd-oneframe, one frame as the first archivers wrote; lz4) gives
 * the records of the vector, the seekable file's {@link ZstdSeekTable} lists the vector's frames, and the time index
 * read by {@link TimeIndex} gives the vector's entries and seek_time answers.
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

    // The compression of a vector's archive directory (archive-<how>): zstd-oneframe is zstd too.
    private static ArchiveFiles.Compression compression(String how) {
        return ArchiveFiles.Compression.of(how.equals("zstd-oneframe") ? "zstd" : how);
    }

    @ParameterizedTest
    @ValueSource(strings = {"none", "zstd", "zstd-oneframe", "lz4"})
    void archivedSegmentReadsAsTheVectorsRecords(String how) throws Exception {
        JsonObject v = vectors();
        Path dir = root().resolve("archive-" + how);
        long segment = v.get("segment").getAsLong();
        long segmentSize = v.get("segment_size").getAsLong();
        int recordSize = v.get("record_size").getAsInt();
        BusMeta meta = BusMeta.read(dir.resolve(Layout.META_FILE), true);
        ArchiveFiles.Config cfg = ArchiveFiles.config(meta, dir.toString());
        assertEquals(compression(how), cfg.compress());
        ArchiveFiles.Archived a = ArchiveFiles.find(dir, segment);
        assertEquals(compression(how), a.compression());
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

    @Test
    void theSeekableZstdVectorsTableListsItsFrames() throws Exception {
        JsonObject v = vectors();
        long segment = v.get("segment").getAsLong();
        long mapped = v.get("mapped_size").getAsLong();
        Path seekable = ArchiveFiles.find(root().resolve("archive-zstd"), segment).path();
        byte[] stored = Files.readAllBytes(seekable);
        ZstdSeekTable t = ZstdSeekTable.read(ByteBuffer.wrap(stored), mapped, seekable).orElseThrow();
        List<Integer> want = new ArrayList<>();
        v.getAsJsonArray("zstd_frames").forEach(e -> want.add(e.getAsInt()));
        assertEquals(want, t.frames().stream().map(ZstdSeekTable.Frame::dstSize).collect(Collectors.toList()));
        long src = 0;
        long dst = 0;
        for (ZstdSeekTable.Frame f : t.frames()) {
            assertEquals(src, f.srcOffset());
            assertEquals(dst, f.dstOffset());
            src += f.srcSize();
            dst += f.dstSize();
        }
        assertEquals(mapped, dst);
        assertEquals(stored.length, src + ZstdSeekTable.encodedSize(t.frames().size()));
        // The one-frame file has no table: read as one frame.
        Path one = ArchiveFiles.find(root().resolve("archive-zstd-oneframe"), segment).path();
        assertEquals(Optional.empty(), ZstdSeekTable.read(ByteBuffer.wrap(Files.readAllBytes(one)), mapped, one));
    }

    @ParameterizedTest
    @ValueSource(strings = {"none", "zstd", "zstd-oneframe", "lz4"})
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
