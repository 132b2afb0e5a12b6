package io.mappedbuspy.spark.stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Streaming offsets as Spark checkpoints them. Kept apart from the stable tests: the offset format follows
 * the streaming source (rolling buses, bus ids).
 */
public final class BusOffsetTest {
    /** An offset with a bus id survives its JSON form, which is the documented one. */
    @Test
    public void offsetWithBusIdRoundTripsThroughJson() {
        BusOffset o = new BusOffset(8 + 20L * 1_000_000_000L, "0123456789abcdef0123456789abcdef");
        assertEquals("{\"position\":20000000008,\"busId\":\"0123456789abcdef0123456789abcdef\"}", o.json());
        BusOffset back = BusOffset.parse(o.json());
        assertEquals(o.position, back.position, "position");
        assertEquals(o.busId, back.busId, "bus id");
    }

    /** A bus without metadata has no id: the JSON holds only the position, and parses back with none. */
    @Test
    public void offsetWithoutBusIdHasOnlyThePosition() {
        assertEquals("{\"position\":8}", new BusOffset(8, null).json());
        BusOffset back = BusOffset.parse("{\"position\":8}");
        assertEquals(8, back.position, "position");
        assertNull(back.busId, "no id");
    }

    /** Checkpoints written by hand or by other JSON writers (spaces, a null id) are read. */
    @Test
    public void offsetJsonToleratesSpacesAndANullId() {
        BusOffset o = BusOffset.parse("  { \"position\" : 28 , \"busId\" : null }\n");
        assertEquals(28, o.position, "position");
        assertNull(o.busId, "null id");
    }

    /** Anything else is refused with the text it was given. */
    @ParameterizedTest
    @ValueSource(strings = {"", "{}", "8", "{\"position\":-8}", "{\"position\":\"8\"}", "{\"pos\":8}",
        "{\"position\":8,\"busId\":\"a b\"}", "{\"position\":8}x"})
    public void malformedOffsetsAreRefused(String json) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> BusOffset.parse(json));
        assertTrue(e.getMessage().contains("not a bus offset: " + json), e.getMessage());
    }
}
