"""Archived .zst segments in zstd's seekable format (layout.py, "ZSTD SEEKABLE"): the frames and
their seek table as ``compress`` writes them, read back whole by ``decompress`` (and by the zstd
tool), the old single-frame files still read, and every rule of the table refused by name
(the Java side: interop/.../ZstdSeekTableTest.java)."""
import random
import shutil
import struct
import subprocess

import pytest
import zstandard

from mappedbus_py.errors import CorruptBusError
from mappedbus_py.formats.archive import ZstdSeekTable, compress, decompress, decompress_into
from mappedbus_py.formats.layout import (ARCHIVE_ZSTD_FRAME_BYTES, ARCHIVE_ZSTD_MAX_FRAMES,
                                         ARCHIVE_ZSTD_SEEK_FOOTER_SIZE, ARCHIVE_ZSTD_SEEKABLE_MAGIC,
                                         ARCHIVE_ZSTD_SKIPPABLE_MAGIC)

MIB = 1 << 20
THREE = 2 * ARCHIVE_ZSTD_FRAME_BYTES + 4096     # a segment of three frames


def _segment(size, seed=7):
    """A segment's bytes: a limit, then records of a price-like stream (compressible, not
    trivially), zeros after them."""
    rnd = random.Random(seed)
    buf = bytearray(size)
    off, px = 8, 100.0
    while off + 40 <= size * 3 // 4:
        px += rnd.gauss(0, 0.01)
        struct.pack_into("<iiiqdi", buf, off, 1, 24, rnd.randrange(64), off, px, rnd.randrange(1000))
        off += 40
    struct.pack_into("<q", buf, 0, off)
    return bytes(buf)


@pytest.mark.parametrize("size", [4096, MIB, MIB + 4096, 16 * MIB])
def test_segments_round_trip_in_frames_of_the_layouts_size(size):
    seg = _segment(size)
    data = compress(seg, "zstd")
    table = ZstdSeekTable.read(data, size, "seg")
    full, rest = divmod(size, ARCHIVE_ZSTD_FRAME_BYTES)
    assert [f.dst_size for f in table.frames] == [ARCHIVE_ZSTD_FRAME_BYTES] * full + ([rest] if rest else [])
    assert table.frames[0].src_offset == 0 and table.frames[0].dst_offset == 0
    for f in table.frames:      # every frame a standard frame with its content size
        assert zstandard.frame_content_size(data[f.src_offset:f.src_offset + f.src_size]) == f.dst_size
    assert decompress(data, "zstd", size, "seg") == seg
    out = bytearray(size)
    decompress_into(data, "zstd", size, "seg", out, threads=2)
    assert out == seg


@pytest.mark.skipif(shutil.which("zstd") is None, reason="the zstd tool is not installed")
def test_the_zstd_tool_restores_the_segment_and_skips_the_table(tmp_path):
    seg = _segment(MIB + 4096)
    p = tmp_path / "00000000000000000003.bus.zst"
    p.write_bytes(compress(seg, "zstd"))
    assert subprocess.run(["zstd", "-d", "-c", str(p)], capture_output=True, check=True).stdout == seg


def test_a_file_of_one_frame_reads_as_before():
    seg = _segment(MIB)
    one = zstandard.ZstdCompressor(level=1, write_content_size=True).compress(seg)
    assert ZstdSeekTable.read(one, MIB, "old") is None
    assert decompress(one, "zstd", MIB, "old") == seg


def _table_start(data, n):
    return len(data) - (8 + n * 8 + ARCHIVE_ZSTD_SEEK_FOOTER_SIZE)


def _with(data, off, fmt, value):
    b = bytearray(data)
    struct.pack_into(fmt, b, off, value)
    return bytes(b)


def _cases():
    seg = _segment(THREE)
    data = compress(seg, "zstd")
    n = 3
    t = _table_start(data, n)
    end = len(data)
    c0, d0 = struct.unpack_from("<II", data, t + 8)
    c1, d1 = struct.unpack_from("<II", data, t + 16)
    one_more = _with(data, end - 9, "<I", n + 1)
    yield "skippable magic", _with(data, t, "<I", ARCHIVE_ZSTD_SKIPPABLE_MAGIC + 1), "skippable magic"
    yield "frame size", _with(data, t + 4, "<I", 3 * 8 + 9 + 1), "bytes long"
    yield "descriptor", _with(data, end - 5, "<B", 0x80), "descriptor"
    yield "no frames", _with(data, end - 9, "<I", 0), "0 frames"
    yield "too many frames", _with(data, end - 9, "<I", ARCHIVE_ZSTD_MAX_FRAMES + 1), "frames, not 1 to"
    yield "more frames than bytes", _with(data[-13:], 0, "<I", 0), "needs"
    yield "a count the table does not hold", one_more, "skippable magic|bytes long"
    yield "size 0", _with(data, t + 8, "<I", 0), "size of 0"
    yield "compressed sum", _with(data, t + 8, "<I", c0 + 1), "bytes of frames"
    yield "decompressed sum", _with(_with(data, t + 12, "<I", d0 + 4096), t + 20, "<I", d1), \
        "decompresses to"
    yield "shifted boundary", _with(_with(data, t + 8, "<I", c0 - 1), t + 16, "<I", c1 + 1), "frame"
    yield "decompressed sizes swapped", _with(_with(data, t + 12, "<I", d0 - 4096), t + 28, "<I", 8192), \
        "frame"
    mid = bytearray(data)
    for i in range(c0 + c1 // 3, c0 + c1 // 3 + 64):
        mid[i] ^= 0x5A
    yield "frame 1 corrupt", bytes(mid), "frame"
    yield "truncated", data[:-1], "truncated"
    yield "table alone", data[t:], "frame"


@pytest.mark.parametrize("name, data, match", list(_cases()), ids=[c[0] for c in _cases()])
def test_each_rule_of_the_seek_table_is_named(name, data, match):
    size = THREE
    with pytest.raises(CorruptBusError, match=match):
        out = decompress(data, "zstd", size, "/archive/00000000000000000003.bus.zst")
        # a corruption zstd cannot see (no checksums: a flipped literal) must still differ
        assert out == _segment(size), "decompressed to other bytes without an error"
        raise AssertionError(f"{name}: no error and the same bytes")


def test_single_flips_in_the_table_are_refused_never_another_error():
    size = THREE
    data = compress(_segment(size), "zstd")
    t = _table_start(data, 3)
    rnd = random.Random(3)
    for _ in range(300):
        b = bytearray(data)
        i = rnd.randrange(t, len(b))
        b[i] ^= 1 << rnd.randrange(8)
        with pytest.raises(CorruptBusError):
            decompress(bytes(b), "zstd", size, "flip")


def test_the_table_bytes_follow_the_layout():
    data = compress(_segment(4096), "zstd")
    assert data[-4:] == struct.pack("<I", ARCHIVE_ZSTD_SEEKABLE_MAGIC)
    c = len(data) - 8 - 8 - ARCHIVE_ZSTD_SEEK_FOOTER_SIZE
    assert struct.unpack_from("<IIIIIBI", data, c) == (
        ARCHIVE_ZSTD_SKIPPABLE_MAGIC, 8 + 9, c, 4096, 1, 0, ARCHIVE_ZSTD_SEEKABLE_MAGIC)
