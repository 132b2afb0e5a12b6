"""The Java reader (BusTool read) delivers from every golden file exactly what manifest.json lists."""
import json
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "tests", "data", "golden")
# The library and the tools jar (BusTool), as a class path.
JAR = os.pathsep.join(os.path.join(ROOT, "build", "jvm", name)
                     for name in ("mappedbuspy.jar", "mappedbuspy-tools.jar"))

with open(os.path.join(GOLDEN, "manifest.json")) as f:
    MANIFEST = {entry["file"]: entry for entry in json.load(f)["files"]}

pytestmark = [
    pytest.mark.java,
    pytest.mark.skipif(shutil.which("java") is None or shutil.which("javac") is None,
                       reason="needs a JDK (java and javac) on PATH"),
]

END_RE = re.compile(r"END (\d+) rolledBackSkipped=(\d+) rollbacks=(\d+)")


@pytest.fixture(scope="module")
def jar():
    """Builds the jars once per module; a no-op when they are up to date."""
    proc = subprocess.run(["bash", os.path.join(ROOT, "interop", "build.sh")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return JAR


def bus_tool_read(jar, path, entry, *options):
    proc = subprocess.run(
        ["java", "-cp", jar, "io.mappedbuspy.tools.BusTool", "read", path,
         str(entry["file_size"]), str(entry["record_size"]), "1000000",
         "--timeout", "50", "--idle-exit", "500", *options],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    end = END_RE.fullmatch(lines[-1])
    assert end, proc.stdout
    records = []
    for line in lines[:-1]:
        position, meta, payload_hex = line.split(" ")
        records.append({"offset": int(position), "meta": int(meta), "payload_hex": payload_hex})
    return records, [int(g) for g in end.groups()]


def expected(entry):
    return [{k: d[k] for k in ("offset", "meta", "payload_hex")}
            for d in entry["delivered_when_uncommitted_rolled_back"]]


def uncommitted(entry):
    return sum(1 for s in entry["slots"] if s["status"] == 0)


def rolled_back(entry):
    return sum(1 for s in entry["slots"] if s["status"] == 2)


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_java_reader_delivers_manifest_records(jar, tmp_path, name):
    entry = MANIFEST[name]
    path = str(tmp_path / name)
    shutil.copyfile(os.path.join(GOLDEN, name), path)  # the reader may roll back a slot
    records, (count, skipped, rollbacks) = bus_tool_read(jar, path, entry)
    assert records == expected(entry)
    assert count == len(records)
    assert rollbacks == uncommitted(entry)
    # A slot this reader rolled back is then skipped as status 2, like one found rolled back.
    assert skipped == rolled_back(entry) + uncommitted(entry)


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_java_read_only_reader_leaves_file_untouched(jar, tmp_path, name):
    entry = MANIFEST[name]
    path = str(tmp_path / name)
    shutil.copyfile(os.path.join(GOLDEN, name), path)
    with open(path, "rb") as f:
        before = f.read()
    records, (count, skipped, rollbacks) = bus_tool_read(jar, path, entry, "--read-only")
    assert records == expected(entry)
    assert rollbacks == 0                   # uncommitted slots are skipped locally, not written
    assert skipped == rolled_back(entry) + uncommitted(entry)
    with open(path, "rb") as f:
        assert f.read() == before


def test_java_reader_stops_at_eof_on_full_bus(jar, tmp_path):
    """full-r16.bus: the limit is past the logical end; the reader must stop with EOF, not idle out."""
    entry = MANIFEST["full-r16.bus"]
    path = str(tmp_path / "full-r16.bus")
    shutil.copyfile(os.path.join(GOLDEN, "full-r16.bus"), path)
    proc = subprocess.run(
        ["java", "-cp", jar, "io.mappedbuspy.tools.BusTool", "read", path,
         str(entry["file_size"]), str(entry["record_size"]), "1000000",
         "--timeout", "10000", "--idle-exit", "60000"],
        capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "END 3 rolledBackSkipped=0 rollbacks=0"


def test_java_layout_constants(jar):
    """BusTool layout prints NAME=value for the wire constants (the Python side compares them)."""
    out = subprocess.run(["java", "-cp", jar, "io.mappedbuspy.tools.BusTool", "layout"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    constants = dict(line.split("=", 1) for line in out.splitlines())
    assert constants["FIRST_RECORD_OFFSET"] == "8"
    assert constants["HEADER_SIZE"] == "8"
    assert constants["META_MAGIC"] == "# mappedbus bus metadata"
    from mappedbus_py.formats.layout import CONSTANTS
    assert sorted(constants) == sorted(CONSTANTS)
