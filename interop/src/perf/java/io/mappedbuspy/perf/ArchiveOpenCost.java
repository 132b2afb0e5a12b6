package io.mappedbuspy.perf;

import io.mappedbuspy.internal.ArchiveFiles;
import io.mappedbuspy.internal.MemoryMappedFile;

import java.io.IOException;
import java.nio.file.Path;
import java.util.Collection;

/**
 * Benchmark driver (perf/bench_journal_java.py): what a Java reader pays to open each segment of an archive, apart
 * from reading its records: {@link ArchiveFiles#open} and close, which for a compressed archive is reading the file
 * and decompressing it into memory. Set beside the reader's rate from memory, it says how near a reader of the
 * archive is to the most a reader that decompresses each segment before reading it can do.
 *
 * <pre>
 *   ArchiveOpenCost archiveDir segmentSize recordSize passes
 *     -> "opened &lt;segments&gt; &lt;seconds&gt;": the last pass's time (the earlier ones warm the JIT and the codec)
 * </pre>
 */
public final class ArchiveOpenCost {
    private ArchiveOpenCost() {
    }

    /**
     * Runs the driver.
     *
     * @param a archiveDir segmentSize recordSize passes
     * @throws IOException if a segment does not open
     */
    public static void main(String[] a) throws IOException {
        if (a.length != 4) {
            System.err.println("usage: ArchiveOpenCost archiveDir segmentSize recordSize passes");
            System.exit(2);
        }
        Path dir = Path.of(a[0]);
        long segmentSize = Long.parseLong(a[1]);
        int recordSize = Integer.parseInt(a[2]);
        int passes = Integer.parseInt(a[3]);
        if (passes < 1) {
            throw new IllegalArgumentException("passes must be at least 1, got " + passes);
        }
        Collection<ArchiveFiles.Archived> segments = ArchiveFiles.list(dir).values();
        if (segments.isEmpty()) {
            throw new IOException(dir + " holds no archived segment");
        }
        long took = 0;
        for (int p = 0; p < passes; p++) {
            long t0 = System.nanoTime();
            for (ArchiveFiles.Archived s : segments) {
                MemoryMappedFile m = ArchiveFiles.open(s, segmentSize, recordSize, false);
                m.closeAndUnmap();
            }
            took = System.nanoTime() - t0;
        }
        System.out.printf("opened %d %.6f%n", segments.size(), took / 1e9);
    }
}
