# cython: language_level=3
# The wire layout's offsets for Cython code: the names of layout.py (where the diagram is),
# compiled in. tests/formats/test_layout_pxd.py checks they equal layout.py's.

cdef enum:
    LIMIT_OFFSET = 0            # int64 limit at the start of the file
    FIRST_RECORD_OFFSET = 8     # the first record
    STATUS_OFFSET = 0           # int32 status, relative to a record
    METADATA_OFFSET = 4         # int32 type id (object messages) or payload length
    PAYLOAD_OFFSET = 8          # the payload
    HEADER_SIZE = 8             # status + metadata
