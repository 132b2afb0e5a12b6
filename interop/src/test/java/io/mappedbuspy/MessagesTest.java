package io.mappedbuspy;

import io.mappedbuspy.messages.PriceUpdate;
import io.mappedbuspy.messages.Token;
import io.mappedbuspy.messages.Trade;
import io.mappedbuspy.testing.Test;
import io.mappedbuspy.testing.TestFiles;

import static io.mappedbuspy.testing.Assert.assertEquals;
import static io.mappedbuspy.testing.Assert.assertTrue;

/** The sample messages. */
public final class MessagesTest {
    /** toString is the exact text of the original samples. */
    @Test
    public void toStringMatchesTheOriginalSamples() {
        assertEquals("price", "PriceUpdate [source=0, price=20, quantity=40]", new PriceUpdate(0, 20, 40).toString());
        assertEquals("token", "Token [from=0, to=1]", new Token(0, 1).toString());
        assertEquals("trade", "Trade [id=1, price=2.5, quantity=3]", new Trade(1, 2.5, 3).toString());
    }

    /** Types are 0, 0 and 2 and fields sit at their documented little-endian offsets. */
    @Test
    public void messagesWriteTheirFieldsAtFixedLittleEndianOffsets() throws Exception {
        assertEquals("types", "0 0 2", new PriceUpdate().type() + " " + new Token().type() + " " + new Trade().type());
        String path = TestFiles.newPath("msg.bus");
        try (MemoryMappedFile mem = new MemoryMappedFile(path, 4096)) {
            new PriceUpdate(1, -2, 3).write(mem, 100);
            assertEquals("source", 1, mem.getByte(100));
            assertEquals("price", -2, mem.getInt(104));
            assertEquals("price low byte", (byte) 0xFE, mem.getByte(104));
            assertEquals("quantity", 3, mem.getInt(108));
            new Token(5, 6).write(mem, 200);
            assertEquals("from", 5, mem.getInt(200));
            assertEquals("to", 6, mem.getInt(204));
            new Trade(0x0102030405060708L, 2.5, 9).write(mem, 300);
            assertEquals("id low byte", 8, mem.getByte(300));
            assertEquals("price bits", Double.doubleToLongBits(2.5), mem.getLong(308));
            assertEquals("quantity", 9, mem.getInt(316));
        }
    }

    /** Each message survives a trip through a bus, with its type. */
    @Test
    public void messagesRoundTripThroughABus() throws Exception {
        String path = TestFiles.newPath("msgs.bus");
        try (MappedBusWriter w = new MappedBusWriter(path, 4096, 20).open();
             MappedBusReader r = new MappedBusReader(path, 4096, 20).open()) {
            assertTrue("w1", w.write(new PriceUpdate(1, 2, 3)));
            assertTrue("w2", w.write(new Token(4, 5)));
            assertTrue("w3", w.write(new Trade(6_000_000_007L, 8.25, 9)));
            assertTrue("r1", r.next());
            assertEquals("t1", 0, r.readType());
            assertEquals("m1", "PriceUpdate [source=1, price=2, quantity=3]", r.readMessage(new PriceUpdate()).toString());
            assertTrue("r2", r.next());
            assertEquals("m2", "Token [from=4, to=5]", r.readMessage(new Token()).toString());
            assertTrue("r3", r.next());
            assertEquals("t3", 2, r.readType());
            Trade t = r.readMessage(new Trade());
            assertEquals("id", 6_000_000_007L, t.getId());
            assertEquals("price", 8.25, t.getPrice());
            assertEquals("quantity", 9, t.getQuantity());
        }
    }
}
