package io.mappedbuspy;

import java.io.IOException;

/** The path is not a file to trust as a bus: a symbolic link, not a regular file, owned by another user or writable by group or others (Python: UnsafeBusFileError). */
public final class UnsafeBusFileException extends IOException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param message what happened, naming the file
     */
    public UnsafeBusFileException(String message) {
        super(message);
    }
}
