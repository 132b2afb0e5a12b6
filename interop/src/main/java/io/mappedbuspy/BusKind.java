package io.mappedbuspy;

/** The kind of a bus, as its metadata file stores it ({@code kind=}). */
public enum BusKind {
    /** One file of the Mappedbus 0.5.1 format, {@code PATH} with {@code PATH.meta}. */
    SINGLE("single"),
    /** A directory of numbered segments with {@code DIR/bus.meta}. */
    ROLLING("rolling");

    private final String text;

    BusKind(String text) {
        this.text = text;
    }

    /** @return the value as the metadata file stores it: "single" or "rolling" */
    public String text() {
        return text;
    }

    /**
     * The kind a metadata value names. Internal: not a supported API (public for io.mappedbuspy.internal's
     * metadata reader).
     *
     * @param text "single" or "rolling"
     * @return the kind, or null for another value (the caller names the file in its error)
     */
    public static BusKind ofText(String text) {
        for (BusKind k : values()) {
            if (k.text.equals(text)) {
                return k;
            }
        }
        return null;
    }

    @Override
    public String toString() {
        return text;
    }
}
