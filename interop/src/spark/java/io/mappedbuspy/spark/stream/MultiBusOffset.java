package io.mappedbuspy.spark.stream;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.connector.read.streaming.Offset;

import java.util.Collections;
import java.util.Iterator;
import java.util.Map;
import java.util.SortedMap;
import java.util.TreeMap;

/**
 * The offset of a stream of several buses: per bus, keyed by its path, what a one-bus stream's
 * {@link BusOffset} holds (the next position and the bus's id), as
 * {@code {"buses":{"/dev/shm/a":{"position":8,"busId":"..."},...}}} (paths sorted, so equal offsets have
 * equal JSON).
 */
final class MultiBusOffset extends Offset {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** Each bus's offset, by path. */
    final SortedMap<String, BusOffset> buses;

    MultiBusOffset(Map<String, BusOffset> buses) {
        this.buses = Collections.unmodifiableSortedMap(new TreeMap<>(buses));
    }

    @Override
    public String json() {
        ObjectNode root = JSON.createObjectNode();
        ObjectNode all = root.putObject("buses");
        for (Map.Entry<String, BusOffset> e : buses.entrySet()) {
            ObjectNode b = all.putObject(e.getKey());
            b.put("position", e.getValue().position);
            if (e.getValue().busId != null) {
                b.put("busId", e.getValue().busId);
            }
        }
        return root.toString();
    }

    /** The offset Spark hands back, which may be its serialized form (restarts, metrics). */
    static MultiBusOffset of(Offset o) {
        return o instanceof MultiBusOffset ? (MultiBusOffset) o : parse(o.json());
    }

    static MultiBusOffset parse(String json) {
        JsonNode all;
        try {
            all = JSON.readTree(json).get("buses");
        } catch (JsonProcessingException | RuntimeException e) {
            throw new IllegalArgumentException("mappedbus: not an offset of several buses: " + json, e);
        }
        if (all == null || !all.isObject()) {
            throw new IllegalArgumentException("mappedbus: not an offset of several buses: " + json + " (a "
                    + "checkpoint of a one-bus stream cannot go on as a stream of several buses)");
        }
        Map<String, BusOffset> out = new TreeMap<>();
        for (Iterator<String> it = all.fieldNames(); it.hasNext();) {
            String path = it.next();
            Map.Entry<String, JsonNode> e = Map.entry(path, all.get(path));
            JsonNode pos = e.getValue().get("position");
            JsonNode id = e.getValue().get("busId");
            if (pos == null || !pos.canConvertToLong() || pos.asLong() < 0) {
                throw new IllegalArgumentException("mappedbus: bad position of bus " + e.getKey() + " in offset "
                        + json);
            }
            out.put(e.getKey(), new BusOffset(pos.asLong(), id == null || id.isNull() ? null : id.asText()));
        }
        return new MultiBusOffset(out);
    }
}
