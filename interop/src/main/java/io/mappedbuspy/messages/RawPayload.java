package io.mappedbuspy.messages;

import io.mappedbuspy.MappedBusMessage;
import io.mappedbuspy.internal.MemoryMappedFile;

/**
 * A record's whole payload as bytes, whatever its type or length: what a dump, a test or a
 * relay reads when it does not decode the message. Written with type 0.
 */
public final class RawPayload implements MappedBusMessage {
    private final byte[] bytes;

    /**
     * Creates a buffer for one payload.
     *
     * @param recordSize the bus's record size: the bytes read and written
     */
    public RawPayload(int recordSize) {
        bytes = new byte[recordSize];
    }

    /**
     * The payload bytes (the live buffer, refilled by every read).
     *
     * @return the buffer
     */
    public byte[] bytes() {
        return bytes;
    }

    @Override
    public void write(MemoryMappedFile mem, long pos) {
        mem.putBytes(pos, bytes, 0, bytes.length);
    }

    @Override
    public void read(MemoryMappedFile mem, long pos) {
        mem.getBytes(pos, bytes, 0, bytes.length);
    }

    @Override
    public int type() {
        return 0;
    }
}
