package io.mappedbuspy;

/**
 * The states of one segment's move from the hot directory into the archive (docs/design/journal.md, "The move";
 * Layout's MOVE_STATES, Python's {@code rolling.archive.MoveState}), in order. A Java and a Python archiver run the
 * same steps on the same files: either completes what the other left when it was killed.
 */
public enum MoveState {
    /** Every slot of the segment is committed or rolled back. */
    MOVE_SETTLED,
    /** Its time index is in the archive (renamed there; the directory is fsynced with the batch). */
    MOVE_INDEX,
    /** Its copy is in a temporary file of the archive, fsynced. */
    MOVE_COPIED,
    /** The copy has its name in the archive, the directory fsynced: in both tiers (the hot one is read). */
    MOVE_RENAMED,
    /** The hot segment and its index are removed, the hot directory fsynced: archived only. */
    MOVE_UNLINKED
}
