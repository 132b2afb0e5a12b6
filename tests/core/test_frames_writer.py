"""Frames, the writer's side (docs/design/frames.md): the shared vectors written byte for
byte, the sizes a framed bus takes, topics named once under racing writers, and bad input
refused at once."""
import json
import multiprocessing
import os
import shutil
import struct
import subprocess
import sys

import pytest

import mappedbus_py as mb
from mappedbus_py import BusFullError, BusMismatchError, CorruptBusError, MappedBusWriter
from mappedbus_py import TopicsFullError, UnsafeBusFileError
from mappedbus_py._core._topics import TopicsFile
from mappedbus_py.formats import layout

VECTORS = os.path.join(os.path.dirname(__file__), "..", "vectors")
ROOT = os.geteuid() == 0
HAVE_SETPRIV = ROOT and shutil.which("setpriv") is not None


def vector(name):
    with open(os.path.join(VECTORS, "frames.json")) as f:
        (case,) = [c for c in json.load(f)["files"] if c["file"] == name]
    with open(os.path.join(VECTORS, name), "rb") as f:
        return case, f.read()


class Serialized:
    """A serializer whose dumps gives the vector's msgpack bytes as they are."""
    @staticmethod
    def dumps(obj):
        return obj

    @staticmethod
    def loads(data):
        return data


def test_the_writer_writes_the_sizes_vector_byte_for_byte(bus_path):
    case, want = vector("frames-sizes.bus")
    with MappedBusWriter(bus_path, case["file_size"], case["record_size"], frames=True) as w:
        for fr in case["frames"]:
            payload = bytes.fromhex(fr["payload_hex"])
            if fr["flags"] == layout.FRAME_ENCODING_SERIALIZED:
                w2 = MappedBusWriter(bus_path, frames=True, serializer=Serialized)
                with w2:
                    assert w2.write_object(payload)
            else:
                assert w.write(payload)
    with open(bus_path, "rb") as f:
        assert f.read() == want


def test_a_message_meeting_the_end_is_padded_then_bus_full(bus_path):
    case, want = vector("frames-padding.bus")
    with MappedBusWriter(bus_path, case["file_size"], case["record_size"], frames=True) as w:
        assert w.write(bytes.fromhex(case["frames"][0]["payload_hex"]))
        assert w.write(bytes.fromhex(case["frames"][1]["payload_hex"]))
        with pytest.raises(BusFullError, match="padded"):
            w.write(bytes(300))
    with open(bus_path, "rb") as f:
        assert f.read() == want


def test_topics_are_named_once_in_the_topics_file(bus_path):
    with MappedBusWriter(bus_path, 1 << 16, 64, frames=True) as w:
        assert w.write(b"o1", topic="orders")
        assert w.write(b"q1", topic="quotes")
        assert w.write(b"o2", topic="orders")
        assert w.topic_id("orders") == 1 and w.topic_id("quotes") == 2
    with TopicsFile(bus_path + layout.TOPICS_SUFFIX, writable=False) as t:
        assert t.names() == {1: "orders", 2: "quotes"}
        assert t.count == 2


def _name_topics(path, names, q):
    w = MappedBusWriter(path, frames=True).open()
    q.put({n: w.topic_id(n) for n in names})
    w.close()


def test_racing_writers_agree_on_what_a_name_means(bus_path):
    MappedBusWriter(bus_path, 1 << 16, 64, frames=True).open().close()
    names = [f"t{i}" for i in range(40)]
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_name_topics, args=(bus_path, names[i::2] + names, q))
             for i in range(4)]
    for p in procs:
        p.start()
    got = [q.get(timeout=30) for _ in procs]
    for p in procs:
        p.join(30)
    with TopicsFile(bus_path + layout.TOPICS_SUFFIX, writable=False) as t:
        table = t.names()
        assert t.count == len(table) <= layout.TOPICS_MAX     # every claim published
        for ids in got:
            for name, tid in ids.items():
                assert table[tid] == name                    # an id means one name
        assert set(table.values()) == set(names)


def test_the_topics_table_full_is_an_error_at_once(bus_path):
    with MappedBusWriter(bus_path, 1 << 16, 64, frames=True) as w:
        for i in range(layout.TOPICS_MAX):
            w.topic_id(f"t{i}")
        with pytest.raises(TopicsFullError, match="255"):
            w.write(b"x", topic="one more")
        assert w.write(b"x", topic="t7")       # the known ones still work


@pytest.mark.parametrize("topic, error", [(3, TypeError), (b"q", TypeError), ("", ValueError),
                                          ("x" * 57, ValueError), ("a\nb", ValueError)])
def test_a_bad_topic_is_refused_before_anything_is_written(bus_path, topic, error):
    with MappedBusWriter(bus_path, 1 << 16, 64, frames=True) as w:
        with pytest.raises(error):
            w.write(b"x", topic=topic)
    with open(bus_path, "rb") as f:
        assert struct.unpack("<q", f.read(8))[0] == 8      # nothing reserved


def test_sizes_and_modes_refused_at_once(bus_path):
    with pytest.raises(ValueError, match="multiple of 8"):
        MappedBusWriter(bus_path, 4096, 20, frames=True)
    with pytest.raises(ValueError, match="at least 16"):
        MappedBusWriter(bus_path, 4096, 8, frames=True)
    with MappedBusWriter(bus_path, 4096, 32, frames=True) as w:
        assert w.max_message == (4096 - 8) // 40 * 40 - 24
        with pytest.raises(ValueError, match="longer than this bus's largest"):
            w.write(bytes(w.max_message + 1))
        with pytest.raises(TypeError, match="write_batch"):
            w.write_batch(bytes(32))
        assert w.write(bytes(w.max_message))               # exactly the largest fits
    with pytest.raises(BusMismatchError, match="frames=True"):
        MappedBusWriter(bus_path).open()
    with pytest.raises(BusMismatchError, match="frames"):
        mb.MappedBusReader(bus_path, frames=False).open()
    with mb.MappedBusReader(bus_path) as r:                 # a reader learns it from PATH.meta
        assert r.frames


def test_frames_on_an_unframed_bus_is_refused(bus_path):
    MappedBusWriter(bus_path, 4096, 32).open().close()
    with pytest.raises(BusMismatchError, match="without frames"):
        MappedBusWriter(bus_path, frames=True).open()
    with MappedBusWriter(bus_path) as w:
        with pytest.raises(TypeError, match="framed"):
            w.write(b"x", topic="q")
        with pytest.raises(TypeError, match="framed"):
            w.write_object({})


def test_an_unframed_bus_keeps_its_metadata_as_before(bus_path):
    MappedBusWriter(bus_path, 4096, 32).open().close()
    with open(bus_path + ".meta") as f:
        assert "frames" not in f.read()


def _plant(path, how, tmp_path):
    if how == "garbage":
        with open(path, "wb") as f:
            f.write(os.urandom(layout.TOPICS_FILE_SIZE))
    elif how == "short":
        with open(path, "wb") as f:
            f.write(bytes(layout.TOPICS_FILE_SIZE + 8))
    elif how == "count":
        buf = bytearray(layout.TOPICS_FILE_SIZE)
        struct.pack_into("<qi", buf, 0, layout.TOPICS_MAGIC, layout.TOPICS_VERSION)
        struct.pack_into("<i", buf, layout.TOPICS_COUNT_OFFSET, 999)
        with open(path, "wb") as f:
            f.write(buf)
    elif how == "symlink":
        target = tmp_path / "elsewhere"
        target.write_bytes(bytes(layout.TOPICS_FILE_SIZE))
        os.symlink(target, path)
    else:
        d = os.path.dirname(path)
        mode = os.stat(d).st_mode & 0o7777
        os.chmod(d, 0o777)
        try:
            subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                            sys.executable, "-c",
                            f"open({path!r}, 'wb').write(bytes({layout.TOPICS_FILE_SIZE}))"],
                           check=True, cwd="/")
        finally:
            os.chmod(d, mode)


KINDS = {"garbage": CorruptBusError, "short": CorruptBusError, "count": CorruptBusError,
         "symlink": UnsafeBusFileError,
         "foreign": UnsafeBusFileError}


@pytest.mark.parametrize("how", list(KINDS))
def test_a_bad_topics_file_is_an_error_at_the_first_topic(bus_path, tmp_path, how):
    if how == "foreign" and not HAVE_SETPRIV:
        pytest.skip("needs root and setpriv")
    with MappedBusWriter(bus_path, 1 << 16, 64, frames=True) as w:
        _plant(bus_path + layout.TOPICS_SUFFIX, how, tmp_path)
        with pytest.raises(KINDS[how]):
            w.write(b"x", topic="quotes")
        assert w.write(b"untagged")        # the bus itself is fine
