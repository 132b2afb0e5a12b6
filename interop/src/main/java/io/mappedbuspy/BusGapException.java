package io.mappedbuspy;

import java.io.IOException;

/**
 * A rolling-bus reader needs records that no longer exist: retention removed their segments before it read
 * them, or it was asked to start before the oldest retained record (Python: BusGapError).
 */
public final class BusGapException extends IOException {
    private static final long serialVersionUID = 1L;

    private final long lostFrom;
    private final long lostTo;
    private final long lost;

    /**
     * Creates the exception.
     *
     * @param message  what happened, naming the bus and the range
     * @param lostFrom first lost position
     * @param lostTo   position just past the lost range (the oldest retained record)
     * @param lost     record slots in the range
     */
    public BusGapException(String message, long lostFrom, long lostTo, long lost) {
        super(message);
        this.lostFrom = lostFrom;
        this.lostTo = lostTo;
        this.lost = lost;
    }

    /** @return the first lost position */
    public long lostFrom() {
        return lostFrom;
    }

    /** @return the position just past the lost range */
    public long lostTo() {
        return lostTo;
    }

    /** @return the number of record slots lost */
    public long lost() {
        return lost;
    }
}
