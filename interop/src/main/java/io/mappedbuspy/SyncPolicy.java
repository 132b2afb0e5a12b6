package io.mappedbuspy;

/**
 * What a rolling writer sends to the disk and when (docs/journal.md, "Durability"; Python: {@code sync=}). A process
 * crash loses nothing committed under any policy (the page cache holds it); a power loss keeps what was synced. On
 * {@code /dev/shm} (tmpfs) nothing survives a reboot: the calls are made and do nothing.
 */
public enum SyncPolicy {
    /** Nothing on its own; {@link RollingBusWriter#sync()} when the caller asks. */
    NONE("none"),
    /** When the writer rolls out of a full segment: that segment and its time index (fdatasync), the directory. */
    SEGMENT("segment"),
    /** Every sync interval, on a thread of the writer: what {@link RollingBusWriter#sync()} does. */
    INTERVAL("interval");

    private final String text;

    SyncPolicy(String text) {
        this.text = text;
    }

    /** @return the name Python uses ({@code sync="none" | "segment" | "interval"}) */
    public String text() {
        return text;
    }

    /**
     * The policy of a name.
     *
     * @param text none, segment or interval
     * @return it
     * @throws IllegalArgumentException for another name
     */
    public static SyncPolicy of(String text) {
        for (SyncPolicy p : values()) {
            if (p.text.equals(text)) {
                return p;
            }
        }
        throw new IllegalArgumentException("sync must be none, segment or interval, got '" + text + "'");
    }
}
