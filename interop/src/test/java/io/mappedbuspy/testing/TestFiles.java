package io.mappedbuspy.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Comparator;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;

/** Scratch files for tests, in one temporary directory per run that {@link TestRunner} deletes. */
public final class TestFiles {
    private static final AtomicInteger COUNTER = new AtomicInteger();
    private static Path dir;

    private TestFiles() {
    }

    /**
     * A path for a new file (not created).
     *
     * @param name a name hint
     * @return a unique path in the run's scratch directory
     */
    public static synchronized String newPath(String name) {
        try {
            if (dir == null) {
                dir = Files.createTempDirectory("mappedbuspy-java-test");
            }
            return dir.resolve(COUNTER.incrementAndGet() + "-" + name).toString();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * The repository root: the system property {@code mappedbuspy.root}, else the first directory from
     * the working directory upwards that holds {@code tests/data/golden/manifest.json}.
     *
     * @return the root, or null if not found
     */
    public static Path repoRoot() {
        String prop = System.getProperty("mappedbuspy.root");
        if (prop != null) {
            return Paths.get(prop).toAbsolutePath();
        }
        for (Path p = Paths.get("").toAbsolutePath(); p != null; p = p.getParent()) {
            if (Files.isRegularFile(p.resolve("tests/data/golden/manifest.json"))) {
                return p;
            }
        }
        return null;
    }

    static synchronized void deleteAll() {
        if (dir == null) {
            return;
        }
        try (Stream<Path> s = Files.walk(dir)) {
            s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException e) {
            System.err.println("could not delete " + dir + ": " + e);
        }
        dir = null;
    }
}
