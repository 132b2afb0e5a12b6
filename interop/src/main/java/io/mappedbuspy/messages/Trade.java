package io.mappedbuspy.messages;

import io.mappedbuspy.MappedBusMessage;
import io.mappedbuspy.internal.MemoryMappedFile;

/** Sample message, type 2: int64 id at payload offset 0, float64 price at 8, int32 quantity at 16 (20 bytes). */
public final class Trade implements MappedBusMessage {
    /** The message type stored in the record metadata. */
    public static final int TYPE = 2;
    /** Payload bytes used. */
    public static final int SIZE = 20;

    private long id;
    private double price;
    private int quantity;

    /** Creates a zeroed message (to read into). */
    public Trade() {
    }

    /**
     * Creates a message.
     *
     * @param id       trade id
     * @param price    price
     * @param quantity quantity
     */
    public Trade(long id, double price, int quantity) {
        this.id = id;
        this.price = price;
        this.quantity = quantity;
    }

    @Override
    public void write(MemoryMappedFile mem, long pos) {
        mem.putLong(pos, id);
        mem.putDouble(pos + 8, price);
        mem.putInt(pos + 16, quantity);
    }

    @Override
    public void read(MemoryMappedFile mem, long pos) {
        id = mem.getLong(pos);
        price = mem.getDouble(pos + 8);
        quantity = mem.getInt(pos + 16);
    }

    @Override
    public int type() {
        return TYPE;
    }

    /** @return the trade id */
    public long getId() {
        return id;
    }

    /** @param id the trade id */
    public void setId(long id) {
        this.id = id;
    }

    /** @return the price */
    public double getPrice() {
        return price;
    }

    /** @param price the price */
    public void setPrice(double price) {
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
        return "Trade [id=" + id + ", price=" + price + ", quantity=" + quantity + "]";
    }
}
