"""Every code block of README.md and docs/ (its subfolders too) runs, so an example that drifts
from the API fails the build.

A block's language says how it runs: ``python`` in its own Python process; ``bash`` with
``bash -euo pipefail``, the checkout's ``.venv/bin`` (``mappedbus``, ``python``) first on PATH;
``java`` as the body of a ``main`` method (the project's packages and ``java.util`` imported), by
the JDK's source launcher on the project's jars. The blocks of one document run in document order,
each in its own process (a writer block and the reader block after it share a bus, as two
processes would), in a directory of the test's that stands in for ``/dev/shm``: every
``/dev/shm/NAME`` is replaced by a path in it. Blocks that use Spark or the JVM are marked
``spark``/``java`` and run wherever those run (CI included).

A block that cannot run by nature says so in an HTML comment on the line before it,
``<!-- not-run: why -->``; it is reported as skipped with that reason. Listings are not code and
do not run: blocks of ``text``, ``json``, ``yaml`` or no language (output, file layouts). Any
other language fails ``test_every_block_has_a_known_language``, so no code goes untested by
being spelled differently.
"""
import dataclasses
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap
import uuid

import pytest

from support import leftovers

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("**/*.md"))
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[^`\s]*)[ \t]*$")
NOT_RUN = re.compile(r"^\s*<!--\s*not-run:\s*(?P<why>\S.*?)\s*-->\s*$")
SHM = re.compile(r"/dev/shm/")
RUN = ("python", "bash", "java")
LISTING = ("", "text", "json", "yaml")
# The head of a java block's class, on the file's first line so the block's lines keep their numbers.
JAVA_HEAD = ("import io.mappedbuspy.*; import io.mappedbuspy.messages.*; import java.util.*; "
             "import java.util.concurrent.TimeUnit; public class DocBlock { "
             "public static void main(String[] args) throws Exception {")


@dataclasses.dataclass(frozen=True)
class Block:
    """A fenced block: the line of its opening fence (1-based; its code starts on the next), its
    language, its code dedented, and the reason it does not run (None: it runs)."""
    line: int
    lang: str
    code: str
    not_run: "str | None"

    @property
    def runs(self):
        return self.lang in RUN and self.not_run is None


def all_blocks(path):
    """Every fenced block of a Markdown file but MyST directives (```{toctree}), in order."""
    lines = path.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, indent, lang = i + 1, m.group("indent"), m.group("lang")
        end = next(j for j in range(start, len(lines)) if lines[j].strip() == "```"
                   and lines[j].startswith(indent))
        if not lang.startswith("{"):
            prev = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            why = NOT_RUN.match(prev)
            out.append(Block(start, lang, textwrap.dedent("\n".join(lines[start:end])) + "\n",
                             why.group("why") if why else None))
        i = end + 1
    return out


def blocks(path):
    """The blocks of code (python, bash, java) of a Markdown file, run or marked not-run."""
    return [b for b in all_blocks(path) if b.lang in RUN]


class Document:
    """The blocks of one document and what has run of them: a block runs after every block
    before it (run first if a test was selected alone), in a directory that stands in for
    /dev/shm."""

    def __init__(self, path):
        self.path = path
        self.blocks = blocks(path)
        base = "/dev/shm" if os.path.isdir("/dev/shm") else "/tmp"
        self.shm = pathlib.Path(base) / f"mbdoc-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        leftovers.keep(self.shm)    # every block of the document runs in it; clean() removes it
        self.results = {}          # block index -> None (ran) or the failure text

    def run(self, index):
        for earlier in range(index):
            if earlier not in self.results and self.blocks[earlier].not_run is None:
                self._run(earlier)
            if self.results.get(earlier):
                pytest.fail(f"the block at {self._where(earlier)} failed first; this one needs "
                            f"what it does")
        self._run(index)
        if self.results[index]:
            pytest.fail(self.results[index], pytrace=False)

    def _where(self, index):
        name = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path.name
        return f"{name}:{self.blocks[index].line}"

    def _command(self, block):
        """The file the block becomes, written, and the command that runs it."""
        code = SHM.sub(str(self.shm) + "/", block.code)
        if block.lang == "python":
            # Blank lines keep the tracebacks' line numbers those of the document.
            script = self.shm / f"block_{block.line}.py"
            script.write_text("\n" * block.line + code)
            return [sys.executable, str(script)]
        if block.lang == "bash":
            script = self.shm / f"block_{block.line}.sh"
            script.write_text("set -euo pipefail\n" + "\n" * (block.line - 1) + code)
            return ["bash", str(script)]
        from mappedbus_py import jvm
        source = self.shm / f"block_{block.line}" / "DocBlock.java"
        source.parent.mkdir(exist_ok=True)
        source.write_text(JAVA_HEAD + "\n" * block.line + code + "}}\n")
        return jvm.java_command(str(source))

    def _run(self, index):
        block = self.blocks[index]
        self.shm.mkdir(mode=0o700, exist_ok=True)
        command = self._command(block)
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
                   PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]),
                   PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        proc = subprocess.run(command, cwd=self.shm, env=env, capture_output=True, text=True,
                              timeout=600)
        self.results[index] = None if proc.returncode == 0 else (
            f"the block at {self._where(index)} exited with {proc.returncode}:\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")

    def clean(self):
        shutil.rmtree(self.shm, ignore_errors=True)


def _params():
    out = []
    for path in DOCS:
        for index, block in enumerate(blocks(path)):
            marks = []
            if re.search(r"\bspark\b", block.code):
                marks += [pytest.mark.spark, pytest.mark.java, pytest.mark.slow]
            elif block.lang == "java" or re.search(r"\bjvm\b|jpype|\bjava\b", block.code):
                marks += [pytest.mark.java]
            out.append(pytest.param(path, index, block.not_run, marks=marks,
                                    id=f"{path.relative_to(ROOT)}:{block.line}"))
    return out


@pytest.fixture(scope="module")
def documents():
    docs = {}
    yield lambda path: docs.setdefault(path, Document(path))
    for d in docs.values():
        d.clean()


@pytest.mark.parametrize("path, index, why", _params())
def test_doc_block_runs(documents, path, index, why):
    if why is not None:
        pytest.skip(f"marked not-run: {why}")
    documents(path).run(index)


def test_every_block_has_a_known_language():
    unknown = [f"{p.relative_to(ROOT)}:{b.line} ```{b.lang}" for p in DOCS for b in all_blocks(p)
               if b.lang not in RUN + LISTING]
    assert not unknown, f"blocks neither run nor listings: {unknown}"


def test_the_blocks_are_found(tmp_path):
    readme = blocks(ROOT / "README.md")
    assert len(readme) >= 4
    # The guides under docs/ and its subfolders are searched.
    assert ROOT / "docs" / "design" / "side-files.md" in DOCS
    doc = tmp_path / "x.md"
    doc.write_text("text\n\n<!-- not-run: a fragment -->\n```python\nx(\n```\n\n"
                   "- item\n\n  ```python\n  y = 1\n  ```\n\n```json\n{}\n```\n"
                   "```{toctree}\napi\n```\n```bash\nmappedbus stat x\n```\n")
    assert blocks(doc) == [Block(4, "python", "x(\n", "a fragment"), Block(10, "python", "y = 1\n", None),
                           Block(20, "bash", "mappedbus stat x\n", None)]
    assert [b.lang for b in all_blocks(doc)] == ["python", "python", "json", "bash"]
    # Markers stay few: every one gives a reason, and most blocks of code run.
    marked = [b for p in DOCS for b in blocks(p) if b.not_run is not None]
    assert len(marked) * 3 <= sum(len(blocks(p)) for p in DOCS), marked


def test_a_reader_block_reads_what_the_writer_block_wrote_and_a_drifted_block_fails(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(textwrap.dedent('''
        ```python
        from mappedbus_py import MappedBusWriter
        with MappedBusWriter("/dev/shm/x", 1 << 16, 8) as w:
            w.write(b"hello")
        ```
        ```python
        from mappedbus_py import MappedBusReader
        with MappedBusReader("/dev/shm/x", 1 << 16, 8) as r:
            assert r.read(timeout=0).data == b"hello"
        ```
        ```python
        from mappedbus_py import MappedBusWriter
        MappedBusWriter("/dev/shm/x", 1 << 16, 8).write_fields(1, 2, 3)
        ```
        '''))
    d = Document(doc)
    try:
        d.run(1)
        assert d.results == {0: None, 1: None}
        assert (d.shm / "x").is_file()          # /dev/shm/x stood for the test's directory
        with pytest.raises(pytest.fail.Exception) as e:
            d.run(2)
        assert "doc.md:12 exited with 1" in str(e.value) and "write_fields" in str(e.value)
    finally:
        d.clean()
    assert not d.shm.exists()


def test_a_bash_block_runs_the_cli_and_a_failing_command_fails_it(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(textwrap.dedent('''
        ```python
        from mappedbus_py import MappedBusWriter
        with MappedBusWriter("/dev/shm/x", 1 << 16, 8) as w:
            w.write(b"hello")
        ```
        ```bash
        mappedbus stat /dev/shm/x | grep "committed 1,"
        ```
        ```bash
        mappedbus stat /dev/shm/no-such-bus
        echo never
        ```
        '''))
    d = Document(doc)
    try:
        d.run(1)
        assert d.results == {0: None, 1: None}
        with pytest.raises(pytest.fail.Exception) as e:
            d.run(2)
        assert "doc.md:10 exited with" in str(e.value) and "never" not in str(e.value)
    finally:
        d.clean()


@pytest.mark.java
def test_a_java_block_runs_as_a_main_method_and_its_errors_name_the_document_line(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(textwrap.dedent('''
        ```java
        try (MappedBusWriter w = new MappedBusWriter("/dev/shm/j", 1 << 16, 12).open()) {
            w.write(new PriceUpdate(1, 2, 3));
        }
        ```
        ```java
        MappedBusReader r = new MappedBusReader("/dev/shm/j", 1 << 16, 12).open();
        if (!r.next()) throw new AssertionError("the writer block's record is not there");
        ```
        ```java
        int x = undefinedName;
        ```
        '''))
    d = Document(doc)
    try:
        d.run(1)
        assert d.results == {0: None, 1: None}
        with pytest.raises(pytest.fail.Exception) as e:
            d.run(2)
        assert "doc.md:11 exited with" in str(e.value) and "DocBlock.java:12" in str(e.value)
    finally:
        d.clean()
