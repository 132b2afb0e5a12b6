package io.mappedbuspy;

import java.util.SplittableRandom;
import java.util.stream.Stream;

/**
 * Seeds for property-style tests: each {@code @MethodSource} case is one seed, shown in the test's display
 * name ({@code seed=5f3a...}), from which the test draws its random case. A failure is repeated by running
 * that one seed:
 * <pre>
 *   JAVA_TOOL_OPTIONS=-Dmappedbuspy.seed=5f3a... interop/test.sh core --select-class io.mappedbuspy.StatusPropertiesTest
 * </pre>
 * Without {@code mappedbuspy.seed} every run draws new seeds (as hypothesis does), {@link #CASES} per test
 * ({@code -Dmappedbuspy.cases=N} changes it).
 */
final class Seeds {
    static final String SEED_PROPERTY = "mappedbuspy.seed";
    static final int CASES = Integer.getInteger("mappedbuspy.cases", 200);

    private Seeds() {
    }

    /** {@code n} seeds (or only the one given by {@code -Dmappedbuspy.seed}), as hex strings. */
    static Stream<String> seeds(int n) {
        String replay = System.getProperty(SEED_PROPERTY);
        if (replay != null && !replay.isBlank()) {
            return Stream.of(hex(Long.parseUnsignedLong(replay.trim().replaceFirst("^seed=", ""), 16)));
        }
        SplittableRandom base = new SplittableRandom();
        return Stream.generate(base::nextLong).limit(n).map(Seeds::hex);
    }

    static Stream<String> seeds() {
        return seeds(CASES);
    }

    static SplittableRandom random(String seed) {
        return new SplittableRandom(Long.parseUnsignedLong(seed, 16));
    }

    private static String hex(long seed) {
        return String.format("%016x", seed);
    }
}
