package io.mappedbuspy;

import java.io.IOException;
import java.io.UncheckedIOException;

/**
 * The bus file shrank under this process's mapping (truncated, or overwritten with {@code cp}): a page
 * past its new end was touched (Python: BusTruncatedError). Unchecked, because any access may find it.
 */
public final class BusTruncatedException extends UncheckedIOException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param message what happened, naming the file
     * @param cause   the fault the JVM reported
     */
    public BusTruncatedException(String message, Throwable cause) {
        super(new IOException(message, cause));
    }
}
