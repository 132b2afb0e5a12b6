"""Payloads of every length round-trip byte for byte: the writer and the reader copy short
payloads (4 to 16 bytes) with fixed-size moves, longer and shorter ones with memcpy."""
from mappedbus_py import MappedBusReader, MappedBusWriter, PriceUpdate


def test_every_payload_length_round_trips(bus_path):
    record_size = 40
    lengths = range(record_size + 1)
    with MappedBusWriter(bus_path, 8 + 64 * (8 + record_size), record_size) as w, \
            MappedBusReader(bus_path, 8 + 64 * (8 + record_size), record_size) as r:
        for n in lengths:
            # distinct bytes, so a move that lands one byte off shows
            w.write(bytes((n * 7 + i * 13 + 1) & 0xFF for i in range(n)))
        for n in lengths:
            assert r.next()
            want = bytes((n * 7 + i * 13 + 1) & 0xFF for i in range(n))
            buf = bytearray(b"\xee" * (record_size + 2))
            assert r.read_buffer(buf, 1) == n
            # written exactly at offset 1, nothing before or after touched
            assert buf == b"\xee" + want + b"\xee" * (record_size + 1 - n)
            assert r.read_bytes() == want


def test_messages_round_trip_through_read_into_and_read_message(bus_path):
    size = 8 + 16 * 20
    with MappedBusWriter(bus_path, size, 12) as w, MappedBusReader(bus_path, size, 12) as r:
        for i in range(5):
            w.write(PriceUpdate(i + 1, -i * 1000003, 2**31 - 1 - i))
        got = PriceUpdate()
        assert r.read_into(got)
        assert (got.source, got.price, got.quantity) == (1, 0, 2**31 - 1)
        assert r.next()
        r.read_message(got)
        assert (got.source, got.price, got.quantity) == (2, -1000003, 2**31 - 2)
