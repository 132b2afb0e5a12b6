package io.mappedbuspy;

import io.mappedbuspy.messages.PriceUpdate;
import io.mappedbuspy.messages.Token;
import io.mappedbuspy.messages.Trade;

import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import io.mappedbuspy.internal.MemoryMappedFile;

/** The sample messages. */
public final class MessagesTest {
    /** Scratch directory, new for each test and deleted after it. */
    @TempDir
    Path tmp;

    /** toString is the exact text of the original samples. */
    @Test
    public void toStringMatchesTheOriginalSamples() {
        assertEquals("PriceUpdate [source=0, price=20, quantity=40]", new PriceUpdate(0, 20, 40).toString(), "price");
        assertEquals("Token [from=0, to=1]", new Token(0, 1).toString(), "token");
        assertEquals("Trade [id=1, price=2.5, quantity=3]", new Trade(1, 2.5, 3).toString(), "trade");
    }

    /** Types are 0, 0 and 2 and fields sit at their documented little-endian offsets. */
    @Test
    public void messagesWriteTheirFieldsAtFixedLittleEndianOffsets() throws Exception {
        assertEquals("0 0 2", new PriceUpdate().type() + " " + new Token().type() + " " + new Trade().type(), "types");
        String path = tmp.resolve("msg.bus").toString();
        try (MemoryMappedFile mem = new MemoryMappedFile(path, 4096)) {
            new PriceUpdate(1, -2, 3).write(mem, 100);
            assertEquals(1, mem.getByte(100), "source");
            assertEquals(-2, mem.getInt(104), "price");
            assertEquals((byte) 0xFE, mem.getByte(104), "price low byte");
            assertEquals(3, mem.getInt(108), "quantity");
            new Token(5, 6).write(mem, 200);
            assertEquals(5, mem.getInt(200), "from");
            assertEquals(6, mem.getInt(204), "to");
            new Trade(0x0102030405060708L, 2.5, 9).write(mem, 300);
            assertEquals(8, mem.getByte(300), "id low byte");
            assertEquals(Double.doubleToLongBits(2.5), mem.getLong(308), "price bits");
            assertEquals(9, mem.getInt(316), "quantity");
        }
    }

    /** Each message survives a trip through a bus, with its type. */
    @Test
    public void messagesRoundTripThroughABus() throws Exception {
        String path = tmp.resolve("msgs.bus").toString();
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 20).open();
             MappedBusReader r = new MappedBusReader(path, 4096, 20).open()) {
            assertTrue(w.write(new PriceUpdate(1, 2, 3)), "w1");
            assertTrue(w.write(new Token(4, 5)), "w2");
            assertTrue(w.write(new Trade(6_000_000_007L, 8.25, 9)), "w3");
            assertTrue(r.next(), "r1");
            assertEquals(0, r.readType(), "t1");
            assertEquals("PriceUpdate [source=1, price=2, quantity=3]", r.readMessage(new PriceUpdate()).toString(), "m1");
            assertTrue(r.next(), "r2");
            assertEquals("Token [from=4, to=5]", r.readMessage(new Token()).toString(), "m2");
            assertTrue(r.next(), "r3");
            assertEquals(2, r.readType(), "t3");
            Trade t = r.readMessage(new Trade());
            assertEquals(6_000_000_007L, t.getId(), "id");
            assertEquals(8.25, t.getPrice(), "price");
            assertEquals(9, t.getQuantity(), "quantity");
        }
    }
}
