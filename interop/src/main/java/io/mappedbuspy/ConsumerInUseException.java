package io.mappedbuspy;

import java.io.IOException;

/**
 * A named consumer is held by another live reader: another process, or another reader of this one (Python:
 * ConsumerInUseError). One holder per name; a holder that died is replaced by the next claimant.
 */
public final class ConsumerInUseException extends IOException {
    private static final long serialVersionUID = 1L;

    private final long holderPid;

    /**
     * Creates the exception.
     *
     * @param message   what happened, naming the consumer, the registry and the holder
     * @param holderPid the pid holding the consumer
     */
    public ConsumerInUseException(String message, long holderPid) {
        super(message);
        this.holderPid = holderPid;
    }

    /**
     * The process holding the consumer.
     *
     * @return its pid (this process's own when another reader of it holds the name)
     */
    public long holderPid() {
        return holderPid;
    }
}
