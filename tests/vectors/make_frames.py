"""Writes the shared frame vectors: tests/vectors/frames-*.bus (+ .topics) and frames.json.

A reference encoder of docs/design/frames.md in plain Python (struct and layout.py's
constants only, no part of the bus's implementation), so the vectors check the Cython writer
and reader and the Java ones against the format, not against each other.

    python tests/vectors/make_frames.py [OUTDIR]     (default: this directory)

tests/formats/test_frames_vectors.py re-runs it into a temporary directory and compares
byte for byte with the files committed here; then reads every file with the package's reader
(and writes the writable ones with its writer) against the manifest.
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from mappedbus_py.formats.layout import (  # noqa: E402
    FIRST_RECORD_OFFSET, FRAME_ENCODING_BYTES, FRAME_ENCODING_SERIALIZED, FRAME_FLAGS_OFFSET,
    FRAME_LENGTH_OFFSET, FRAME_PAYLOAD_OFFSET, FRAME_TOPIC_NONE, FRAME_TOPIC_OFFSET, HEADER_SIZE,
    METADATA_OFFSET, PAYLOAD_OFFSET, STATUS_OFFSET, TOPICS_COUNT_OFFSET, TOPICS_FILE_SIZE,
    TOPICS_MAGIC, TOPICS_MAGIC_OFFSET, TOPICS_VERSION, TOPICS_VERSION_OFFSET, TOPIC_LENGTH_OFFSET,
    TOPIC_NAME_OFFSET, frame_meta, frame_slots, mapped_size, slot_size, topic_entry_offset)

ABOUT = (
    "Language-neutral vectors of framed buses and the topics file (docs/design/frames.md; "
    "layout.py FRAME_*/TOPICS_*/TOPIC_*). Made by make_frames.py (a reference encoder from "
    "layout.py's constants); tests/formats/test_frames_vectors.py re-runs it and compares byte "
    "for byte, then reads each file. 'files': each bus with its record_size and file_size (no "
    ".meta: open with frames=True and both sizes) and its frames in file order: position, "
    "slots, status (1 committed, 2 rolled back or padding), length, topic id, flags, "
    "payload_hex (committed ones), delivered (what a reader hands out, in order). 'topics': "
    "the .topics file beside a bus, its entries (id, name; published false: claimed, never "
    "published); 'filters': the positions a reader given topics=[names] (comma-separated) "
    "delivers. Edit by hand only through the script, with the reason in 'why'.")


def pattern(n, seed):
    """n deterministic bytes."""
    return bytes((seed + 7 * i + (i >> 8)) & 0xFF for i in range(n))


class Bus:
    def __init__(self, record_size, file_size):
        self.record_size = record_size
        self.file_size = file_size
        self.slot = slot_size(record_size)
        self.buf = bytearray(mapped_size(file_size))    # a bus file is whole pages long
        self.limit = FIRST_RECORD_OFFSET
        self.frames = []

    @property
    def last(self):
        return self.file_size - self.slot

    def _put(self, fmt, off, value):
        struct.pack_into(fmt, self.buf, off, value)

    def _reserve(self, n):
        pos = self.limit
        self.limit += n * self.slot
        self._put("<q", 0, self.limit)
        return pos

    def message(self, payload, topic=FRAME_TOPIC_NONE, flags=FRAME_ENCODING_BYTES, why=""):
        n = frame_slots(len(payload), self.record_size)
        pos = self._reserve(n)
        assert pos + n * self.slot <= self.file_size, "the vector's message must fit"
        self._put("<i", pos + METADATA_OFFSET, frame_meta(n))
        self._put("<q", pos + PAYLOAD_OFFSET + FRAME_LENGTH_OFFSET, len(payload))
        self._put("<i", pos + PAYLOAD_OFFSET + FRAME_TOPIC_OFFSET, topic)
        self._put("<i", pos + PAYLOAD_OFFSET + FRAME_FLAGS_OFFSET, flags)
        self.buf[pos + FRAME_PAYLOAD_OFFSET:pos + FRAME_PAYLOAD_OFFSET + len(payload)] = payload
        self._put("<i", pos + STATUS_OFFSET, 1)
        self.frames.append(dict(position=pos, slots=n, status=1, length=len(payload),
                                topic=topic, flags=flags, payload_hex=payload.hex(),
                                delivered=True, why=why))
        return pos

    def dead_after_count(self, payload, written, why):
        """A writer that set the count and wrote `written` payload bytes, then died; a
        reader rolled the message back (status 0 -> 2)."""
        n = frame_slots(len(payload), self.record_size)
        pos = self._reserve(n)
        self._put("<i", pos + METADATA_OFFSET, frame_meta(n))
        self._put("<q", pos + PAYLOAD_OFFSET + FRAME_LENGTH_OFFSET, len(payload))
        self.buf[pos + FRAME_PAYLOAD_OFFSET:pos + FRAME_PAYLOAD_OFFSET + written] = payload[:written]
        self._put("<i", pos + STATUS_OFFSET, 2)
        self.frames.append(dict(position=pos, slots=n, status=2, length=None, topic=None,
                                flags=None, payload_hex=None, delivered=False, why=why))

    def dead_before_count(self, length, why):
        """A writer that reserved a message of `length` bytes and died before its meta CAS,
        with no claim known: readers rolled back its slots one at a time (meta 0 -> flag|1,
        status 0 -> 2 on each)."""
        n = frame_slots(length, self.record_size)
        pos = self._reserve(n)
        for k in range(n):
            p = pos + k * self.slot
            self._put("<i", p + METADATA_OFFSET, frame_meta(1))
            self._put("<i", p + STATUS_OFFSET, 2)
            self.frames.append(dict(position=p, slots=1, status=2, length=None, topic=None,
                                    flags=None, payload_hex=None, delivered=False,
                                    why=why + f" (slot {k + 1} of {n})"))

    def padding(self, length, why):
        """A reservation for `length` bytes that ran past the end: the slots in the file
        become one rolled-back frame of m slots."""
        n = frame_slots(length, self.record_size)
        pos = self._reserve(n)
        assert pos <= self.last and pos + n * self.slot > self.file_size
        m = (self.last - pos) // self.slot + 1
        self._put("<i", pos + METADATA_OFFSET, frame_meta(m))
        self._put("<i", pos + STATUS_OFFSET, 2)
        self.frames.append(dict(position=pos, slots=m, status=2, length=None, topic=None,
                                flags=None, payload_hex=None, delivered=False, why=why))

    def manifest(self, name, why, topics=None):
        return dict(file=name, record_size=self.record_size, file_size=self.file_size,
                    limit=self.limit, topics_file=topics, why=why, frames=self.frames)


def topics_file(names, unpublished=()):
    buf = bytearray(TOPICS_FILE_SIZE)
    struct.pack_into("<q", buf, TOPICS_MAGIC_OFFSET, TOPICS_MAGIC)
    struct.pack_into("<i", buf, TOPICS_VERSION_OFFSET, TOPICS_VERSION)
    entries = []
    for i, name in enumerate(names):
        tid = i + 1
        off = topic_entry_offset(tid)
        if name in unpublished:
            entries.append(dict(id=tid, name=None, published=False))
            continue
        raw = name.encode()
        buf[off + TOPIC_NAME_OFFSET:off + TOPIC_NAME_OFFSET + len(raw)] = raw
        struct.pack_into("<i", buf, off + TOPIC_LENGTH_OFFSET, len(raw))
        entries.append(dict(id=tid, name=name, published=True))
    struct.pack_into("<i", buf, TOPICS_COUNT_OFFSET, len(names))
    return bytes(buf), entries


def build():
    """{file name: bytes} and the manifest."""
    files, cases = {}, []

    rs = 32     # slot 40: a message of 16 bytes fills one slot exactly
    b = Bus(rs, 4096)
    b.message(b"", why="0 bytes: one slot, the frame header only")
    b.message(b"\x01", why="1 byte: one slot")
    b.message(pattern(rs - 16, 1), why="exactly a slot: record_size - 16 bytes, one slot")
    b.message(pattern(rs - 15, 2), why="a slot + 1: two slots, the payload over the second "
                                       "slot's header bytes")
    b.message(pattern(1000, 3), why="many slots: 26 slots, one span")
    b.message(b"\x93\x01\xa1a\xc3", flags=FRAME_ENCODING_SERIALIZED,
              why="flags: an application's serializer (msgpack [1, 'a', true])")
    files["frames-sizes.bus"] = bytes(b.buf)
    cases.append(b.manifest("frames-sizes.bus", "sizes 0 B, 1 B, a slot, a slot + 1, many slots"))

    b = Bus(rs, 4096)
    b.message(b"before", why="committed before the dead writers")
    b.dead_after_count(pattern(300, 4), 100,
                       why="writer died mid-payload (count written): rolled back, skipped whole")
    b.message(b"between", why="committed between")
    b.dead_before_count(100, why="writer died before writing the count")
    b.message(b"after", why="committed after: every reader reaches it")
    files["frames-rolledback.bus"] = bytes(b.buf)
    cases.append(b.manifest("frames-rolledback.bus", "rolled-back framed messages"))

    b = Bus(rs, 1024)     # 25 slots of 40 bytes: the last slot starts at 984
    b.message(pattern(500, 5), why="14 slots")
    b.message(pattern(200, 6), why="6 slots: 20 of 25 used")
    b.padding(300, why="a reservation of 9 slots with 5 left: padded, the writer moved on")
    files["frames-padding.bus"] = bytes(b.buf)
    cases.append(b.manifest("frames-padding.bus", "a message that met the end of the file"))

    b = Bus(64, 4096)
    tbytes, entries = topics_file(["orders", "quotes", "lost", "quotes"], unpublished=("lost",))
    b.message(b"o1", topic=1, why="orders")
    b.message(b"q1", topic=2, why="quotes")
    b.message(b"n1", why="no topic")
    b.message(pattern(200, 7), topic=4, why="quotes under its second id (a racer's duplicate)")
    b.message(b"o2", topic=1, why="orders")
    files["frames-topics.bus"] = bytes(b.buf)
    files["frames-topics.bus.topics"] = tbytes
    case = b.manifest("frames-topics.bus", "topics: ids 1 orders, 2 quotes, 3 claimed and "
                      "never published, 4 quotes again", topics="frames-topics.bus.topics")
    case["topic_entries"] = entries
    case["filters"] = {"quotes": [80, 224], "orders": [8, 512], "orders,quotes": [8, 80, 224, 512]}
    cases.append(case)
    return files, dict(about=ABOUT, files=cases)


def main(out):
    files, manifest = build()
    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    with open(os.path.join(out, "frames.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
