"""Every ```python block of README.md and docs/*.md runs, so an example that drifts from the API
fails the build.

The blocks of one document run in document order, each in its own Python process (a writer
block and the reader block after it share a bus, as two processes would), with every
``/dev/shm/NAME`` replaced by a fresh directory of the test's. Blocks that use the JVM or Spark
are marked ``java``/``spark`` and run wherever those run (CI included). A block that cannot run
by nature says so in an HTML comment on the line before it, ``<!-- not-run: why -->``; it is
reported as skipped with that reason.
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap
import uuid

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
FENCE = re.compile(r"^(?P<indent> *)```python[ \t]*$")
NOT_RUN = re.compile(r"^\s*<!--\s*not-run:\s*(?P<why>\S.*?)\s*-->\s*$")
SHM = re.compile(r"/dev/shm/")


def blocks(path):
    """(line number of the fence, code dedented, not-run reason or None) for each block."""
    lines = path.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, indent = i + 1, m.group("indent")
        end = next(j for j in range(start, len(lines)) if lines[j].strip() == "```"
                   and lines[j].startswith(indent))
        prev = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        why = NOT_RUN.match(prev)
        out.append((start, textwrap.dedent("\n".join(lines[start:end])) + "\n",
                    why.group("why") if why else None))
        i = end + 1
    return out


class Document:
    """The blocks of one document and what has run of them: a block runs after every block
    before it (run first if a test was selected alone), in a directory that stands in for
    /dev/shm."""

    def __init__(self, path):
        self.path = path
        self.blocks = blocks(path)
        base = "/dev/shm" if os.path.isdir("/dev/shm") else "/tmp"
        self.shm = pathlib.Path(base) / f"mbdoc-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.results = {}          # block index -> None (ran) or the failure text

    def run(self, index):
        for earlier in range(index):
            if earlier not in self.results and self.blocks[earlier][2] is None:
                self._run(earlier)
            if self.results.get(earlier):
                pytest.fail(f"the block at {self._where(earlier)} failed first; this one needs "
                            f"what it does")
        self._run(index)
        if self.results[index]:
            pytest.fail(self.results[index], pytrace=False)

    def _where(self, index):
        name = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path.name
        return f"{name}:{self.blocks[index][0]}"

    def _run(self, index):
        line, code, _ = self.blocks[index]
        self.shm.mkdir(mode=0o700, exist_ok=True)
        script = self.shm / f"block_{line}.py"
        # Blank lines keep the tracebacks' line numbers those of the document.
        script.write_text("\n" * line + SHM.sub(str(self.shm) + "/", code))
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
        proc = subprocess.run([sys.executable, str(script)], cwd=self.shm, env=env,
                              capture_output=True, text=True, timeout=600)
        self.results[index] = None if proc.returncode == 0 else (
            f"the block at {self._where(index)} exited with {proc.returncode}:\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")

    def clean(self):
        shutil.rmtree(self.shm, ignore_errors=True)


def _params():
    out = []
    for path in DOCS:
        for index, (line, code, why) in enumerate(blocks(path)):
            marks = []
            if re.search(r"\bspark\b", code):
                marks += [pytest.mark.spark, pytest.mark.java, pytest.mark.slow]
            elif re.search(r"\bjvm\b|jpype", code):
                marks += [pytest.mark.java]
            out.append(pytest.param(path, index, why, marks=marks,
                                    id=f"{path.relative_to(ROOT)}:{line}"))
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


def test_the_blocks_are_found(tmp_path):
    readme = blocks(ROOT / "README.md")
    assert len(readme) >= 6
    # An indented block (inside a list item) is found and dedented.
    assert any(code.startswith("from mappedbus_py import Message") for _, code, _ in readme)
    doc = tmp_path / "x.md"
    doc.write_text("text\n\n<!-- not-run: a fragment -->\n```python\nx(\n```\n\n"
                   "- item\n\n  ```python\n  y = 1\n  ```\n")
    assert blocks(doc) == [(4, "x(\n", "a fragment"), (10, "y = 1\n", None)]
    # Markers stay few: every one gives a reason, and there are fewer of them than runnable blocks.
    marked = [b for p in DOCS for b in blocks(p) if b[2] is not None]
    assert len(marked) * 4 <= sum(len(blocks(p)) for p in DOCS), marked


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
