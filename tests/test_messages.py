"""Declared object messages: layout, bytes, numpy dtype, Java-style text."""
import struct

import numpy as np
import pytest

from mappedbus_py import (Message, PriceUpdate, Token, Trade, fixed_bytes, float32, float64,
                          int8, int16, int32, int64, uint8, uint16, uint32, uint64)


def test_price_update_lays_out_three_little_endian_int32():
    m = PriceUpdate(source=1, price=-2, quantity=2**31 - 1)
    assert m.to_bytes() == struct.pack("<iii", 1, -2, 2**31 - 1)
    assert (m.type(), m.size(), PriceUpdate.type_id) == (0, 12, 0)
    assert repr(m) == "PriceUpdate [source=1, price=-2, quantity=2147483647]"


def test_token_prints_its_from_field_as_java_does():
    t = Token(3, 4)
    assert (t.from_, t.to) == (3, 4)
    assert str(t) == "Token [from=3, to=4]"
    assert Token.numpy_dtype().names == ("from", "to")


def test_trade_has_int64_and_float64_fields_at_fixed_offsets():
    t = Trade(id=2**40 + 5, price=2.5, quantity=7)
    assert t.to_bytes() == struct.pack("<qdi", 2**40 + 5, 2.5, 7)
    assert (Trade.type_id, t.size()) == (2, 20)
    assert repr(t) == "Trade [id=1099511627781, price=2.5, quantity=7]"


def test_every_field_type_round_trips_through_bytes():
    class All(Message, type_id=9):
        a = int8()
        b = int16()
        c = int32()
        d = int64()
        e = uint8()
        f = uint16()
        g = uint32()
        h = uint64()
        i = float32()
        j = float64()
        k = fixed_bytes(5)
    m = All(-1, -2, -3, -4, 255, 65535, 2**32 - 1, 2**64 - 1, 1.5, -0.25, b"hey")
    assert m.size() == 1 + 2 + 4 + 8 + 1 + 2 + 4 + 8 + 4 + 8 + 5
    again = All.from_bytes(m.to_bytes())
    assert again == m
    assert again.k == b"hey\0\0"
    assert np.frombuffer(m.to_bytes(), All.numpy_dtype())[0]["h"] == 2**64 - 1


def test_explicit_offsets_and_padding_size():
    class Sparse(Message, type_id=1, size=32):
        tail = int32(offset=28)
        head = int64(offset=0)
    s = Sparse(tail=5, head=6)
    assert s.size() == 32
    assert s.to_bytes()[28:] == struct.pack("<i", 5)
    assert Sparse.numpy_dtype().itemsize == 32


def test_overlapping_fields_are_refused():
    with pytest.raises(ValueError, match="overlaps"):
        class Bad(Message):
            a = int64(offset=0)
            b = int32(offset=4)


def test_out_of_range_values_raise_and_leave_the_field_unchanged():
    m = PriceUpdate(1, 2, 3)
    with pytest.raises(OverflowError):
        m.price = 2**31
    with pytest.raises(TypeError):
        m.price = "x"
    assert m.price == 2
    with pytest.raises(ValueError, match="holds 5 bytes"):
        class B(Message):
            x = fixed_bytes(5)
        B(x=b"123456")


def test_unknown_constructor_field_is_a_type_error():
    with pytest.raises(TypeError, match="no field 'nope'"):
        PriceUpdate(nope=1)
    with pytest.raises(TypeError, match="at most 3"):
        PriceUpdate(1, 2, 3, 4)


def test_messages_compare_by_type_and_bytes():
    assert PriceUpdate(1, 2, 3) == PriceUpdate(1, 2, 3)
    assert PriceUpdate(1, 2, 3) != PriceUpdate(1, 2, 4)
    assert PriceUpdate(1, 2, 0) != Token(1, 2)


def test_a_message_exposes_its_payload_as_a_buffer():
    m = PriceUpdate(7, 8, 9)
    assert bytes(memoryview(m)) == m.to_bytes()
    memoryview(m)[0:4] = struct.pack("<i", 70)
    assert m.source == 70
