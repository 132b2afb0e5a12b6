"""The Java rolling bus (RollingBusWriter/RollingBusReader, through BusTool's rolling-* commands)
with real processes: Java and Python writers and readers sharing one rolling bus, gaps seen the
same way by both, and segments exchanged with the Java original (Mappedbus 0.5.1)."""
import os
import shutil
import struct
import subprocess
import sys

import pytest

from support import procs
from support.java_original import client_command
from mappedbus_py import BusGapError, RollingBusReader, jvm

ROLLING_CHILD = [sys.executable, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                              "support", "rolling_child.py")]

pytestmark = pytest.mark.java


@pytest.fixture(scope="module")
def jar():
    return procs.java_or_skip()


def bus_tool(*args, go=None):
    gate = () if go is None else ("--go", go)
    return subprocess.Popen(jvm.java_command(procs.BUS_TOOL, *gate, *args,
                                             jvm_args=("-Xmx64m", "-XX:+UseSerialGC")),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(p, timeout=180):
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, f"{p.args}: exit {p.returncode}\n{out[-2000:]}\n{err[-2000:]}"
    return out


def records(out):
    """Reader output -> ([(position, meta, payload)], last line)."""
    lines = out.strip().splitlines()
    recs = [line.split() for line in lines[:-1]]
    return [(int(p), int(m), bytes.fromhex(h)) for p, m, h in recs], lines[-1]


@pytest.mark.slow
def test_java_and_python_writers_and_readers_share_one_rolling_bus(jar, tmp_path):
    # 50 records per segment: the four writers cross ~240 boundaries, racing at many of them.
    seg, each = 8 + 16 * 50, 3000
    bus = str(tmp_path / "bus.d")
    finish(bus_tool("rolling-write", bus, seg, 8, 0, 0))        # create it: readers never do
    total = 4 * each
    readers = [bus_tool("rolling-read", bus, seg, 8, total, "--idle-exit", 60000),
               subprocess.Popen(ROLLING_CHILD + ["read", bus, str(total), "--idle-exit", "60000"],
                                stdout=subprocess.PIPE, text=True)]
    go = str(tmp_path / "go")
    writers = [bus_tool("rolling-write", bus, seg, 8, each, wid, go=go) for wid in (1, 2)]
    writers += [subprocess.Popen(ROLLING_CHILD + ["write", bus, str(seg), "8", str(each), str(wid),
                                                  "--go", go], stdout=subprocess.PIPE, text=True)
                for wid in (3, 4)]
    procs.open_gate(go, writers)
    for w in writers:
        assert finish(w).split()[-4:] == ["wrote", str(each), "committed", str(each)]
    java_recs, java_end = records(finish(readers[0]))
    py_recs, py_end = records(finish(readers[1]))
    assert java_end == f"END {total} lost=0 skipped=0"
    assert py_end == f"END {total} lost=0 skipped=0"
    assert java_recs == py_recs, "the two readers saw different orders"
    procs.check_integrity(java_recs, [1, 2, 3, 4], each)
    positions = [p for p, _, _ in java_recs]
    assert positions == sorted(set(positions))
    assert all(p % seg + 16 <= seg for p in positions), "a record spans two segments"
    assert positions[-1] // seg >= total // 50 - 1


def test_java_and_python_readers_report_the_same_gap(jar, tmp_path):
    seg = 4096
    per = (seg - 8) // 16
    bus = str(tmp_path / "bus.d")
    # A Java writer with retention 2 fills 6 segments; the oldest ones are removed.
    finish(bus_tool("rolling-write", bus, seg, 8, 6 * per + 3, 7, "--retain-segments", 2))
    oldest = min(int(n[:20]) for n in os.listdir(bus) if n.endswith(".bus"))
    assert oldest >= 3
    out = finish(bus_tool("rolling-read", bus, seg, 8, 10, "--start", 8))
    assert out.strip() == f"GAP 8 {oldest * seg + 8} {oldest * per}"
    with pytest.raises(BusGapError) as e:
        RollingBusReader(bus, start=8).open()
    assert (e.value.lost_from, e.value.lost_to, e.value.lost) == (8, oldest * seg + 8, oldest * per)
    # Skipping: both continue at the oldest retained record with the same count lost.
    recs, end = records(finish(bus_tool("rolling-read", bus, seg, 8, 10**6, "--start", 8,
                                        "--on-gap", "skip", "--idle-exit", 300)))
    assert end == f"END {(6 - oldest) * per + 3} lost={oldest * per} skipped=0"
    assert recs[0][0] == oldest * seg + 8
    assert struct.unpack("<ii", recs[0][2]) == (7, oldest * per)


def test_java_reader_follows_a_python_writer_across_segments(jar, tmp_path):
    seg = 4096
    per = (seg - 8) // 16
    bus = str(tmp_path / "bus.d")
    w = subprocess.run(ROLLING_CHILD + ["write", bus, str(seg), "8", "1", "5"], capture_output=True,
                       text=True, timeout=60)
    assert w.returncode == 0, w.stderr
    reader = bus_tool("rolling-read", bus, seg, 8, 3 * per + 1, "--idle-exit", 30000)
    w = subprocess.run(ROLLING_CHILD + ["write", bus, str(seg), "8", str(3 * per), "6"],
                       capture_output=True, text=True, timeout=120)
    assert w.returncode == 0, w.stderr
    recs, end = records(finish(reader))
    assert end == f"END {3 * per + 1} lost=0 skipped=0"
    assert [p for p, _, _ in recs] == [k // per * seg + 8 + k % per * 16 for k in range(3 * per + 1)]
    assert [struct.unpack("<ii", d)[1] for _, _, d in recs[1:]] == list(range(3 * per))


# -- the Java original --------------------------------------------------------------------------

ORIGINAL_CLIENT = r"""
import io.mappedbus.MappedBusReader;
import io.mappedbus.MappedBusWriter;
import java.io.EOFException;

public class OriginalClient {
    public static void main(String[] a) throws Exception {
        long size = Long.parseLong(a[2]);
        int rs = Integer.parseInt(a[3]);
        if (a[0].equals("read")) {
            MappedBusReader r = new MappedBusReader(a[1], size, rs);
            r.open();
            // At a segment's end the original waits out its timeout on the partial slot past the last
            // record before it throws EOFException: keep that short.
            r.setTimeout(100);
            byte[] b = new byte[rs];
            StringBuilder out = new StringBuilder();
            int n = 0;
            long idleSince = System.nanoTime();
            try {
                while (System.nanoTime() - idleSince < 10_000_000_000L) {
                    if (r.next()) {
                        int len = r.readBuffer(b, 0);
                        for (int i = 0; i < len; i++) {
                            out.append(String.format("%02x", b[i]));
                        }
                        out.append('\n');
                        n++;
                        idleSince = System.nanoTime();
                    }
                }
                out.append("IDLE ").append(n);
            } catch (EOFException e) {
                out.append("EOF ").append(n);
            }
            System.out.println(out);
        } else {
            MappedBusWriter w = new MappedBusWriter(a[1], size, rs);
            w.open();
            int count = Integer.parseInt(a[4]);
            byte[] rec = new byte[8];
            for (int i = 0; i < count; i++) {
                java.nio.ByteBuffer.wrap(rec).order(java.nio.ByteOrder.LITTLE_ENDIAN).putInt(9).putInt(i);
                w.write(rec, 0, 8);
            }
            w.close();
            System.out.println("wrote " + count);
        }
    }
}
"""


@pytest.fixture(scope="module")
def original(tmp_path_factory, jar):
    """A java command line running OriginalClient against the original jar."""
    return client_command(tmp_path_factory.mktemp("original"), "OriginalClient", ORIGINAL_CLIENT)


@pytest.mark.original
def test_original_reads_a_segment_written_by_the_rolling_writer(original, tmp_path):
    seg = 8192                       # a page multiple: the original sets the file length to it
    per = (seg - 8) // 16
    bus = str(tmp_path / "bus.d")
    finish(bus_tool("rolling-write", bus, seg, 8, 2 * per + 10, 4))
    out = subprocess.run(original + ["read", os.path.join(bus, "00000000000000000001.bus"), str(seg), "8"],
                         capture_output=True, text=True, timeout=60, check=True).stdout.split()
    assert out[-2:] == ["EOF", str(per)], "the original did not read segment 1 to its end"
    assert [struct.unpack("<ii", bytes.fromhex(h)) for h in out[:-2]] == \
        [(4, i) for i in range(per, 2 * per)]


@pytest.mark.original
def test_rolling_reader_reads_a_segment_the_original_wrote(original, tmp_path):
    seg = 8192
    per = (seg - 8) // 16
    bus = str(tmp_path / "bus.d")
    finish(bus_tool("rolling-write", bus, seg, 8, 0, 0))       # directory and bus.meta
    written = str(tmp_path / "original.bus")
    subprocess.run(original + ["write", written, str(seg), "8", str(per)], check=True, timeout=60,
                   capture_output=True)
    # The original's full file becomes segment 1 (segment 0 stays empty and full of nothing).
    os.remove(os.path.join(bus, "00000000000000000000.bus"))
    target = os.path.join(bus, "00000000000000000001.bus")
    shutil.copyfile(written, target)
    os.chmod(target, 0o600)
    recs, end = records(finish(bus_tool("rolling-read", bus, seg, 8, 10 * per, "--idle-exit", 300)))
    assert end == f"END {per} lost=0 skipped=0"
    assert [p for p, _, _ in recs] == [seg + 8 + 16 * i for i in range(per)]
    assert [struct.unpack("<ii", d) for _, _, d in recs] == [(9, i) for i in range(per)]
