"""State is named in the Java library and the Spark connector (issue 34).

Options, policies and results cross methods as records, enums and sealed types, never as a ``long[]``
whose slots mean different things, an ``Object[]`` cast back element by element, or a
``Map<String, Long>`` keyed by field names. This test reads the sources under ``interop/src`` (but
the tests') and fails on any method, constructor or field whose type is one of those,
unless ALLOWED names it with the reason it is a homogeneous array (indices, addresses, raw values
compared one for one), not a bundle of named values.
"""
import pathlib
import re
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[2]
# What ships or runs beside the library: the library, the connector, the tools, the samples, the perf drivers
# (the tests' own sources are not checked).
SOURCES = [ROOT / "interop" / "src" / name / "java" for name in ("main", "spark", "tools", "samples", "perf")]

# The types that carry unnamed state: an array of longs or objects, a map from names to longs.
# (``long[].class``, a class literal, is not a type of a value.)
BANNED = re.compile(r"\b(?:long|Object)\s*\[\s*\](?!\s*\.\s*class)|\bMap\s*<\s*String\s*,\s*Long\s*>")

# (file name, member) -> why its array is not a bundle of named values.
ALLOWED = {
    ("RollingDir.java", "segments"): "the indices of the segments present, ascending: one kind of value",
    ("RollingDir.java", "readableSegments"): "the indices of the segments in either tier, ascending",
    ("TimeIndex.java", "times"): "a time index's entry times, ascending (binary-searched): one kind of value",
    ("TimeIndex.java", "positions"): "a time index's entry positions, in the order of its times",
    ("TimeIndex.java", "suffixMin"): "the smallest position from each entry on: one kind of value",
    ("TimeIndex.java", "TimeIndex"): "the constructor taking the times and positions above",
    ("RollingLayout.java", "retentionPlan"): "segment indices in, the indices to remove out (the shared "
                                             "vectors' form): one kind of value",
    ("BusSource.java", "segments"): "the indices of a rolling bus's segments, ascending",
    ("MappedWindows.java", "addresses"): "the raw addresses of the mapped windows, one per window",
    ("WakeFile.java", "nativeConstants"): "the layout constants the C library reports, compared one for one",
    ("WakeFile.java", "expectedConstants"): "the layout constants Layout.java holds, compared one for one",
    ("WakeLibrary.java", "nativeConstants"): "the layout constants the C library reports, compared one for one",
    ("WakeLibrary.java", "expectedConstants"): "the layout constants Layout.java holds, compared one for one",
    ("GroupProtocol.java", "nativeConstants"): "the _group.h constants the C library reports, compared one for one",
    ("GroupProtocol.java", "expectedConstants"): "the group constants Layout.java holds, compared one for one",
    ("Archiver.java", "runOnce"): "the indices of the segments moved, ascending: one kind of value",
    ("Archiver.java", "candidates"): "the indices of the segments due to move, oldest first",
    ("Archiver.java", "due"): "the indices of the segments due to move, oldest first",
    ("Archiver.java", "HotView"): "a listing's segment indices, ascending, beside its named fields",
    ("Archiver.java", "hotSegments"): "the indices of the hot segments, ascending",
    ("Archiver.java", "moveSegments"): "the indices of the segments to move together",
    ("Archiver.java", "completeMoves"): "the indices of the segments whose move it completed",
    ("Archiver.java", "applyArchiveRetention"): "the indices of the archived segments removed",
    ("ArchiveListing.java", "current"): "the indices of the segments the archiver moved since: one kind of value",
    ("ArchiveListing.java", "removed"): "the indices of the archived segments the retention removed",
    ("GroupHold.java", "IV"): "BLAKE2b's initial hash words (RFC 7693): one kind of value",
    ("GroupHold.java", "g"): "BLAKE2b's working vector, 16 words the mixing function indexes (RFC 7693)",
}

_KEYWORDS = {"if", "for", "while", "switch", "catch", "synchronized", "return", "new", "else", "try", "throw",
             "case", "do", "assert"}
_MODIFIERS = r"(?:(?:public|protected|private|static|final|abstract|synchronized|native|default|volatile|" \
             r"transient)\s+)"
# A method or constructor: modifiers, optional type parameters, a return type (absent for a constructor),
# its name and its parameters, then a body, a throws clause or a semicolon.
_METHOD = re.compile(_MODIFIERS + r"*(?:<[^>{};]*>\s+)?(?P<ret>[\w.$<>\[\], ?]+?\s+)?(?P<name>\w+)\s*"
                     r"\((?P<params>[^(){};]*)\)\s*(?:throws\s+[\w.,\s]+)?[{;]")
# A field: a modifier (a local variable has none), or none at a top-level class's member indentation (four
# spaces, where no statement is), then a type, a name, and = or ;.
_FIELD = re.compile(r"^(?:[ \t]*" + _MODIFIERS + r"+|    (?=\w))(?P<type>[\w.$<>\[\], ?]+?)\s+(?P<name>\w+)\s*[=;]",
                    re.M)
# A record's components.
_RECORD = re.compile(r"\brecord\s+(?P<name>\w+)\s*(?:<[^>]*>)?\s*\((?P<params>[^)]*)\)")


def _strip(text):
    """The source without comments, string or character literals (their contents could look like code)."""
    out = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            out.append(" ")
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def unnamed_state(text):
    """[(member, the declaration)] of every method, constructor, field or record component typed with BANNED."""
    code = _strip(text)
    found = []
    for m in _METHOD.finditer(code):
        if m.group("name") in _KEYWORDS or (m.group("ret") or "").strip() in _KEYWORDS:
            continue
        if BANNED.search(m.group("ret") or "") or BANNED.search(m.group("params")):
            found.append((m.group("name"), " ".join(m.group(0).split())))
    for m in _FIELD.finditer(code):
        if BANNED.search(m.group("type")):
            found.append((m.group("name"), " ".join(m.group(0).split())))
    for m in _RECORD.finditer(code):
        if BANNED.search(m.group("params")):
            found.append((m.group("name"), " ".join(m.group(0).split())))
    return found


def test_the_scanner_finds_unnamed_state():
    """The check can fail: each shape this issue removed is found, and named state is not."""
    bad = """
    public final class X {
        private final long[] retention = new long[3];
        private Object[] consumerPolicy;
        public long[] reserve(long n) throws IOException {
            return new long[] {1, n};
        }
        static RollingDir forWriter(String dir, long[] retention, Object[] policy,
                                    boolean allowForeign) throws IOException { return null; }
        private final Map<String, Long> ints;
        record Pair(long[] both) { }
    }
    final class Z {
        long[] addresses;
    }
    """
    names = {name for name, _ in unnamed_state(textwrap.dedent(bad))}
    assert names == {"retention", "consumerPolicy", "reserve", "forWriter", "ints", "Pair", "addresses"}, names
    good = """
    public final class Y {
        // long[] in a comment, "Object[] in a string"
        private Retention retention = Retention.NONE;
        public Reservation reserve(long n) throws IOException {
            long[] local = new long[2];
            if (local.length > 0) { return new Reservation(local[0], n); }
            return null;
        }
        record Pair(long first, long second) { }
    }
    """
    assert unnamed_state(textwrap.dedent(good)) == []


def test_no_unnamed_state_in_library_or_connector():
    files = [p for root in SOURCES for p in sorted(root.rglob("*.java"))]
    assert files, f"no Java sources under {SOURCES}"
    found = []
    used = set()
    for p in files:
        for name, decl in unnamed_state(p.read_text()):
            if (p.name, name) in ALLOWED:
                used.add((p.name, name))
            else:
                found.append(f"{p.relative_to(ROOT)}: {decl}")
    assert not found, ("options, policies and results as long[]/Object[]/Map<String, Long> (name them: a "
                       "record, an enum or a sealed type):\n" + "\n".join(found))
    stale = set(ALLOWED) - used
    assert not stale, f"ALLOWED names members that no longer exist or are typed otherwise: {sorted(stale)}"


def test_slots_are_allocated_by_the_core_writer_only():
    """One fetch-and-add of the limit, in MappedBusWriter: the rolling writer's and the Spark commit log's
    reservations go through MappedBusWriter.reserve instead of repeating it (issue 34)."""
    allocate = re.compile(r"getAndAddLong\s*\(\s*(?:Layout\.)?LIMIT_OFFSET")
    # The library and the connector (BusTool's "allocate" takes a slot by hand on purpose: a hung writer).
    where = sorted(str(p.relative_to(ROOT)) for root in SOURCES[:2] for p in root.rglob("*.java")
                   if allocate.search(_strip(p.read_text())))
    assert where == ["interop/src/main/java/io/mappedbuspy/MappedBusWriter.java"], where
    writer = _strip((SOURCES[0] / "io" / "mappedbuspy" / "MappedBusWriter.java").read_text())
    assert re.search(r"public\s+Reservation\s+reserve\s*\(\s*long\s+n\s*\)", writer)
