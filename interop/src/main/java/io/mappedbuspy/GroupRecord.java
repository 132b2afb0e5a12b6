package io.mappedbuspy;

import io.mappedbuspy.internal.GroupProtocol;

/**
 * A record delivered to a work-group member ({@link GroupReader#current()}): its bus position and delivery count,
 * and the delivery it stands for, which {@link GroupReader#ack(GroupRecord)}, {@link GroupReader#release(GroupRecord)}
 * and {@link GroupReader#reject(GroupRecord)} settle. A later delivery of the same record (after this one's lease
 * passed, or its member was seen dead) is another {@code GroupRecord}: settling this one then returns false. On a
 * framed bus it stands for a whole message, and {@link #topic()} names the message's topic.
 */
public final class GroupRecord {
    private final long position;
    private final int deliveries;
    private final String topic;
    final long g;       // its global slot index
    final long word;    // the entry word this delivery acquired (its settling CASes from it)

    GroupRecord(long position, long g, long word, String topic) {
        this.position = position;
        this.topic = topic;
        this.g = g;
        this.word = word;
        this.deliveries = GroupProtocol.wordDeliveries(word);
    }

    /** @return the record's position in its bus (a rolling bus: segment and offset joined) */
    public long position() {
        return position;
    }

    /** @return how many times the record was handed out, this delivery included (1: the first) */
    public int deliveries() {
        return deliveries;
    }

    /** @return the topic of the message (a framed bus), or null: a message without one, or a bus without frames */
    public String topic() {
        return topic;
    }

    @Override
    public String toString() {
        return "GroupRecord(position=" + position + ", deliveries=" + deliveries
                + (topic == null ? "" : ", topic=" + topic) + ")";
    }
}
