package io.mappedbuspy;

/**
 * A rolling bus's retention, fixed when the bus is created and stored in its {@code bus.meta}
 * ({@code retain_segments}, {@code retain_bytes}, {@code retain_age_ms}); 0 means no limit of that kind
 * (docs/files-and-rolling.md, "Retention").
 *
 * @param segments most segments kept
 * @param bytes    most bytes of segments kept (each counted as the segment size)
 * @param ageMs    a segment is removed once its successor was created longer ago than this, in milliseconds
 */
public record Retention(long segments, long bytes, long ageMs) {
    /** No limit: every segment is kept. */
    public static final Retention NONE = new Retention(0, 0, 0);

    /**
     * @throws IllegalArgumentException if a limit is negative
     */
    public Retention {
        if (segments < 0 || bytes < 0 || ageMs < 0) {
            throw new IllegalArgumentException("retention must not be negative, got segments=" + segments
                    + " bytes=" + bytes + " ageMs=" + ageMs);
        }
    }

    /** @return whether any limit is set (retention removes something) */
    public boolean removesAny() {
        return (segments | bytes | ageMs) != 0;
    }

    @Override
    public String toString() {
        return "segments=" + segments + " bytes=" + bytes + " ageMs=" + ageMs;
    }
}
