"""Makes tests/vectors/journal/: the shared vectors of the journal (issue 37), from the layout
alone (no writer involved), so that any implementation can be checked against them:

  journal/archive-none/   bus.meta, 00000000000000000001.bus        (the exact segment bytes)
  journal/archive-zstd/   bus.meta, 00000000000000000001.bus.zst    (zstd's seekable format:
                          ZSTD_FRAMES frames of 1024 bytes and their seek table)
  journal/archive-zstd-oneframe/  the same segment as one zstd frame, as the archivers of
                          sessions 17-18 wrote it (readers still read it)
  journal/archive-lz4/    bus.meta, 00000000000000000001.bus.lz4    (one LZ4 frame of them)
  each with index/00000000000000000001.time (two writers' entries, interleaved, with a torn
  last entry in archive-lz4 only)
  journal/journal.json    the records, the index entries, and seek_time cases: for a time t,
                          the position a reader starts at (null: past every indexed record)

Run: python tests/vectors/make_journal.py [OUTDIR]; tests/formats/test_journal_vectors.py
runs it again into a temporary directory and compares.
"""
import json
import os
import pathlib
import struct
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from mappedbus_py.formats.archive import ZstdSeekTable, compress  # noqa: E402
from mappedbus_py.formats.busmeta import BusMeta  # noqa: E402
from mappedbus_py.formats.layout import (FIRST_RECORD_OFFSET, STATUS_COMMITTED,  # noqa: E402
                                         STATUS_ROLLED_BACK, TIME_INDEX_DIR, archive_name,
                                         mapped_size, slot_size, time_index_name)
from mappedbus_py.formats.timeindex import encode_header, entry_bytes, floor_ms  # noqa: E402

BUS_ID = "0123456789abcdef0123456789abcdef"
CREATED_NS = 1_700_000_000_000_000_000
SEGMENT = 1
SEGMENT_SIZE = 4096
RECORD_SIZE = 24
ARCHIVE_DIR = "/archive/of/the/vector"
T0 = 1_700_000_100_000_000_000      # a millisecond boundary
# (record number, writer, allocation time offset from T0 in ns); records in position order.
# Writer A and writer B interleave; each writes one entry per millisecond of its records
# and one for its first record in the segment.
RECORDS = [
    (0, "A", 0), (1, "A", 200_000), (2, "B", 300_000), (3, "A", 999_999),
    (4, "B", 1_000_000), (5, "A", 1_000_001), (6, "A", 1_500_000), (7, "B", 2_999_999),
    (8, "A", 3_000_000), (9, "B", 7_000_123),
]
ROLLED_BACK = 10          # one more slot, rolled back (no entry: it was never committed)
ZSTD_FRAME_BYTES = 1024   # archive-zstd's frames: four of the 4096-byte segment
# The vector directories: their name after "archive-", the compression bus.meta names.
FORMS = {"none": "none", "zstd": "zstd", "zstd-oneframe": "zstd", "lz4": "lz4"}


def _meta(compress_how):
    extra = (("archive_dir", ARCHIVE_DIR), ("archive_after", "1"), ("archive_age_ms", "0"),
             ("archive_compress", compress_how), ("archive_retain_segments", "0"),
             ("archive_retain_bytes", "0"), ("archive_retain_age_ms", "0"))
    return BusMeta(kind="rolling", id=BUS_ID, created_ns=CREATED_NS, record_size=RECORD_SIZE,
                   segment_size=SEGMENT_SIZE, extra=extra)


def _position(n):
    return SEGMENT * SEGMENT_SIZE + FIRST_RECORD_OFFSET + n * slot_size(RECORD_SIZE)


def _segment_bytes():
    buf = bytearray(mapped_size(SEGMENT_SIZE))
    slot = slot_size(RECORD_SIZE)
    for n, writer, _ in RECORDS:
        off = FIRST_RECORD_OFFSET + n * slot
        payload = f"rec{n}-{writer}".encode()
        struct.pack_into("<ii", buf, off, STATUS_COMMITTED, len(payload))
        buf[off + 8:off + 8 + len(payload)] = payload
    off = FIRST_RECORD_OFFSET + ROLLED_BACK * slot
    struct.pack_into("<ii", buf, off, STATUS_ROLLED_BACK, 0)
    struct.pack_into("<q", buf, 0, FIRST_RECORD_OFFSET + (ROLLED_BACK + 1) * slot)
    return bytes(buf)


def _entries():
    """The entries in the order the two writers appended them (by time)."""
    out, last = [], {}
    for n, writer, dt in sorted(RECORDS, key=lambda r: r[2]):
        t = T0 + dt
        if last.get(writer) != floor_ms(t):
            last[writer] = floor_ms(t)
            out.append((t, _position(n)))
    return out


def seek(entries, t):
    """The rule (layout, "the journal"): the smallest position among entries at or after
    floor_ms(t); None when there is none."""
    later = [p for (et, p) in entries if et >= floor_ms(t)]
    return min(later) if later else None


def _cases(entries):
    times = sorted({T0 + dt + d for _, _, dt in RECORDS for d in (-1, 0, 1)}
                   | {floor_ms(T0 + dt) + d for _, _, dt in RECORDS
                      for d in (-1, 0, 999_999, 1_000_000)}
                   | {T0 - 5_000_000, T0 + 50_000_000})
    return [{"t_ns": t, "position": seek(entries, t)} for t in times]


def build(out):
    out = pathlib.Path(out)
    seg = _segment_bytes()
    entries = _entries()
    index = encode_header(BUS_ID, SEGMENT, SEGMENT_SIZE, RECORD_SIZE) + b"".join(
        entry_bytes(t, p) for t, p in entries)
    stored = {}
    for form, how in FORMS.items():
        d = out / f"archive-{form}"
        (d / TIME_INDEX_DIR).mkdir(parents=True, exist_ok=True)
        (d / "bus.meta").write_bytes(_meta(how).encode())
        if form == "zstd-oneframe":
            import zstandard
            data = zstandard.ZstdCompressor(level=1, write_content_size=True).compress(seg)
        else:
            data = compress(seg, how, frame_bytes=ZSTD_FRAME_BYTES)
        stored[form] = data
        (d / archive_name(SEGMENT, how)).write_bytes(data)
        torn = b"\x01\x02\x03\x04\x05\x06\x07" if form == "lz4" else b""
        (d / TIME_INDEX_DIR / time_index_name(SEGMENT)).write_bytes(index + torn)
    doc = {
        "why": "issue 37: archived segments (none, zstd seekable, zstd of one frame, lz4) and a "
               "time index; layout.py, 'the journal' and 'ZSTD SEEKABLE'",
        "bus_id": BUS_ID, "segment": SEGMENT, "segment_size": SEGMENT_SIZE,
        "record_size": RECORD_SIZE, "mapped_size": mapped_size(SEGMENT_SIZE),
        "records": [{"position": _position(n), "meta": len(f"rec{n}-{w}"),
                     "payload": f"rec{n}-{w}"} for n, w, _ in RECORDS],
        "rolled_back": [_position(ROLLED_BACK)],
        "index_entries": [{"time_ns": t, "position": p} for t, p in entries],
        "torn_bytes": {f"archive-{form}": 7 if form == "lz4" else 0 for form in FORMS},
        "zstd_frames": [f.dst_size for f in ZstdSeekTable.read(
            stored["zstd"], len(seg), "archive-zstd").frames],
        "seek_time": _cases(entries),
    }
    (out / "journal.json").write_text(json.dumps(doc, indent=1) + "\n")
    return out


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else HERE / "journal"
    print(build(target))
    os.sync()
