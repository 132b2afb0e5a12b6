"""The public API is exactly the documented names; extension modules stay private."""
import mappedbus_py
from mappedbus_py.formats import layout

PUBLIC = {
    "MappedBusWriter", "MappedBusReader", "Record",
    "Message", "Field", "PriceUpdate", "Token", "Trade",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "fixed_bytes",
    "MappedBusError", "BusFullError", "CorruptBusError", "BusClosedError",
    "BusMismatchError", "UnsafeBusFileError", "BusLockTimeoutError", "BusTruncatedError",
    "BusReplacedError", "BusGapError", "RecordsRolledBackError",
    "RollingBusWriter", "RollingBusReader",
    "consumers", "remove_consumer", "ConsumerInfo", "ConsumerInUseError", "BusBackPressureError",
    "groups",
    "WriterStalledError", "TopicsFullError", "MessageTooSmallBufferError",
}


def test_all_lists_the_public_names_and_each_exists():
    assert set(mappedbus_py.__all__) == PUBLIC
    for name in PUBLIC:
        assert getattr(mappedbus_py, name) is not None


def test_extension_modules_are_private():
    for name in ("_mapping", "_message", "_record", "_reader", "_writer"):
        assert name.startswith("_")
        module = __import__(f"mappedbus_py._core.{name}", fromlist=["x"])
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


def test_rolling_classes_have_the_single_file_read_and_write_api():
    single_r, single_w = mappedbus_py.MappedBusReader, mappedbus_py.MappedBusWriter
    rolling_r, rolling_w = mappedbus_py.RollingBusReader, mappedbus_py.RollingBusWriter
    for name in ("open", "close", "next", "wait", "read", "read_into", "records", "read_type",
                 "read_message", "read_buffer", "read_bytes", "read_batch", "seek", "seek_end",
                 "has_recovered"):
        assert callable(getattr(single_r, name)) and callable(getattr(rolling_r, name)), name
    for name in ("open", "close", "write", "write_batch"):
        assert callable(getattr(single_w, name)) and callable(getattr(rolling_w, name)), name


def test_every_error_is_a_mapped_bus_error_and_exported():
    from mappedbus_py import errors
    assert set(errors.__all__) <= set(mappedbus_py.__all__)
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), mappedbus_py.MappedBusError), name
