package io.mappedbuspy;

import java.io.IOException;

/** The bus path no longer names the file this process mapped: removed, or another file put in its place (Python: BusReplacedError). */
public final class BusReplacedException extends IOException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param message what happened, naming the file
     */
    public BusReplacedException(String message) {
        super(message);
    }
}
