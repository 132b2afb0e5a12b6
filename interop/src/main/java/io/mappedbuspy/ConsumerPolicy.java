package io.mappedbuspy;

/**
 * How a rolling bus's retention treats registered consumers, fixed when the bus is created and stored in its
 * {@code bus.meta} (docs/files-and-rolling.md, "Retention that holds consumers").
 *
 * @param maxConsumerLag  segments a registered consumer may lag behind the writers and still hold from retention
 *                        ({@code max_consumer_lag}; 0: consumers hold nothing)
 * @param onConsumerLag   what happens to a consumer past it ({@code on_consumer_lag})
 * @param consumerBlockMs how long a writer waits for a lagging consumer under {@link OnConsumerLag#BLOCK}
 *                        ({@code consumer_block_ms}), in milliseconds
 */
public record ConsumerPolicy(long maxConsumerLag, OnConsumerLag onConsumerLag, long consumerBlockMs) {
    /** Consumers hold nothing; a lagging one expires; the default block timeout. */
    public static final ConsumerPolicy DEFAULT =
            new ConsumerPolicy(0, OnConsumerLag.EXPIRE, Layout.DEFAULT_CONSUMER_BLOCK_MS);

    /**
     * @throws IllegalArgumentException if a number is negative or the policy is null
     */
    public ConsumerPolicy {
        if (maxConsumerLag < 0 || consumerBlockMs < 0) {
            throw new IllegalArgumentException("maxConsumerLag and consumerBlockMs must not be negative, got "
                    + maxConsumerLag + " and " + consumerBlockMs);
        }
        if (onConsumerLag == null) {
            throw new IllegalArgumentException("onConsumerLag must be EXPIRE or BLOCK, got null");
        }
    }

    /** @return this policy with another {@code max_consumer_lag} */
    public ConsumerPolicy withMaxConsumerLag(long segments) {
        return new ConsumerPolicy(segments, onConsumerLag, consumerBlockMs);
    }

    /** @return this policy with another {@code on_consumer_lag} */
    public ConsumerPolicy withOnConsumerLag(OnConsumerLag policy) {
        return new ConsumerPolicy(maxConsumerLag, policy, consumerBlockMs);
    }

    /** @return this policy with another {@code consumer_block_ms} */
    public ConsumerPolicy withConsumerBlockMs(long ms) {
        return new ConsumerPolicy(maxConsumerLag, onConsumerLag, ms);
    }

    @Override
    public String toString() {
        return "max_consumer_lag=" + maxConsumerLag + " on_consumer_lag=" + onConsumerLag
                + " consumer_block_ms=" + consumerBlockMs;
    }
}
