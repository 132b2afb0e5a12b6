package io.mappedbuspy;

import java.io.IOException;

/** The bus's metadata file records other sizes than the ones given (Python: BusMismatchError); nothing was written. */
public final class BusMismatchException extends IOException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param message what happened, naming the file
     */
    public BusMismatchException(String message) {
        super(message);
    }
}
