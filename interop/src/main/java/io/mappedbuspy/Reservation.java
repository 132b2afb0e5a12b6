package io.mappedbuspy;

/**
 * Contiguous record slots reserved by one fetch-and-add of a bus file's limit, for a caller that fills and commits
 * them itself ({@link MappedBusWriter#reserve}, {@link RollingBusWriter#reserve}): they are the caller's alone and
 * stay uncommitted until it commits (or rolls back) each of them.
 *
 * @param first the first slot: an offset in the bus file, or on a rolling bus a global position
 * @param count slots reserved, consecutive from {@code first}; 0 when the file had no room left
 */
public record Reservation(long first, long count) { }
