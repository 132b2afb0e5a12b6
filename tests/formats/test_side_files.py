"""Every file written beside a bus is named once (layout.SIDE_SUFFIXES, SIDE_FILES) and listed by
formats.files.side_files; the Spark connector's BusOptions.isSidecar names the same suffixes."""
import os
import re

from mappedbus_py import MappedBusReader, MappedBusWriter, RollingBusReader, RollingBusWriter
from mappedbus_py.formats import layout
from mappedbus_py.formats.files import remove_bus, side_files
from mappedbus_py.groups import GroupReader

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPARK = os.path.join(ROOT, "interop", "src", "spark", "java", "io", "mappedbuspy", "spark")
MAIN = os.path.join(ROOT, "interop", "src", "main", "java", "io", "mappedbuspy")


def _java_string(source, name):
    # The value of `static final String NAME = "...";` or `= Layout.OTHER;` in a Java source.
    m = re.search(rf"static final String {name} = ([^;]+);", open(source).read())
    assert m, f"{name} not found in {source}"
    value = m.group(1).strip()
    if value.startswith('"'):
        return value.strip('"')
    cls, _, other = value.rpartition(".")
    return _java_string(os.path.join(MAIN, f"{cls}.java"), other)


def test_the_spark_connector_names_the_same_side_suffixes():
    source = os.path.join(SPARK, "BusOptions.java")
    body = re.search(r"static boolean isSidecar\(String name\) \{(.*?)\n    \}", open(source).read(),
                     re.S).group(1)
    named = set()
    for ref in re.findall(r"name\.endsWith\(([\w.]+)\)", body):
        cls, _, const = ref.rpartition(".")
        where = {"": source, "Layout": os.path.join(MAIN, "Layout.java"),
                 "CommitLog": os.path.join(SPARK, "write", "CommitLog.java")}[cls]
        named.add(_java_string(where, const))
    assert named == set(layout.SIDE_SUFFIXES)


def _java_array(source, name):
    # The names in `private static final String[] NAME = {A, B, ...};` of Layout.java.
    m = re.search(rf"static final String\[\] {name} = \{{([^}}]*)\}};", open(source).read())
    assert m, f"{name} not found in {source}"
    return tuple(_java_string(source, c.strip()) for c in m.group(1).split(","))


def test_java_layout_names_the_same_side_files_for_its_remove_bus():
    # Layout.sideFiles / Layout.removeBus (Java's side_files / remove_bus) list these two.
    source = os.path.join(MAIN, "Layout.java")
    assert _java_array(source, "SIDE_SUFFIXES") == layout.SIDE_SUFFIXES
    assert _java_array(source, "SIDE_FILES") == layout.SIDE_FILES


def _write_and_consume(writer, reader_class, path):
    # A record written, then read and committed by a parked consumer (wake file, registry).
    with writer as w:
        w.write(b"12345678")
        with reader_class(path, consumer="c", idle="park") as r:
            assert r.read(1) is not None
            r.commit()


def test_side_files_of_a_single_file_bus_and_of_a_rolling_one(tmp_path):
    bus = str(tmp_path / "bus")
    assert side_files(bus) == [bus + s for s in layout.SIDE_SUFFIXES]
    rolling = tmp_path / "rolling"
    rolling.mkdir()
    assert side_files(rolling) == [os.path.join(rolling, n) for n in layout.SIDE_FILES]


def test_every_file_a_bus_leaves_beside_it_is_a_side_file(tmp_path):
    # A bus with every side file the library makes today: metadata, wake file (a parked
    # reader's), consumer registry, writers file, a work group.
    bus = str(tmp_path / "bus")
    _write_and_consume(MappedBusWriter(bus, 1 << 16, 8), MappedBusReader, bus)
    with GroupReader(bus, "g") as g:
        g.read(1)
    left = {os.path.join(tmp_path, n) for n in os.listdir(tmp_path)} - {bus}
    assert left and left <= set(side_files(bus))
    remove_bus(bus)
    assert os.listdir(tmp_path) == []


def test_every_file_a_rolling_bus_holds_besides_segments_is_a_side_file(tmp_path):
    d = str(tmp_path / "r")
    _write_and_consume(RollingBusWriter(d, 1 << 16, 8), RollingBusReader, d)
    names = {n for n in os.listdir(d) if not n.endswith(layout.SEGMENT_SUFFIX)}
    assert names and {os.path.join(d, n) for n in names} <= set(side_files(d))
    remove_bus(d)
    assert not os.path.exists(d)
