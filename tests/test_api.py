"""The public API is exactly the documented names; extension modules stay private."""
import mappedbus_py
from mappedbus_py import layout

PUBLIC = {
    "MappedBusWriter", "MappedBusReader", "Record",
    "Message", "Field", "PriceUpdate", "Token", "Trade",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "fixed_bytes",
    "MappedBusError", "BusFullError", "CorruptBusError", "BusClosedError",
}


def test_all_lists_the_public_names_and_each_exists():
    assert set(mappedbus_py.__all__) == PUBLIC
    for name in PUBLIC:
        assert getattr(mappedbus_py, name) is not None


def test_extension_modules_are_private():
    for name in ("_mapping", "_message", "_record", "_reader", "_writer"):
        assert name.startswith("_")
        module = __import__(f"mappedbus_py.{name}", fromlist=["x"])
        assert module.__file__.endswith(".so")


def test_java_method_names_exist_in_snake_case():
    r, w = mappedbus_py.MappedBusReader, mappedbus_py.MappedBusWriter
    for name in ("open", "close", "next", "read_type", "read_message", "read_buffer",
                 "has_recovered", "set_timeout"):
        assert callable(getattr(r, name))
    for name in ("open", "close", "write"):
        assert callable(getattr(w, name))


def test_layout_offsets_follow_the_diagram():
    assert layout.record_offset(0, 12) == 8
    assert layout.record_offset(2, 12) == 8 + 2 * 20
    assert layout.slot_size(12) == 20 and layout.mapped_size(4097) == 8192
    assert layout.is_record_boundary(28, 12) and not layout.is_record_boundary(30, 12)
    assert (layout.STATUS_OFFSET, layout.METADATA_OFFSET, layout.PAYLOAD_OFFSET) == (0, 4, 8)
