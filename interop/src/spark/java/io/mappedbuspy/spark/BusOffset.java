package io.mappedbuspy.spark;

import org.apache.spark.sql.connector.read.streaming.Offset;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** A streaming offset: the byte position of the next slot to read, as {@code {"position":N}}. */
final class BusOffset extends Offset {
    private static final Pattern JSON = Pattern.compile("\\{\\s*\"position\"\\s*:\\s*(\\d+)\\s*}");

    final long position;

    BusOffset(long position) {
        this.position = position;
    }

    @Override
    public String json() {
        return "{\"position\":" + position + "}";
    }

    static BusOffset parse(String json) {
        Matcher m = JSON.matcher(json.trim());
        if (!m.matches()) {
            throw new IllegalArgumentException("mappedbus: not a bus offset: " + json);
        }
        return new BusOffset(Long.parseLong(m.group(1)));
    }
}
