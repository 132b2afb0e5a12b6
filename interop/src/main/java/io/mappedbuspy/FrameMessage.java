package io.mappedbuspy;

/**
 * One whole message of a framed bus (docs/design/frames.md), as {@link MappedBusReader#message()} and
 * {@link RollingBusReader#message()} copy it out.
 *
 * @param position its first slot's position (a rolling bus: global): where a reader seeks or commits to return to it
 * @param topic    its topic's name, or null for a message without one
 * @param flags    its flags: bits 0..7 the encoding ({@link Layout#FRAME_ENCODING_BYTES}, ...)
 * @param payload  its bytes (the record may be shared by no one: a fresh array)
 */
public record FrameMessage(long position, String topic, int flags, byte[] payload) {
    /** @return the payload's encoding: {@code flags & FRAME_ENCODING_MASK} */
    public int encoding() {
        return flags & Layout.FRAME_ENCODING_MASK;
    }
}
