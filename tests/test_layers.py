"""The house by layer: what ships is the library, each layer small, and no circles.

- the library jar holds ``io.mappedbuspy`` and its messages, never the samples, the benchmark
  drivers or the tools (their own jars, see interop/build.sh);
- no two public Java classes share a simple name, across every source root;
- the modules of ``mappedbus_py`` import each other without a circle.
"""
import ast
import os
import pathlib
import re
import shutil
import subprocess
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "mappedbus_py"
JAVA_ROOTS = ROOT / "interop" / "src"
LIBRARY_SOURCES = JAVA_ROOTS / "main" / "java"


# --- Java ------------------------------------------------------------------------------------

@pytest.mark.java
@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK (javac) to build the jars")
def test_library_jar_holds_the_library_only():
    proc = subprocess.run(["bash", str(ROOT / "interop" / "build.sh")], capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    jvm_dir = ROOT / "build" / "jvm"
    with zipfile.ZipFile(jvm_dir / "mappedbuspy.jar") as jar:
        classes = [n for n in jar.namelist() if n.endswith(".class")]
    assert "io/mappedbuspy/MappedBusWriter.class" in classes
    assert "io/mappedbuspy/messages/PriceUpdate.class" in classes
    packages = {os.path.dirname(n) for n in classes}
    assert packages == {"io/mappedbuspy", "io/mappedbuspy/messages"}, sorted(packages)
    for other in ("samples", "perf", "tools"):
        assert not [n for n in classes if f"/{other}/" in n], f"{other} classes in the library jar"
    # ... and each of those is in its own jar.
    for other, example in (("tools", "BusTool"), ("samples", "TokenRing"), ("perf", "Py4jSink")):
        with zipfile.ZipFile(jvm_dir / f"mappedbuspy-{other}.jar") as jar:
            assert f"io/mappedbuspy/{other}/{example}.class" in jar.namelist()


def test_no_library_source_includes_samples_perf_or_tools():
    packages = {p.parent.relative_to(LIBRARY_SOURCES).as_posix()
                for p in LIBRARY_SOURCES.rglob("*.java")}
    assert packages == {"io/mappedbuspy", "io/mappedbuspy/messages"}, sorted(packages)


PUBLIC_TYPE = re.compile(r"^public\s+(?:(?:final|abstract|sealed|non-sealed|static)\s+)*"
                         r"(?:class|interface|enum|record|@interface)\s+(\w+)", re.M)


def test_no_two_public_java_classes_share_a_simple_name():
    seen = {}
    for path in sorted(JAVA_ROOTS.rglob("*.java")):
        for name in PUBLIC_TYPE.findall(path.read_text()):
            seen.setdefault(name, []).append(str(path.relative_to(ROOT)))
    assert len(seen) > 50, "found too few public classes: the pattern broke"
    shared = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not shared, f"public classes sharing a simple name: {shared}"


# --- Python ----------------------------------------------------------------------------------

_PYX_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(\.+\w*|mappedbus_py(?:\.\w+)?)[ \t]+c?import[ \t]+"
                         r"(\([^)]*\)|[\w \t,]+)|c?import[ \t]+mappedbus_py\.(\w+))", re.M)


def _import_graph():
    """``{module: {modules of mappedbus_py it imports}}`` over ``mappedbus_py/*.py`` and the Cython
    ``*.pyx``, every import statement counted (module level or inside a function): ``from . import
    x``, ``from .x import y``, ``import mappedbus_py.x``, ``from mappedbus_py import x``, and a
    ``.pyx``'s ``cimport`` of another module's ``.pxd``. A name imported from the package itself
    (not a module) is an edge to ``__init__``. ``.py`` files are read with ``ast``, ``.pyx`` files
    (which ``ast`` cannot parse) line by line."""
    modules = {p.stem for p in PACKAGE.glob("*.py")} | {p.stem for p in PACKAGE.glob("*.pyx")}

    def from_import(module, names):
        """``from .module import names`` (``module`` relative to the package, "" for the package)."""
        if module:
            return {module.split(".")[0]}
        return {n if n in modules else "__init__" for n in names}   # from . import a, b

    graph = {}
    for name in modules:
        edges = set()
        path = PACKAGE / f"{name}.py"
        if path.is_file():
            for node in ast.walk(ast.parse(path.read_text(), filename=path.name)):
                names = [a.name for a in node.names] if isinstance(node, (ast.Import, ast.ImportFrom)) else []
                if isinstance(node, ast.ImportFrom):
                    if node.level == 1:
                        edges |= from_import(node.module, names)
                    elif node.level == 0 and (node.module or "").split(".")[0] == PACKAGE.name:
                        edges |= from_import(node.module.partition(".")[2], names)
                elif isinstance(node, ast.Import):
                    for parts in (n.split(".") for n in names):
                        if parts[0] == PACKAGE.name:
                            edges.add(parts[1] if len(parts) > 1 else "__init__")
        else:
            for source, names, plain in _PYX_IMPORT.findall((PACKAGE / f"{name}.pyx").read_text()):
                if plain:
                    edges.add(plain)
                    continue
                names = [n.split()[0] for n in names.strip("()").split(",") if n.strip()]
                module = source[1:] if source.startswith(".") else source.partition(".")[2]
                edges |= from_import(module, names)
        graph[name] = {m for m in edges if m in modules and m != name}
    return graph


def _cycle(graph):
    """A cycle of ``graph`` as a list of modules, or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_import_graph_of_mappedbus_py_has_no_circle():
    graph = _import_graph()
    assert {"cli", "inspect", "inspect_rolling", "rolling", "jvm", "_reader", "_writer"} <= graph.keys()
    assert "inspect" in graph["inspect_rolling"] and "inspect_rolling" in graph["cli"]
    assert {"_mapping", "_writer", "layout"} <= graph["_reader"]   # the .pyx are read too
    cycle = _cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_a_circle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
