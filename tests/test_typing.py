"""Type information: the stubs cover the Cython modules, mypy --strict passes on the Python
examples of the README and the guides (docs/) and on samples/, and inspect.signature works on the classes."""
import ast
import inspect
import pathlib
import re
import subprocess
import sys

import pytest

import mappedbus_py
from mappedbus_py import MappedBusReader, MappedBusWriter, Record, RollingBusReader, RollingBusWriter

ROOT = pathlib.Path(__file__).resolve().parent.parent
PKG = ROOT / "mappedbus_py"


def _mypy(*paths, cwd=ROOT):
    pytest.importorskip("mypy")
    # --follow-imports=silent: the package's own modules are checked as a user's mypy sees an
    # installed package (its errors not reported, its stubs and annotations used); what
    # must pass is the code that uses it.
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--no-incremental", "--cache-dir=/dev/null", *map(str, paths)],
        cwd=cwd, capture_output=True, text=True, timeout=600)


def readme_examples():
    """The ```python blocks of the README and of the guides under docs/, where its examples went."""
    docs = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("**/*.md"))
    return [block for doc in docs
            for block in re.findall(r"^ *```python\n(.*?)^ *```", doc.read_text(), re.S | re.M)]


def test_readme_examples_pass_mypy_strict(tmp_path):
    blocks = readme_examples()
    assert len(blocks) >= 3
    files = []
    for i, block in enumerate(blocks):
        f = tmp_path / f"readme_example_{i}.py"
        f.write_text(_dedent(block))
        files.append(f)
    r = _mypy(*files, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def _dedent(block):
    import textwrap
    return textwrap.dedent(block)


def test_samples_pass_mypy_strict():
    r = _mypy(ROOT / "samples")
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_misuse_is_a_type_error_for_mypy(tmp_path):
    # The stubs say something: the ms/seconds trap and a wrong field type are caught.
    f = tmp_path / "misuse.py"
    f.write_text("from mappedbus_py import MappedBusReader, PriceUpdate\n"
                 "r = MappedBusReader('/dev/shm/x', 1 << 20, 12, timeout='2000')\n"
                 "p = PriceUpdate()\n"
                 "p.price = 'high'\n"
                 "rec = r.read()\n"
                 "print(rec.meta)\n")
    r = _mypy(f)
    assert r.returncode == 1
    assert 'Argument "timeout" to "MappedBusReader" has incompatible type "str"' in r.stdout
    assert 'incompatible types in assignment (expression has type "str"' in r.stdout.lower()
    assert 'Item "None" of "Record | None" has no attribute "meta"' in r.stdout


def test_the_package_ships_stubs_and_py_typed():
    assert (PKG / "py.typed").is_file()
    for mod in ("_core/_reader", "_core/_writer", "_core/_record", "_core/_mapping",
                "_core/_message", "rolling/reader", "rolling/writer", "rolling/__init__"):
        assert (PKG / f"{mod}.pyi").is_file(), mod


def _stub_members(stub, cls):
    tree = ast.parse((PKG / stub).read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            names = set()
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(item.name)
                elif isinstance(item, ast.AnnAssign):
                    names.add(item.target.id)
            return names
    raise AssertionError(f"{stub} has no class {cls}")


@pytest.mark.parametrize("stub, cls", [("_core/_reader.pyi", MappedBusReader),
                                       ("_core/_writer.pyi", MappedBusWriter),
                                       ("_core/_record.pyi", Record),
                                       ("rolling/reader.pyi", RollingBusReader),
                                       ("rolling/writer.pyi", RollingBusWriter)])
def test_the_stubs_list_every_public_member(stub, cls):
    public = {n for n in dir(cls) if not n.startswith("_")}
    missing = public - _stub_members(stub, cls.__name__)
    assert not missing, f"{stub} lacks {sorted(missing)}"


def test_inspect_signature_works_on_the_classes():
    sig = inspect.signature(MappedBusReader)
    assert list(sig.parameters)[:3] == ["path", "file_size", "record_size"]
    assert sig.parameters["timeout"].default == 2.0
    assert sig.parameters["timeout"].kind is inspect.Parameter.KEYWORD_ONLY
    assert inspect.signature(MappedBusWriter).parameters["mode"].default == 0o600
    assert list(inspect.signature(Record).parameters) == ["position", "meta", "payload", "topic",
                                                         "flags", "framed", "serializer"]
    # The signature in the docstring is the real one.
    r = MappedBusReader("/nonexistent", 1 << 16, 8)
    assert r.timeout == sig.parameters["timeout"].default
    assert mappedbus_py.__all__
