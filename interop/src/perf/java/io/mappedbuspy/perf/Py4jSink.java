package io.mappedbuspy.perf;

/**
 * The receiving end of the Py4J peer benchmark: Python calls {@link #accept(byte[])} once per message
 * through a Py4J gateway, the way PySpark's driver talks to its JVM.
 */
public final class Py4jSink {
    private long count;
    private long bytes;

    /** Creates an empty sink. */
    public Py4jSink() {
    }

    /**
     * Takes one message.
     *
     * @param message the payload bytes
     */
    public void accept(byte[] message) {
        count++;
        bytes += message.length;
    }

    /**
     * Messages taken so far.
     *
     * @return the count
     */
    public long count() {
        return count;
    }

    /**
     * Payload bytes taken so far.
     *
     * @return the total
     */
    public long bytes() {
        return bytes;
    }
}
