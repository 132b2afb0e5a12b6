"""The Mappedbus 0.5.1 wire layout, written once.

All integers are little-endian (the byte order of x86-64 and aarch64, which the Java
original writes through ``sun.misc.Unsafe`` in native order). Offsets are in bytes.

::

     0               8
     +---------------+------------------------+------------------------+----
     | limit (int64) | record 0               | record 1               | ...
     +---------------+------------------------+------------------------+----
                     ^ FIRST_RECORD_OFFSET

     one record (a "slot") = HEADER_SIZE + record_size bytes, whatever the payload uses:
     +----------------+------------------+--------------------------------------+
     | status (int32) | metadata (int32) | payload: record_size bytes           |
     +----------------+------------------+--------------------------------------+
     ^ STATUS_OFFSET  ^ METADATA_OFFSET  ^ PAYLOAD_OFFSET
       0 = not set      object message: its type id
       1 = committed    byte array:     the number of payload bytes used
       2 = rolled back

``limit`` is the offset just past the last allocated slot: 0 in a new file, set to
``FIRST_RECORD_OFFSET`` by the first writer (compare-and-swap 0 -> 8), then moved by
fetch-and-add of ``slot_size(record_size)`` for every record. It may point past the end
of the file after a failed write (see ``golden/full-r16.bus``).

Neither ``record_size`` nor ``file_size`` is stored in the file: every process must be
given the same values. The file is ``mapped_size(file_size)`` bytes long (rounded up to
``PAGE_SIZE``); end-of-file checks use the unrounded ``file_size``.

The Java side mirrors these names in ``interop/.../Layout.java``; a test checks they agree.
"""

__all__ = (
    "LIMIT_OFFSET", "FIRST_RECORD_OFFSET", "STATUS_OFFSET", "METADATA_OFFSET",
    "PAYLOAD_OFFSET", "HEADER_SIZE", "STATUS_NOT_SET", "STATUS_COMMITTED",
    "STATUS_ROLLED_BACK", "PAGE_SIZE", "DEFAULT_TIMEOUT_MS", "MAX_RECORD_SIZE",
    "slot_size", "record_offset", "mapped_size", "record_index", "is_record_boundary",
    "CONSTANTS",
)

#: File header: the int64 limit, then the first record.
LIMIT_OFFSET = 0
FIRST_RECORD_OFFSET = 8

#: Record header, relative to the start of a record.
STATUS_OFFSET = 0
METADATA_OFFSET = 4
PAYLOAD_OFFSET = 8
HEADER_SIZE = 8

#: Status values (int32 at STATUS_OFFSET). They differ only in the low byte.
STATUS_NOT_SET = 0
STATUS_COMMITTED = 1
STATUS_ROLLED_BACK = 2

PAGE_SIZE = 4096
DEFAULT_TIMEOUT_MS = 2000

#: The metadata int32 holds a byte-array length, so a payload cannot be longer.
MAX_RECORD_SIZE = 2**31 - 1 - HEADER_SIZE

CONSTANTS = {
    name: globals()[name]
    for name in (
        "LIMIT_OFFSET", "FIRST_RECORD_OFFSET", "STATUS_OFFSET", "METADATA_OFFSET",
        "PAYLOAD_OFFSET", "HEADER_SIZE", "STATUS_NOT_SET", "STATUS_COMMITTED",
        "STATUS_ROLLED_BACK", "PAGE_SIZE", "DEFAULT_TIMEOUT_MS",
    )
}


def slot_size(record_size):
    """Bytes one record takes in the file: header plus the fixed payload size."""
    return HEADER_SIZE + record_size


def record_offset(index, record_size):
    """Offset of record ``index`` (0-based)."""
    return FIRST_RECORD_OFFSET + index * slot_size(record_size)


def record_index(offset, record_size):
    """Index of the record starting at ``offset`` (which must be a record boundary)."""
    return (offset - FIRST_RECORD_OFFSET) // slot_size(record_size)


def is_record_boundary(offset, record_size):
    return offset >= FIRST_RECORD_OFFSET and (offset - FIRST_RECORD_OFFSET) % slot_size(record_size) == 0


def mapped_size(file_size):
    """The length of the file and of its mapping: ``file_size`` rounded up to a page."""
    return -(-file_size // PAGE_SIZE) * PAGE_SIZE
