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


def test_a_float_into_an_integer_field_raises_instead_of_truncating():
    with pytest.raises(TypeError, match="never truncated"):
        PriceUpdate(price=1.7)
    m = PriceUpdate(price=4)
    with pytest.raises(TypeError):
        m.price = 2.0
    assert m.price == 4


def test_bools_are_refused_in_integer_and_float_fields():
    with pytest.raises(TypeError, match="not bool"):
        PriceUpdate(quantity=True)
    with pytest.raises(TypeError, match="not bool"):
        Trade(price=False)


def test_numpy_numbers_and_ints_are_accepted_where_they_fit():
    m = PriceUpdate(np.int64(5), np.int32(-6), 7)
    assert (m.source, m.price, m.quantity) == (5, -6, 7)
    t = Trade(price=3)
    assert t.price == 3.0 and isinstance(t.price, float)
    t.price = np.float32(0.5)
    assert t.price == 0.5


def test_messages_pickle_and_copy_with_their_class_and_bytes():
    import copy
    import pickle
    for m in (PriceUpdate(1, -2, 3), Trade(2**40, 2.5, 7), Token(3, 4)):
        again = pickle.loads(pickle.dumps(m))
        assert type(again) is type(m) and again == m
        c = copy.copy(m)
        assert c == m and c is not m
        d = copy.deepcopy(m)
        assert d == m and d is not m
    c.to = 9        # the copy owns its own buffer
    assert m.to == 4


def test_messages_are_mutable_so_not_hashable():
    with pytest.raises(TypeError, match="unhashable"):
        hash(PriceUpdate(1, 2, 3))


def test_a_field_named_like_the_message_api_is_refused_at_class_definition():
    for name in ("fields", "type_id", "to_bytes", "numpy_dtype", "payload_size", "_hidden"):
        with pytest.raises(ValueError, match="cannot be called"):
            type("Bad", (Message,), {name: int32()})


def test_fields_named_size_and_type_are_fields_and_the_sizes_stay_reachable():
    # The README's Quote has a size field: it works, and hides the Java-style size().
    class Quote(Message, type_id=3):
        instrument = fixed_bytes(8)
        bid = float64()
        ask = float64()
        size = int64()
        type = int8()
    q = Quote(b"EURUSD", 1.1, 1.2, 1_000_000, 4)
    assert (q.size, q.type) == (1_000_000, 4)
    assert (Quote.payload_size, Quote.type_id) == (33, 3)
    assert Quote.from_bytes(q.to_bytes()) == q
    assert PriceUpdate.payload_size == PriceUpdate(1, 2, 3).size() == 12


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 7])
def test_fields_writer_of_any_field_count_writes_what_the_message_would(tmp_path, count):
    # One to four fields take the argument-array path, more the tuple one: same bytes, same errors.
    from mappedbus_py import MappedBusReader, MappedBusWriter
    kinds = [int32, float64, int8, int64, float32, int32, int64]
    cls = type(f"M{count}", (Message,), {f"f{i}": kinds[i]() for i in range(count)})
    values = [(i + 1) * 3 for i in range(count)]
    path = str(tmp_path / "bus")
    with MappedBusWriter(path, 10_000, 40) as w, MappedBusReader(path, 10_000, 40) as r:
        write = w.fields_writer(cls)
        assert write(*values) is True
        with pytest.raises(TypeError, match=f"takes {count} field values, got {count - 1}"):
            write(*values[:-1])
        with pytest.raises(TypeError, match=f"takes (at most )?{count}"):
            write(*values, 1)
        with pytest.raises(TypeError, match="never truncated|not a float|holds"):
            write(*values[:-1], "x")
        got = cls()
        assert r.read_into(got) and got == cls(*values)
        assert not r.read_into(got)      # the refused calls allocated nothing


def test_fields_writer_writes_a_record_from_values_and_checks_them_first(tmp_path):
    from mappedbus_py import MappedBusReader, MappedBusWriter
    path = str(tmp_path / "bus")
    with MappedBusWriter(path, 10_000, 20) as w, MappedBusReader(path, 10_000, 20) as r:
        write = w.fields_writer(Trade)
        assert write(2**40, 2.5, 7) is True
        # A bad value is refused before a record is allocated: no stalled slot for readers.
        with pytest.raises(TypeError, match="never truncated"):
            write(1, 2.0, 7.5)
        with pytest.raises(TypeError, match="takes 3 field values"):
            write(1, 2.0)
        assert write(3, -1.0, 8)
        got = Trade()
        assert r.read_into(got) and r.read_type() == Trade.type_id and got == Trade(2**40, 2.5, 7)
        assert r.read_into(got) and got == Trade(3, -1.0, 8)
        assert not r.read_into(got)
        with pytest.raises(ValueError, match="more than record_size"):
            w.fields_writer(type("Big", (Message,), {"x": fixed_bytes(21)}))
        with pytest.raises(TypeError, match="needs a Message class"):
            w.fields_writer(int)
