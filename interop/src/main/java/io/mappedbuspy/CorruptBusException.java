package io.mappedbuspy;

import java.io.IOException;

/** The bus file holds a value the protocol never writes (bad limit, status or length). */
public final class CorruptBusException extends IOException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param message what was found where
     */
    public CorruptBusException(String message) {
        super(message);
    }
}
