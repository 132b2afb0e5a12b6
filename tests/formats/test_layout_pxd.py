"""The offsets Cython code compiles in (_layout.pxd) are layout.py's."""
from mappedbus_py.formats import layout
from mappedbus_py.rolling._rolling import PXD_CONSTANTS


def test_the_cimportable_layout_matches_layout_py():
    assert PXD_CONSTANTS == {k: layout.CONSTANTS[k] for k in PXD_CONSTANTS}
    assert len(PXD_CONSTANTS) == 6


def test_no_literal_record_offsets_in_the_hot_paths():
    import pathlib
    import re
    root = pathlib.Path(layout.__file__).parent.parent
    for name in ("_core/_writer.pyx", "_core/_reader.pyx", "rolling/_rolling.pyx"):
        text = (root / name).read_text()
        assert not re.search(r"\brec \+ [48]\b|_cur \+ 8\b", text), name


def test_the_writers_header_matches_layout_py():
    # _writers.h's constants as compiled: the writers file (docs/design/side-files.md).
    from mappedbus_py._core._writers import C_CONSTANTS
    assert C_CONSTANTS == {k: layout.CONSTANTS[k] for k in C_CONSTANTS}
    assert len(C_CONSTANTS) == 12
    assert layout.WRITER_SLOT_COUNT == 255
    assert layout.WRITERS_MAGIC.to_bytes(8, "little") == b"MBUSWRT1"
