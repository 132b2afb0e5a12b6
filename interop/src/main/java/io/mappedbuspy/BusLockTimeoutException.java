package io.mappedbuspy;

import java.io.IOException;

/**
 * The lock that serialises opening a bus file was held by another process for longer than the lock
 * timeout (Python: BusLockTimeoutError).
 */
public final class BusLockTimeoutException extends IOException {
    private static final long serialVersionUID = 1L;

    private final long holderPid;

    /**
     * Creates the exception.
     *
     * @param message   what happened, naming the file
     * @param holderPid the pid holding the lock, or -1 if it cannot be known
     */
    public BusLockTimeoutException(String message, long holderPid) {
        super(message);
        this.holderPid = holderPid;
    }

    /**
     * The process that held the lock.
     *
     * @return its pid, or -1 if unknown
     */
    public long holderPid() {
        return holderPid;
    }
}
