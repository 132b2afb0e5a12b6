package io.mappedbuspy.messages;

import io.mappedbuspy.MappedBusMessage;
import io.mappedbuspy.internal.MemoryMappedFile;

/** Sample message, type 0: int32 from, to at payload offsets 0, 4 (8 bytes). */
public final class Token implements MappedBusMessage {
    /** The message type stored in the record metadata. */
    public static final int TYPE = 0;
    /** Payload bytes used. */
    public static final int SIZE = 8;

    private int from;
    private int to;

    /** Creates a zeroed message (to read into). */
    public Token() {
    }

    /**
     * Creates a message.
     *
     * @param from sender id
     * @param to   receiver id
     */
    public Token(int from, int to) {
        this.from = from;
        this.to = to;
    }

    @Override
    public void write(MemoryMappedFile mem, long pos) {
        mem.putInt(pos, from);
        mem.putInt(pos + 4, to);
    }

    @Override
    public void read(MemoryMappedFile mem, long pos) {
        from = mem.getInt(pos);
        to = mem.getInt(pos + 4);
    }

    @Override
    public int type() {
        return TYPE;
    }

    /** @return the sender id */
    public int getFrom() {
        return from;
    }

    /** @param from the sender id */
    public void setFrom(int from) {
        this.from = from;
    }

    /** @return the receiver id */
    public int getTo() {
        return to;
    }

    /** @param to the receiver id */
    public void setTo(int to) {
        this.to = to;
    }

    @Override
    public String toString() {
        return "Token [from=" + from + ", to=" + to + "]";
    }
}
