package io.mappedbuspy.spark.stream;

import org.apache.spark.sql.connector.read.streaming.Offset;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A streaming offset: the position of the next slot to read and the id of the bus it is a position in, as
 * {@code {"position":N,"busId":"..."}}. A bus without metadata has no id; checkpoints written before ids
 * were recorded hold only {@code {"position":N}}: both parse with a null id (unknown).
 */
final class BusOffset extends Offset {
    private static final Pattern JSON = Pattern.compile(
            "\\{\\s*\"position\"\\s*:\\s*(\\d+)\\s*(?:,\\s*\"busId\"\\s*:\\s*(?:\"([0-9A-Za-z_-]*)\"|null)\\s*)?}");

    final long position;
    /** The bus's id, or null if unknown. */
    final String busId;

    BusOffset(long position, String busId) {
        this.position = position;
        this.busId = busId;
    }

    @Override
    public String json() {
        return busId == null ? "{\"position\":" + position + "}"
                : "{\"position\":" + position + ",\"busId\":\"" + busId + "\"}";
    }

    /** The offset Spark hands back, which may be its serialized form (restarts, metrics). */
    static BusOffset of(Offset o) {
        return o instanceof BusOffset ? (BusOffset) o : parse(o.json());
    }

    static BusOffset parse(String json) {
        Matcher m = JSON.matcher(json.trim());
        if (!m.matches()) {
            throw new IllegalArgumentException("mappedbus: not a bus offset: " + json);
        }
        return new BusOffset(Long.parseLong(m.group(1)), m.group(2));
    }
}
