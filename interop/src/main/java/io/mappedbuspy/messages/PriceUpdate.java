package io.mappedbuspy.messages;

import io.mappedbuspy.MappedBusMessage;
import io.mappedbuspy.internal.MemoryMappedFile;

/** Sample message, type 0: int32 source, price, quantity at payload offsets 0, 4, 8 (12 bytes). */
public final class PriceUpdate implements MappedBusMessage {
    /** The message type stored in the record metadata. */
    public static final int TYPE = 0;
    /** Payload bytes used. */
    public static final int SIZE = 12;

    private int source;
    private int price;
    private int quantity;

    /** Creates a zeroed message (to read into). */
    public PriceUpdate() {
    }

    /**
     * Creates a message.
     *
     * @param source   source id
     * @param price    price
     * @param quantity quantity
     */
    public PriceUpdate(int source, int price, int quantity) {
        this.source = source;
        this.price = price;
        this.quantity = quantity;
    }

    @Override
    public void write(MemoryMappedFile mem, long pos) {
        mem.putInt(pos, source);
        mem.putInt(pos + 4, price);
        mem.putInt(pos + 8, quantity);
    }

    @Override
    public void read(MemoryMappedFile mem, long pos) {
        source = mem.getInt(pos);
        price = mem.getInt(pos + 4);
        quantity = mem.getInt(pos + 8);
    }

    @Override
    public int type() {
        return TYPE;
    }

    /** @return the source id */
    public int getSource() {
        return source;
    }

    /** @param source the source id */
    public void setSource(int source) {
        this.source = source;
    }

    /** @return the price */
    public int getPrice() {
        return price;
    }

    /** @param price the price */
    public void setPrice(int price) {
        this.price = price;
    }

    /** @return the quantity */
    public int getQuantity() {
        return quantity;
    }

    /** @param quantity the quantity */
    public void setQuantity(int quantity) {
        this.quantity = quantity;
    }

    @Override
    public String toString() {
        return "PriceUpdate [source=" + source + ", price=" + price + ", quantity=" + quantity + "]";
    }
}
