package io.mappedbuspy;

import io.mappedbuspy.internal.ArchiveFiles;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A Java writer archives a framed rolling bus whose messages span slots: a continuation slot holds payload, not a
 * status, so the archiver settles a segment by its messages' first slots (read as statuses, zero payload bytes kept a
 * segment hot for ever and random ones stopped the archiver). Python's twin: tests/rolling/test_frames_rolling.py.
 */
public final class ArchiverFramesTest {
    private static final long SEGMENT = 64 << 10;
    private static final int RECORD = 56;

    @TempDir
    Path tmp;

    @ParameterizedTest
    @CsvSource({"NONE,true", "NONE,false", "ZSTD,true", "ZSTD,false"})
    void framedSegmentsOfMultiSlotMessagesMoveAndReadBack(ArchiveCompression c, boolean zeros) throws Exception {
        Path hot = tmp.resolve("hot");
        Path arch = tmp.resolve("archive");
        Random rnd = new Random(5);
        List<byte[]> sent = new ArrayList<>();
        long segments;
        try (RollingBusWriter w = new RollingBusWriter(hot.toString(), SEGMENT, RECORD).setFrames(true)
                .setArchive(arch.toString()).setArchiveAfter(0).setCompress(c).open()) {
            for (int i = 0; i < 120; i++) {
                byte[] b = new byte[rnd.nextInt(6000)];
                if (!zeros) {
                    rnd.nextBytes(b);
                }
                sent.add(b);
                assertTrue(w.write(b, i % 2 == 1 ? "odd" : null));
            }
            segments = w.segment();
            assertTrue(segments >= 3, "segments met: " + segments);
            assertTrue(w.awaitArchived(30, TimeUnit.SECONDS), "full framed segments stayed hot");
            assertEquals(segments, w.archivedSegments());
        }
        assertEquals(segments, ArchiveFiles.list(arch).size());
        try (RollingBusReader r = new RollingBusReader(hot.toString()).setFrames(true).open()) {
            for (int i = 0; i < sent.size(); i++) {
                assertTrue(r.next(), "message " + i);
                FrameMessage m = r.message();
                assertArrayEquals(sent.get(i), m.payload(), "message " + i);
                assertEquals(i % 2 == 1 ? "odd" : null, m.topic());
            }
            assertFalse(r.next());
        }
    }
}
