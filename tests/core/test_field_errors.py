"""A value a field cannot hold is refused with a message naming the message class, the field,
its type and its range, whichever way it is set: constructor, attribute, fields_writer."""
import numpy
import pytest

from mappedbus_py import (MappedBusWriter, Message, PriceUpdate, Trade, fixed_bytes, float64,
                          int8, int16, int32, int64, uint8, uint16, uint32, uint64)


class AllInts(Message, type_id=9):
    a = int8()
    b = int16()
    c = int32()
    d = int64()
    e = uint8()
    f = uint16()
    g = uint32()
    h = uint64()
    name = fixed_bytes(4)
    x = float64()


RANGES = {"a": (-2**7, 2**7 - 1), "b": (-2**15, 2**15 - 1), "c": (-2**31, 2**31 - 1),
          "d": (-2**63, 2**63 - 1), "e": (0, 2**8 - 1), "f": (0, 2**16 - 1),
          "g": (0, 2**32 - 1), "h": (0, 2**64 - 1)}
TYPES = {"a": "int8", "b": "int16", "c": "int32", "d": "int64", "e": "uint8", "f": "uint16",
         "g": "uint32", "h": "uint64"}


def test_the_issue_example_names_class_field_type_and_range():
    with pytest.raises(OverflowError) as e:
        PriceUpdate(price=2**31)
    assert str(e.value) == ("PriceUpdate.price (int32) holds -2147483648 to 2147483647, "
                            "got 2147483648")


@pytest.mark.parametrize("name", sorted(RANGES))
def test_every_integer_type_takes_its_whole_range_and_nothing_more(name):
    lo, hi = RANGES[name]
    field = getattr(AllInts, name)
    assert field.value_range == (lo, hi) and field.type_name == TYPES[name]
    assert field.owner == "AllInts"
    m = AllInts()
    for v in (lo, hi, numpy.int64(max(lo, -2**63)), 0):
        setattr(m, name, v)
        assert getattr(m, name) == int(v)
    before = m.to_bytes()
    for v in (lo - 1, hi + 1, 2**64, -2**64, 2**200, -2**200):
        with pytest.raises(OverflowError) as e:
            setattr(m, name, v)
        assert str(e.value) == f"AllInts.{name} ({TYPES[name]}) holds {lo} to {hi}, got {v}"
        with pytest.raises(OverflowError, match=rf"^AllInts\.{name} \({TYPES[name]}\)"):
            AllInts(**{name: v})
    assert m.to_bytes() == before          # nothing was written


def test_positional_constructor_and_other_fields_name_the_class():
    with pytest.raises(OverflowError, match=r"^Trade\.id \(int64\) holds"):
        Trade(2**63, 1.0, 1)
    with pytest.raises(OverflowError, match=r"^PriceUpdate\.quantity \(int32\)"):
        PriceUpdate(1, 2, -2**31 - 1)
    with pytest.raises(ValueError, match=r"^AllInts\.name \(fixed_bytes\(4\)\) holds 4 bytes, got 5"):
        AllInts(name=b"12345")
    with pytest.raises(TypeError, match=r"^AllInts\.c \(int32\) holds an integer, not float"):
        AllInts(c=1.5)
    with pytest.raises(TypeError, match=r"^AllInts\.x \(float64\) holds a float, not str"):
        AllInts(x="1")
    assert AllInts.x.value_range is None and AllInts.name.value_range is None


def test_an_inherited_field_names_the_class_that_declared_it():
    class Wider(PriceUpdate, type_id=7):
        extra = uint16()
    with pytest.raises(OverflowError, match=r"^PriceUpdate\.price \(int32\)"):
        Wider(price=2**40)
    with pytest.raises(OverflowError, match=r"^Wider\.extra \(uint16\) holds 0 to 65535, got -1"):
        Wider(extra=-1)


def test_fields_writer_refuses_with_the_same_message_and_writes_nothing(bus_path):
    with MappedBusWriter(bus_path, 1 << 16, 12) as w:
        write = w.fields_writer(PriceUpdate)
        with pytest.raises(OverflowError) as e:
            write(1, 2**31, 7)
        assert str(e.value) == ("PriceUpdate.price (int32) holds -2147483648 to 2147483647, "
                                "got 2147483648")
        write(1, 2**31 - 1, 7)
    from mappedbus_py import MappedBusReader
    with MappedBusReader(bus_path, 1 << 16, 12) as r:
        got = [rec.decode([PriceUpdate]).price for rec in r.records(timeout=0)]
    assert got == [2**31 - 1]
