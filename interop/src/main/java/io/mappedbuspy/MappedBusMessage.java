package io.mappedbuspy;

import io.mappedbuspy.internal.MemoryMappedFile;

/**
 * A message with a fixed layout inside a record's payload. {@code pos} is the file offset of the payload.
 */
public interface MappedBusMessage {
    /**
     * Writes this message's fields into the payload.
     *
     * @param mem the mapped bus file
     * @param pos file offset of the payload
     */
    void write(MemoryMappedFile mem, long pos);

    /**
     * Reads this message's fields from the payload.
     *
     * @param mem the mapped bus file
     * @param pos file offset of the payload
     */
    void read(MemoryMappedFile mem, long pos);

    /**
     * The message type, stored in the record's metadata field.
     *
     * @return the type
     */
    int type();
}
