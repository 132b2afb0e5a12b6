package io.mappedbuspy;

import java.io.IOException;

/** Every member slot of a work group ({@link Layout#GROUP_MEMBER_COUNT}) is held by a live member (Python's
 * {@code GroupFullError}). */
public final class GroupFullException extends IOException {
    private static final long serialVersionUID = 1L;

    /**
     * @param message what is full
     */
    public GroupFullException(String message) {
        super(message);
    }
}
