package io.mappedbuspy;

/**
 * What happens to a registered consumer more than {@code max_consumer_lag} segments behind the writers: stored in a
 * rolling bus's {@code bus.meta} as {@code on_consumer_lag} (docs/files-and-rolling.md, "Retention that holds
 * consumers").
 */
public enum OnConsumerLag {
    /** The consumer is flagged expired and its segments go (the default). */
    EXPIRE("expire"),
    /** Writers wait before rolling, then throw {@link BusBackPressureException}. */
    BLOCK("block");

    private final String text;

    OnConsumerLag(String text) {
        this.text = text;
    }

    /** @return the value as bus.meta stores it: "expire" or "block" */
    public String text() {
        return text;
    }

    /**
     * The policy a bus.meta value (or a caller's string) names.
     *
     * @param text "expire" or "block"
     * @return the policy
     * @throws IllegalArgumentException if it is another value
     */
    public static OnConsumerLag of(String text) {
        for (OnConsumerLag p : values()) {
            if (p.text.equals(text)) {
                return p;
            }
        }
        throw new IllegalArgumentException("onConsumerLag must be \"expire\" or \"block\", got " + text);
    }

    @Override
    public String toString() {
        return text;
    }
}
