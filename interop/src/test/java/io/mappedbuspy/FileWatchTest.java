package io.mappedbuspy;

import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import static io.mappedbuspy.Buses.assertContains;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The writers' watch (FileWatch, docs/safety.md): a writer whose file is removed, replaced or truncated, or
 * whose rolling bus's segment or directory goes, throws within a few watch intervals instead of writing into the
 * orphaned file; retention removing a full segment does not stop a rolling writer.
 */
public class FileWatchTest {
    @TempDir
    Path tmp;

    private static final byte[] X = {1, 2, 3};
    // Far above FileWatch.INTERVAL_NS: a loaded machine is slow; before the watch the writes went on for ever.
    private static final long BOUND_NS = 3_000_000_000L;

    private interface Writes {
        void write() throws Exception;
    }

    // Writes until the write throws, for at most BOUND_NS; what it threw.
    private static RuntimeException writeUntilItThrows(Writes w) throws Exception {
        long end = System.nanoTime() + BOUND_NS;
        while (System.nanoTime() < end) {
            try {
                w.write();
            } catch (RuntimeException e) {
                return e;
            }
            Thread.sleep(0, 200_000);
        }
        throw new AssertionError("no error after " + BOUND_NS / 1_000_000 + " ms of writes");
    }

    private static void assertReplaced(RuntimeException e, String path) {
        assertTrue(e instanceof UncheckedIOException && e.getCause() instanceof BusReplacedException, e.toString());
        assertContains(e.getCause().getMessage(), path);
    }

    @Test
    @Timeout(60)
    public void aWriterThrowsWhenItsFileIsRemovedReplacedOrTruncated() throws Exception {
        for (String how : new String[] {"unlink", "replace", "shrink"}) {
            String path = tmp.resolve("bus-" + how).toString();
            try (MappedBusWriter w = new MappedBusWriter(path, 1 << 20, 8).open()) {
                w.write(X, 0, 3);
                Path p = Path.of(path);
                switch (how) {
                    case "unlink" -> Files.delete(p);
                    case "replace" -> {
                        Files.copy(p, Path.of(path + ".new"));
                        Files.move(Path.of(path + ".new"), p, StandardCopyOption.REPLACE_EXISTING);
                    }
                    default -> {
                        try (var f = new java.io.RandomAccessFile(path, "rw")) {
                            f.setLength(4096); // the first page kept: the writes there fault nowhere
                        }
                    }
                }
                RuntimeException e = writeUntilItThrows(() -> w.write(X, 0, 3));
                if (how.equals("shrink")) {
                    assertTrue(e instanceof BusTruncatedException, e.toString());
                    assertContains(e.getMessage(), path);
                } else {
                    assertReplaced(e, path);
                }
                // and every later write too
                assertThrows(RuntimeException.class, () -> w.write(X, 0, 3));
            }
        }
    }

    private static Path segmentZero(String dir) {
        return Path.of(dir, "00000000000000000000.bus");
    }

    @Test
    @Timeout(60)
    public void aRollingWriterThrowsWhenItsSegmentOrDirectoryGoes() throws Exception {
        for (String how : new String[] {"unlink", "replace", "moveDir"}) {
            String dir = tmp.resolve("rolling-" + how).toString();
            try (RollingBusWriter w = new RollingBusWriter(dir, 1 << 20, 8).open()) {
                w.write(X, 0, 3);
                Path seg = segmentZero(dir);
                assertTrue(Files.exists(seg), seg.toString());
                switch (how) {
                    case "unlink" -> Files.delete(seg);
                    case "replace" -> {
                        Files.copy(seg, Path.of(seg + ".new"));
                        Files.move(Path.of(seg + ".new"), seg, StandardCopyOption.REPLACE_EXISTING);
                    }
                    default -> Files.move(Path.of(dir), Path.of(dir + ".old"));
                }
                assertReplaced(writeUntilItThrows(() -> w.write(X, 0, 3)), seg.toString());
            } catch (RuntimeException e) {
                // close() may find the directory moved: what matters was asserted above
            }
        }
    }

    @Test
    @Timeout(60)
    public void retentionRemovingFullSegmentsDoesNotStopARollingWriter() throws Exception {
        String dir = tmp.resolve("retained").toString();
        try (RollingBusWriter w = new RollingBusWriter(dir, 1 << 16, 8).setRetention(2, 0, 0).open()) {
            for (int i = 0; i < 40_000; i++) {
                w.write(X, 0, 3);
                if (i % 4096 == 0) {
                    Thread.sleep(3); // the watch's looks run meanwhile
                }
            }
            assertTrue(w.segment() >= 8, "segment " + w.segment());
        }
        assertTrue(!Files.exists(segmentZero(dir)), "retention removed the full segments");
    }

    // Polls next() every 20 ms (as an event loop would) until it throws, for at most BOUND_NS.
    private interface Poll {
        boolean next() throws Exception;
    }

    private static Exception pollUntilItThrows(Poll p) throws Exception {
        long end = System.nanoTime() + BOUND_NS;
        while (System.nanoTime() < end) {
            try {
                assertTrue(!p.next(), "no record was written");
            } catch (BusReplacedException | BusTruncatedException e) {
                return e;
            }
            Thread.sleep(20);
        }
        throw new AssertionError("no error after " + BOUND_NS / 1_000_000 + " ms of polls");
    }

    @Test
    @Timeout(60)
    public void aRollingReaderNoticesItsSegmentReplacedTruncatedOrItsNewestRemoved() throws Exception {
        for (String how : new String[] {"replace", "shrink", "removeNewest"}) {
            String dir = tmp.resolve("read-" + how).toString();
            try (RollingBusWriter w = new RollingBusWriter(dir, 1 << 20, 8).open()) {
                w.write(X, 0, 3);
            }
            try (RollingBusReader r = new RollingBusReader(dir).open()) {
                assertTrue(r.next());
                Path seg = segmentZero(dir);
                if (how.equals("replace")) { // bus.meta kept as it was: only the segment can tell
                    Files.copy(seg, Path.of(seg + ".new"));
                    Files.move(Path.of(seg + ".new"), seg, StandardCopyOption.REPLACE_EXISTING);
                } else if (how.equals("shrink")) {
                    try (var f = new java.io.RandomAccessFile(seg.toString(), "rw")) {
                        f.setLength(4096);
                    }
                } else { // not retention's: it keeps the newest segment
                    Files.delete(seg);
                }
                Exception e = pollUntilItThrows(r::next);
                assertTrue(how.equals("shrink") ? e instanceof BusTruncatedException
                        : e instanceof BusReplacedException, e.toString());
            }
        }
    }
}
