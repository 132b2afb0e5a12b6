package io.mappedbuspy;

/** A framed bus's topics file has no entry left for a new topic name ({@link Layout#TOPICS_MAX} taken). */
public final class TopicsFullException extends IllegalStateException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param message what happened, naming the file and the topic
     */
    public TopicsFullException(String message) {
        super(message);
    }
}
