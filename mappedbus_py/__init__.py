"""mappedbus_py: many-writer, many-reader message passing between processes over a
memory-mapped file, in the Mappedbus 0.5.1 format that JVM processes read and write too.

    from mappedbus_py import MappedBusWriter, MappedBusReader, PriceUpdate

    with MappedBusWriter("/dev/shm/prices", 10_000_000, 12) as w:
        w.write(PriceUpdate(source=1, price=100, quantity=5))

    with MappedBusReader("/dev/shm/prices", 10_000_000, 12) as r:
        msg = PriceUpdate()
        while r.read_into(msg):
            print(msg)
"""
from ._core._reader import PublicReader as MappedBusReader   # routes group= (see _reader.pyx)
from ._core._record import Record
from ._core._writer import MappedBusWriter
from .rolling import RollingBusReader, RollingBusWriter
from .consumers import ConsumerInfo, consumers, remove_consumer
from . import groups
from .errors import (BusBackPressureError, BusClosedError, BusFullError, BusGapError,
                     BusLockTimeoutError, BusMismatchError, BusReplacedError,
                     BusTruncatedError, ConsumerInUseError, CorruptBusError, MappedBusError,
                     RecordsRolledBackError, UnsafeBusFileError, WriterStalledError,
                     TopicsFullError, MessageTooSmallBufferError)
from .messages import (Field, Message, PriceUpdate, Token, Trade, fixed_bytes, float32,
                       float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64)

__version__ = "0.1.0"

__all__ = (
    "MappedBusWriter", "MappedBusReader", "Record", "RollingBusWriter", "RollingBusReader",
    "Message", "Field", "PriceUpdate", "Token", "Trade",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "fixed_bytes",
    "MappedBusError", "BusFullError", "CorruptBusError", "BusClosedError",
    "BusMismatchError", "UnsafeBusFileError", "BusLockTimeoutError", "BusTruncatedError",
    "BusReplacedError", "BusGapError", "RecordsRolledBackError",
    "consumers", "remove_consumer", "ConsumerInfo", "ConsumerInUseError", "BusBackPressureError",
    "groups",
    "WriterStalledError", "TopicsFullError", "MessageTooSmallBufferError",
)
