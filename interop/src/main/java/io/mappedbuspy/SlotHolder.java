package io.mappedbuspy;

/**
 * Who holds a bus position that is reserved and not committed, as the bus's writers file says ({@link SlotHolders}):
 * a live writer (wait for it), a dead one (its slot will never be committed: roll it back, or pass it, at once), or
 * nobody known (a writer of the Java original, no writers file, no JNI library: the rollback timeout decides).
 */
public sealed interface SlotHolder {
    /**
     * A live writer holds it: it may still commit it, however long that takes.
     *
     * @param pid   the pid it recorded for itself (for people: in its own pid namespace)
     * @param begin the first position of its claim
     * @param end   the position past its claim
     */
    record Alive(int pid, long begin, long end) implements SlotHolder { }

    /**
     * Its writer is dead: none of its claim's slots still uncommitted will ever be committed.
     *
     * @param begin the first position of the dead writer's claim
     * @param end   the position past it
     */
    record Dead(long begin, long end) implements SlotHolder {
        /** Whether {@code position} is inside the claim. */
        public boolean holds(long position) {
            return begin <= position && position < end;
        }
    }

    /** No writer known to hold it: only the rollback timeout tells. */
    record Unknown() implements SlotHolder { }

    /** The one {@link Unknown}. */
    SlotHolder UNKNOWN = new Unknown();
}
