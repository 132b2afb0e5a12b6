"""The frame and topics layout compiled into _frames.h equals layout.py's (docs/design/frames.md)."""
from mappedbus_py._core._frames import C_CONSTANTS
from mappedbus_py.formats import layout


def test_c_constants_match_the_layout():
    assert C_CONSTANTS == {k: layout.CONSTANTS[k] for k in C_CONSTANTS}
    assert len(C_CONSTANTS) == 16


def test_topics_magic_and_sizes():
    assert layout.TOPICS_MAGIC.to_bytes(8, "little") == b"MBUSTOP1"
    assert layout.TOPICS_ENTRIES_OFFSET + layout.TOPICS_MAX * layout.TOPIC_ENTRY_SIZE \
        == layout.TOPICS_FILE_SIZE
    assert layout.frame_meta(1) & 0xFFFFFFFF == 0x80000001
    assert layout.frame_meta_slots(layout.frame_meta(7)) == 7
    assert layout.frame_meta_slots(0) == 0 and layout.frame_meta_slots(5) == 0
    assert layout.frame_slots(0, 16) == 1 and layout.frame_slots(1, 16) == 2
