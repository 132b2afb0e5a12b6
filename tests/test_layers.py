"""The house by layer: what ships is the library, and what may import what.

Java:

- the library jar holds ``io.mappedbuspy`` and its messages, never the samples, the benchmark
  drivers or the tools (their own jars, see interop/build.sh);
- ``io.mappedbuspy`` is the supported API, ``io.mappedbuspy.internal`` the rest (Chronicle's
  convention): no public or protected signature of the API names an internal type, and the samples
  (Python and Java) use the API alone;
- no two public Java classes share a simple name, across every source root.

Python (``mappedbus_py``), by layer, lowest first (``LAYERS``); a module imports modules of its
own layer or of a lower one, never of a higher one, and no two modules import each other in a
circle:

- ``errors``: the exceptions;
- ``formats/``: the files of a bus and their arithmetic, in pure Python (the Java side mirrors
  them);
- ``_core/``: the compiled core over its C headers, and ``aio``, the asyncio form of the core
  readers' waits (``MappedBusReader.read_async`` hands over to it);
- ``messages``: the message types over the core's ``_message``;
- ``rolling/``: the rolling bus: its parts (directory protocol, retention and consumer holds,
  options, the roller, the per-record Cython bases), then the writer and the reader over them;
- ``consumers``: the named consumers of a bus, single-file or rolling;
- ``groups/``: the work groups (each record to one member, acked), over the core's reader and
  the rolling bus (``RollingBusReader(group=...)`` reaches it through the hook it sets);
- ``tools/``: the ``mappedbus`` command and what it shows, which nothing of the library imports;
- ``jvm``, ``spark``: the integrations; then the package's face, ``__init__`` and ``__main__``.

Within the core, the reader's concerns (``_slotscan``, ``_waiter``, ``_consumerhold``, composed
by ``_reader``) each import only what their job needs (``READER_CONCERNS``).

The top level holds only the modules users import by name; an optional dependency is imported
by the one module that needs it; no module is named like a module of the standard library.
"""
import ast
import os
import pathlib
import re
import shutil
import subprocess
import sys
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
    assert packages == {"io/mappedbuspy", "io/mappedbuspy/internal", "io/mappedbuspy/messages"}, sorted(packages)
    for other in ("samples", "perf", "tools"):
        assert not [n for n in classes if f"/{other}/" in n], f"{other} classes in the library jar"
    # ... and each of those is in its own jar.
    for other, example in (("tools", "BusTool"), ("samples", "TokenRing"), ("perf", "Py4jSink")):
        with zipfile.ZipFile(jvm_dir / f"mappedbuspy-{other}.jar") as jar:
            assert f"io/mappedbuspy/{other}/{example}.class" in jar.namelist()


def test_no_library_source_includes_samples_perf_or_tools():
    packages = {p.parent.relative_to(LIBRARY_SOURCES).as_posix()
                for p in LIBRARY_SOURCES.rglob("*.java")}
    assert packages == {"io/mappedbuspy", "io/mappedbuspy/internal", "io/mappedbuspy/messages"}, sorted(packages)


API_SOURCES = LIBRARY_SOURCES / "io" / "mappedbuspy"
INTERNAL_SOURCES = API_SOURCES / "internal"
_JAVA_NOISE = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)
_TYPE_HEADER = re.compile(r"\b(?:class|interface|enum|record)\b")
_ANNOTATION = re.compile(r"^(?:@[\w.]+(?:\([^()]*\))?\s*)*")


def _exposed_headers(text):
    """The public or protected declarations of a Java source that its users see: the headers (up to
    the ``{`` or ``;``) of its public top-level type, of that type's public or protected members
    (public or not: a package-private base's public methods are its public subclasses'), and of the
    members of its public or protected nested types; comments and literals removed."""
    text = _JAVA_NOISE.sub(" ", text)
    headers = []
    exposed = [True]         # per open brace: whether declarations directly inside it are seen
    start = 0
    for i, c in enumerate(text):
        if c not in "{};":
            continue
        header = _ANNOTATION.sub("", " ".join(text[start:i].split()))
        seen = exposed[-1] and re.match(r"(?:public|protected)\b", header) is not None
        if seen:
            headers.append(header)
        if c == "{":
            # Only a type's body shows its members (not a method's body, an anonymous class or an
            # initializer): a seen nested type's, and the top-level type's even when package-private
            # (a reader's package-private base: its public methods are the reader's).
            is_type = _TYPE_HEADER.search(header.split("(")[0]) is not None
            exposed.append(is_type and (seen or len(exposed) == 1))
        elif c == "}" and len(exposed) > 1:
            exposed.pop()
        start = i + 1
    return headers


def internal_types_in_api(api_sources, internal_names):
    """``["File.java: header", ...]``: the API's exposed declarations that name an internal type."""
    found = []
    for path in api_sources:
        for header in _exposed_headers(path.read_text()):
            named = set(re.findall(r"\b[A-Z]\w*", header)) & internal_names
            if named:
                found.append(f"{path.name}: {header} (names {', '.join(sorted(named))})")
    return found


def test_the_api_never_names_an_internal_type():
    """A type in a public or protected signature of ``io.mappedbuspy`` (a parameter, a result, a
    thrown exception, a field, a supertype) is API itself: what users must name is supported."""
    internal = {p.stem for p in INTERNAL_SOURCES.glob("*.java")} - {"package-info"}
    # The machinery of frames, topics, the journal and work groups is internal too; what users call or
    # get back (options, results) is API.
    assert {"MemoryMappedFile", "WakeFile", "RollingDir", "BusMeta", "Liveness", "Frames", "TopicsFile",
            "TopicNames", "TimeIndex", "WriterSync", "GroupHold", "Archiver"} <= internal
    api = sorted(API_SOURCES.glob("*.java"))
    assert {"MappedBusWriter.java", "RollingBusReader.java", "GroupReader.java", "GroupBatch.java",
            "FrameMessage.java", "SyncPolicy.java", "ArchiveCompression.java", "SlotHolders.java"} \
        <= {p.name for p in api}
    # Package-private bases count too: their public methods are the readers'.
    found = internal_types_in_api(api, internal)
    assert not found, "the API names internal types (make the type API or keep it out of the signature):\n" \
        + "\n".join(found)


def test_the_api_check_finds_an_internal_type(tmp_path):
    src = tmp_path / "Api.java"
    src.write_text("package io.mappedbuspy;\n/** A {@link Hidden}. */\npublic final class Api {\n"
                   "    private Hidden ok;\n    void fine(Hidden h) { Runnable r = new Runnable() {\n"
                   "        public void run() { Hidden x = null; } }; }\n"
                   "    public static final class Nested {\n        public Hidden leak() { return null; }\n    }\n"
                   "    public long size(String s) throws java.io.IOException { return 0; }\n"
                   "    public Api(Hidden h) { }\n}\n")
    found = internal_types_in_api([src], {"Hidden"})
    assert [f.split(": ", 1)[1] for f in found] == ["public Hidden leak() (names Hidden)",
                                                  "public Api(Hidden h) (names Hidden)"], found


def test_the_samples_use_the_api_only():
    """The samples show how to use the bus: through ``io.mappedbuspy`` (Java) and ``mappedbus_py``'s
    public names (Python), never ``io.mappedbuspy.internal``."""
    sources = [*sorted((ROOT / "samples").rglob("*.py")), *sorted((JAVA_ROOTS / "samples").rglob("*.java"))]
    assert len(sources) > 8, "found too few samples"
    using = [str(p.relative_to(ROOT)) for p in sources if "io.mappedbuspy.internal" in p.read_text()]
    assert not using, f"samples using io.mappedbuspy.internal: {using}"


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

# Lowest first. A module's layer is the first whose pattern names it ("pkg.*": every module of
# that subpackage, the package itself included).
LAYERS = [
    ("errors", ["errors"]),
    ("formats", ["formats.*"]),
    ("core", ["_core.*", "aio"]),
    ("messages", ["messages"]),
    ("rolling parts", ["rolling.directory", "rolling.retention", "rolling.options",
                       "rolling.roller", "rolling._rolling"]),
    ("rolling bus", ["rolling.*"]),                 # its writer and reader, the package
    ("consumers", ["consumers"]),
    ("groups", ["groups.*"]),
    ("tools", ["tools.*"]),
    ("integrations", ["jvm", "spark"]),
    ("face", ["__init__", "__main__"]),
]
# What users import by name: nothing else lives at the top of the package.
TOP_LEVEL = {"__init__", "__main__", "errors", "messages", "consumers", "aio", "jvm", "spark"}
# An optional dependency -> the one module that imports it (its extra names it).
OPTIONAL = {"prometheus_client": "tools.exporter", "jpype": "jvm", "pyspark": "spark"}

_PYX_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+c?import[ \t]+"
                         r"(\([^)]*\)|[\w \t,]+)|c?import[ \t]+([\w.]+))", re.M)


def _modules():
    """``{name: [source files]}`` of ``mappedbus_py``: a module's name is its dotted path in the
    package (``_core._reader``, ``rolling`` for ``rolling/__init__.py``, ``__init__`` for the
    package's own); a Cython module's sources are its ``.pyx`` and ``.pxd``."""
    found = {}
    for path in sorted(PACKAGE.rglob("*")):
        if path.suffix not in (".py", ".pyx", ".pxd") or "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts.pop()
        found.setdefault(".".join(parts), []).append(path)
    return found


def _is_package(name, modules):
    return name == "__init__" or any(p.name == "__init__.py" for p in modules[name])


def _resolve(name, modules, level, module, names):
    """The modules a ``from <level dots><module> import names`` in module ``name`` means
    (``level`` 0: an absolute ``mappedbus_py...``), or ``import mappedbus_py.x`` (names empty)."""
    if level:
        base = [] if name == "__init__" else name.split(".")
        if not _is_package(name, modules):
            base = base[:-1]
        base = base[:len(base) - (level - 1)] if level > 1 else base
    else:
        parts = module.split(".")
        if parts[0] != PACKAGE.name:
            return set()
        base, module = [], ".".join(parts[1:])
    target = ".".join(base + ([module] if module else []))
    target = target or "__init__"
    edges = set()
    for n in names or [None]:
        sub = f"{target}.{n}" if n and target != "__init__" else n
        if n and sub in modules:
            edges.add(sub)             # from package import module
        elif target in modules:
            edges.add(target)
    return edges


def _imports(name, modules):
    """``(modules of mappedbus_py, top-level names of other packages)`` that module ``name``
    imports, every statement counted (module level or in a function, import or cimport)."""
    edges, others = set(), set()
    for path in modules[name]:
        if path.suffix == ".py":
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.ImportFrom):
                    names = [a.name for a in node.names]
                    if node.level or (node.module or "").split(".")[0] == PACKAGE.name:
                        edges |= _resolve(name, modules, node.level, node.module or "", names)
                    else:
                        others.add(node.module.split(".")[0])
                elif isinstance(node, ast.Import):
                    for a in node.names:
                        if a.name.split(".")[0] == PACKAGE.name:
                            edges |= _resolve(name, modules, 0, a.name, [])
                        else:
                            others.add(a.name.split(".")[0])
            continue
        for source, names, plain in _PYX_IMPORT.findall(path.read_text()):
            if plain:
                if plain.split(".")[0] == PACKAGE.name:
                    edges |= _resolve(name, modules, 0, plain, [])
                else:
                    others.add(plain.split(".")[0])
                continue
            names = [n.split()[0] for n in names.strip("()").split(",") if n.strip()]
            level = len(source) - len(source.lstrip("."))
            if level or source.split(".")[0] == PACKAGE.name:
                edges |= _resolve(name, modules, level, source.lstrip("."), names)
            else:
                others.add(source.split(".")[0])
    return edges - {name}, others


def _import_graph():
    """``{module: {modules of mappedbus_py it imports}}`` over every ``.py``, ``.pyx`` and
    ``.pxd`` of the package (``.py`` read with ``ast``; Cython, which ``ast`` cannot parse,
    line by line)."""
    modules = _modules()
    return {name: _imports(name, modules)[0] for name in modules}


def _layer(module):
    """The index in LAYERS of ``module``'s layer, or None."""
    for i, (_, patterns) in enumerate(LAYERS):
        for pattern in patterns:
            if pattern.endswith(".*"):
                package = pattern[:-2]
                if module == package or module.startswith(package + "."):
                    return i
            elif module == pattern:
                return i
    return None


def _upward_imports(graph):
    """Every import of a module by a module of a lower layer: ``[(importer, imported)]``."""
    return sorted((a, b) for a, edges in graph.items() for b in edges if _layer(b) > _layer(a))


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


def test_the_import_graph_is_read_from_every_kind_of_source():
    graph = _import_graph()
    assert {"tools.cli", "tools.views", "rolling", "jvm", "_core._reader", "_core._writer",
            "formats.layout", "rolling._rolling"} <= graph.keys()
    assert {"_core._mapping", "_core._writer", "formats.layout", "errors"} <= graph["_core._reader"]
    assert {"_core._atomic", "_core._guard"} <= graph["_core._reader"]   # a .pyx's cimports
    assert {"_core._reader", "_core._consumerhold"} <= graph["rolling._rolling"]   # .pxd
    assert {"tools.views", "formats.layout", "messages"} <= graph["tools.cli"]
    assert "_core._reader" in graph["__init__"] and "tools.cli" in graph["__main__"]


def test_every_module_has_a_layer():
    assert not [m for m in _import_graph() if _layer(m) is None]


def test_no_module_imports_a_higher_layer():
    upward = _upward_imports(_import_graph())
    assert not upward, "imports of a higher layer: " + ", ".join(
        f"{a} ({LAYERS[_layer(a)][0]}) -> {b} ({LAYERS[_layer(b)][0]})" for a, b in upward)


def test_the_import_graph_of_mappedbus_py_has_no_circle():
    cycle = _cycle(_import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_the_checks_find_a_circle_and_an_upward_import():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
    graph = {"formats.layout": {"errors"}, "errors": set(), "_core._reader": {"formats.layout"},
             "formats.files": {"rolling.reader"}, "rolling.reader": set()}
    assert _upward_imports(graph) == [("formats.files", "rolling.reader")]


def test_the_top_level_holds_only_what_users_import():
    top = {m for m in _modules() if "." not in m} - {"_core", "formats", "rolling", "groups",
                                                             "tools"}
    assert top == TOP_LEVEL


def test_an_optional_dependency_is_imported_by_its_one_module():
    modules = _modules()
    users = {}
    for name in modules:
        for other in _imports(name, modules)[1] & OPTIONAL.keys():
            users.setdefault(other, set()).add(name)
    assert users == {dep: {module} for dep, module in OPTIONAL.items()}


def test_no_module_is_named_like_a_standard_library_module():
    names = {m.rpartition(".")[2] for m in _modules()} - {"__init__", "__main__"}
    assert not names & set(sys.stdlib_module_names), names & set(sys.stdlib_module_names)


_FROM_IMPORT = re.compile(r"^[ \t]*from[ \t]+(\.+[\w.]*|mappedbus_py[\w.]*)[ \t]+c?import[ \t]+"
                          r"(\([^)]*\)|[^\n]+)", re.M)


def _private_imports(text):
    """The names with one leading underscore a source imports from a module of the package."""
    found = []
    for _, names in _FROM_IMPORT.findall(text):
        for entry in names.strip("()").replace("\n", " ").split(","):
            name = entry.split("#")[0].split()
            if name and name[0].startswith("_") and not name[0].startswith("__"):
                found.append(name[0])
    return found


def test_no_module_imports_another_modules_private_names():
    # A helper one module needs from another has a public name in a home of its own
    # (``_core/_checks.py``, ``rolling/directory.py``, ...); a module private to the package
    # (``_core._reader``) is fine, a private name inside one is not.
    assert _private_imports("from ._writer import _reopen, check_sizes\n"
                            "from .._core._checks import (as_size as _as_size,\n"
                            "    _check_limit)\n") == ["_reopen", "_check_limit"]
    found = {str(p.relative_to(PACKAGE)): names for p in sorted(PACKAGE.rglob("*"))
             if p.suffix in (".py", ".pyx", ".pxd") and (names := _private_imports(p.read_text()))}
    assert not found, found


# The reader's concerns, one module each as the Java reader's (SlotScan, Waiter, ConsumerHold),
# and the modules each may import: what its job needs and nothing of another's. The reader
# composes them: it never asks the writers file (_writers), reads a clock (_clock) or parks.
_CORE = {"_core._atomic", "_core._layout", "_core._guard", "_core._checks", "errors"}
READER_CONCERNS = {
    # the walk over the slots: statuses, the limit, stalls, the writers file, rollback
    "_core._slotscan": _CORE | {"_core._clock", "_core._mapping", "_core._writers",
                                "_core._frames"},     # the steps over frames, the topic filter
    # spin, park and wake, the event loops' descriptor; it polls through the scan
    "_core._waiter": _CORE | {"_core._clock", "_core._slotscan", "_core._wake", "_core._wakefd",
                              "formats.layout"},
    # a consumer name held in the registry, its commits
    "_core._consumerhold": _CORE | {"_core._consumers", "formats.layout"},
    # the composition: the mapping, the position, the read methods
    "_core._reader": _CORE | {"_core._mapping", "_core._message", "_core._record",
                              "_core._slotscan", "_core._waiter", "_core._consumerhold",
                              "_core._consumers", "_core._wake", "_core._wakefd", "_core._writer",
                              "formats.layout", "aio",
                              "_core._frames", "formats.objects"},   # framed buses' reads
}


def _mixed_jobs(graph, concerns):
    """``{module: modules it imports beyond its concern's}`` for the modules of ``concerns``."""
    return {m: sorted(graph[m] - allowed) for m, allowed in concerns.items()
            if graph[m] - allowed}


def test_each_reader_concern_imports_only_what_its_job_needs():
    graph = _import_graph()
    assert READER_CONCERNS.keys() <= graph.keys()
    found = _mixed_jobs(graph, READER_CONCERNS)
    assert not found, f"reader modules doing another concern's job: {found}"


def test_the_concern_check_finds_a_module_doing_another_job():
    graph = {"_core._reader": {"_core._slotscan", "_core._writers"}, "_core._waiter": {"_core._wake"}}
    concerns = {"_core._reader": {"_core._slotscan"}, "_core._waiter": {"_core._wake"}}
    assert _mixed_jobs(graph, concerns) == {"_core._reader": ["_core._writers"]}


def test_the_tests_mirror_the_layout():
    # Test modules sit in the folder of what they test; their helpers in tests/support.
    folders = {p.parent.relative_to(ROOT / "tests").as_posix()
               for p in (ROOT / "tests").rglob("test_*.py")}
    assert folders == {".", "core", "formats", "rolling", "consumers", "groups", "tools", "jvm",
                       "spark", "reliability"}, folders
    assert not list((ROOT / "tests" / "support").glob("test_*.py"))
