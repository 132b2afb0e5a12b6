"""Packaging: the wheel and sdist hold what a user needs (jars, sources, licence), the installed
wheel works in a fresh virtualenv outside the checkout, one version, and the API reference builds."""
import importlib.metadata
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
import zipfile

import pytest

import mappedbus_py
from mappedbus_py.formats.files import remove_bus

ROOT = pathlib.Path(__file__).resolve().parent.parent
JARS = ("mappedbuspy.jar", "mappedbuspy-spark.jar")
# What the wheel carries: the library, the tools the Python side runs, the Spark connector; never the
# samples' or the benchmark drivers' jars.
WHEEL_JARS = JARS + ("mappedbuspy-tools.jar",)
CHECKOUT_ONLY_JARS = ("mappedbuspy-samples.jar", "mappedbuspy-perf.jar")
# Other builds in this tree (developers, parallel sessions) take the same locks.
BUILD_LOCK, JAVA_LOCK = "/tmp/mb-build.lock", "/tmp/mb-java.lock"

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None


def _clean_env(**extra):
    """The environment without anything that points into the checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "MAPPEDBUS_PY_JARS", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(extra)
    return env


def _locked(lock, *cmd):
    return (["flock", lock, *cmd] if shutil.which("flock") else list(cmd))


# --- version and licence (fast) -------------------------------------------------------------

@pytest.mark.skipif(tomllib is None, reason="reads pyproject.toml with tomllib (3.11+)")
def test_version_is_written_only_in_the_package():
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)
    assert "version" not in project["project"], "pyproject.toml repeats the version"
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "mappedbus_py.__version__"}
    # The installed metadata (from the editable install) agrees.
    assert importlib.metadata.version("mappedbus_py") == mappedbus_py.__version__


def test_license_is_the_apache_2_text_and_the_changelog_names_the_version():
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## {mappedbus_py.__version__}" in changelog


# --- jar discovery outside a checkout (fast: a hand-made installed layout) ----------------------

def _fake_install(tmp_path, with_jars):
    """``site/mappedbus_py`` with jvm.py (and ``jars/`` when asked), as pip lays out a wheel."""
    pkg = tmp_path / "site" / "mappedbus_py"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    shutil.copy(ROOT / "mappedbus_py" / "jvm.py", pkg / "jvm.py")
    if with_jars:
        (pkg / "jars").mkdir()
        for name in JARS:
            (pkg / "jars" / name).write_bytes(b"PK\x05\x06" + bytes(18))
    return pkg


def _run_jvm_lookup(tmp_path, code, **env):
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, env=_clean_env(PYTHONPATH=str(tmp_path / "site"), **env))
    return proc


def test_installed_package_finds_its_own_jars_and_no_source_root(tmp_path):
    pkg = _fake_install(tmp_path, with_jars=True)
    code = ("import json; from mappedbus_py import jvm; "
            "print(json.dumps([str(jvm.ROOT), str(jvm.jar_path()), [str(p) for p in jvm.jar_paths()]]))")
    proc = _run_jvm_lookup(tmp_path, code)
    assert proc.returncode == 0, proc.stderr
    root, core, both = json.loads(proc.stdout)
    assert root == "None", "jvm.ROOT resolved outside a checkout"
    assert core == str(pkg / "jars" / "mappedbuspy.jar")
    assert both == [str(pkg / "jars" / name) for name in JARS]


def test_installed_package_without_jars_says_what_to_do(tmp_path):
    _fake_install(tmp_path, with_jars=False)
    proc = _run_jvm_lookup(tmp_path, "from mappedbus_py import jvm; jvm.jar_paths()")
    assert proc.returncode != 0
    assert "JavaNotFoundError" in proc.stderr
    assert "MAPPEDBUS_PY_JARS" in proc.stderr and "not a source tree" in proc.stderr
    assert "interop/build.sh is missing" not in proc.stderr


def test_mappedbus_py_jars_overrides_the_packaged_jars_and_names_a_missing_one(tmp_path):
    _fake_install(tmp_path, with_jars=True)
    other = tmp_path / "other"
    other.mkdir()
    (other / "mappedbuspy.jar").write_bytes(b"")
    code = "from mappedbus_py import jvm; print(jvm.jar_path()); jvm.jar_paths()"
    proc = _run_jvm_lookup(tmp_path, code, MAPPEDBUS_PY_JARS=str(other))
    assert proc.stdout.splitlines()[0] == str(other / "mappedbuspy.jar")
    assert f"MAPPEDBUS_PY_JARS={other} has no mappedbuspy-spark.jar" in proc.stderr


def test_spark_jar_paths_come_from_the_jvm_module():
    from mappedbus_py import jvm, spark
    assert spark.jar_paths(build=False) == [str(p) for p in jvm.jar_paths(build=False)]


# --- the built distributions (slow) -----------------------------------------------------------

@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    """sdist and manylinux wheel from scripts/wheel.sh (the wheel is built from the sdist)."""
    out = tmp_path_factory.mktemp("dist")
    for script in ("interop/build.sh", "interop/build_spark.sh"):
        subprocess.run(_locked(JAVA_LOCK, "bash", str(ROOT / script)), check=True,
                       stdout=subprocess.DEVNULL, env=dict(os.environ, PYTHON=sys.executable))
    proc = subprocess.run(_locked(BUILD_LOCK, "bash", str(ROOT / "scripts" / "wheel.sh"), str(out)),
                          capture_output=True, text=True, env=dict(os.environ, PYTHON=sys.executable))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheels = sorted(out.glob("*.whl"))
    sdists = sorted(out.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(out.iterdir())
    return wheels[0], sdists[0]


def _class_major_versions(jar_bytes):
    """The class-file major versions in a jar (61 is Java 17)."""
    import io
    with zipfile.ZipFile(io.BytesIO(jar_bytes)) as jar:
        return {int.from_bytes(jar.read(n)[6:8], "big") for n in jar.namelist() if n.endswith(".class")}


@pytest.mark.slow
def test_wheel_is_manylinux_with_both_jars_as_java_17_and_no_sources(dists):
    wheel, _ = dists
    assert "manylinux" in wheel.name, wheel.name
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        for jar in WHEEL_JARS:
            assert f"mappedbus_py/jars/{jar}" in names
            assert _class_major_versions(z.read(f"mappedbus_py/jars/{jar}")) == {61}
        for jar in CHECKOUT_ONLY_JARS:
            assert f"mappedbus_py/jars/{jar}" not in names
        # The compression libraries the Java readers read archived segments with (issue 37).
        for lib in ("zstd-jni.jar", "lz4-java.jar", "libzstd-jni.so"):
            assert f"mappedbus_py/jars/{lib}" in names, lib
        stray = [n for n in names if n.endswith((".c", ".pyx", ".pxd", ".h", ".o"))]
        assert not stray, f"sources in the wheel: {stray}"
        assert any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith(".dist-info/LICENSE")
                   for n in names)
        metadata = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert f"\nVersion: {mappedbus_py.__version__}\n" in metadata


@pytest.mark.slow
def test_sdist_holds_what_building_the_wheel_needs(dists):
    _, sdist = dists
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    needed = {"setup.py", "pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "MANIFEST.in",
              "interop/build.sh", "interop/build_spark.sh",
              "build/jvm/mappedbuspy.jar", "build/jvm/mappedbuspy-spark.jar",
              "build/jvm/mappedbuspy-tools.jar", "build/jvm/zstd-jni.jar", "build/jvm/lz4-java.jar",
              "interop/codec-libs.sh",
              "mappedbus_py/_core/_reader.pyx", "mappedbus_py/_core/_reader.pxd", "mappedbus_py/_core/_atomic.h",
              "mappedbus_py/_core/_wake.h", "mappedbus_py/_core/_wakefd.h", "interop/native/wake_jni.c",
              "interop/build_native.sh",
              "interop/src/spark/resources/META-INF/services/"
              "org.apache.spark.sql.sources.DataSourceRegister"}
    assert needed <= names, sorted(needed - names)
    assert any(n.startswith("interop/src/main/java/io/mappedbuspy/") for n in names)
    assert any(n.startswith("interop/src/spark/java/io/mappedbuspy/spark/") for n in names)
    # C from Cython is generated; the wake library's JNI source is written by hand
    assert not [n for n in names if n.endswith((".c", ".so", ".o"))
                and not n.startswith("interop/native/")], "generated files in the sdist"


SCENARIO = textwrap.dedent('''
    """Run by the fresh virtualenv's python, outside the checkout."""
    import json, os, subprocess, sys, time
    import mappedbus_py
    from mappedbus_py import MappedBusReader, MappedBusWriter, PriceUpdate, jvm, spark

    bus, n, fsize = sys.argv[1], 2000, 1 << 20
    report = {"package": mappedbus_py.__file__, "version": mappedbus_py.__version__,
              "jvm_root": str(jvm.ROOT), "jars": [str(p) for p in jvm.jar_paths()]}

    # Two Python processes: this one reads while a child process writes.
    MappedBusWriter(bus, fsize, 12).open().close()
    writer = subprocess.Popen([sys.executable, "-c",
        "import sys; from mappedbus_py import MappedBusWriter, PriceUpdate\\n"
        "with MappedBusWriter(sys.argv[1], int(sys.argv[2]), 12) as w:\\n"
        "    for i in range(int(sys.argv[3])): w.write(PriceUpdate(source=7, price=i, quantity=2 * i))",
        bus, str(fsize), str(n)])
    msg, prices, deadline = PriceUpdate(), [], time.monotonic() + 120
    with MappedBusReader(bus, fsize, 12) as r:
        while len(prices) < n and time.monotonic() < deadline:
            if r.next():
                r.read_message(msg)
                assert msg.source == 7 and msg.quantity == 2 * msg.price
                prices.append(msg.price)
            else:
                time.sleep(0.001)
    report["python_exchange"] = [writer.wait(), prices == list(range(n))]

    # The JVM in this process (JPype) reads what the Python child wrote.
    java = jvm.java_classes()
    reader, jmsg, jprices = java.MappedBusReader(bus, fsize, 12).open(), java.PriceUpdate(), []
    while reader.next():
        reader.readMessage(jmsg)
        jprices.append(int(jmsg.getPrice()))
    reader.close()
    report["jpype_prices"] = jprices == list(range(n))

    # Spark (its own JVM) with the connector jar from the wheel.
    s = spark.session("wheel-check", "local[1]", **{"spark.driver.memory": "512m"})
    s.sparkContext.setLogLevel("ERROR")
    df = s.read.format("mappedbus").option("path", bus).option("layout", "PriceUpdate").load()
    row = df.selectExpr("count(*) AS n", "sum(price) AS total", "min(source) AS source").first()
    report["spark"] = [row["n"], row["total"], row["source"]]
    report["spark_jars"] = s.sparkContext.getConf().get("spark.jars")
    s.stop()

    report["modules"] = sorted({os.path.realpath(m.__file__) for m in list(sys.modules.values())
                                if getattr(m, "__file__", None)})
    print("REPORT " + json.dumps(report))
''')


@pytest.mark.slow
@pytest.mark.java
@pytest.mark.spark
def test_installed_wheel_exchanges_with_python_jpype_and_spark_outside_the_checkout(dists, tmp_path):
    pytest.importorskip("jpype")
    pyspark = pytest.importorskip("pyspark")
    wheel, _ = dists
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    # pip of this interpreter installs into the new venv; pyspark at the version already here comes
    # from pip's cache, so the ~450 MB download happens once per machine.
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q",
                    "--disable-pip-version-check", str(wheel), "numpy", "jpype1",
                    f"pyspark=={pyspark.__version__}"],
                   check=True, cwd=tmp_path, env=_clean_env())
    script = tmp_path / "scenario.py"
    script.write_text(SCENARIO)
    bus = pathlib.Path("/dev/shm" if os.path.isdir("/dev/shm") else tmp_path) / f"mbwheel-{os.getpid()}"
    env = _clean_env(PYSPARK_PYTHON=str(py), PYSPARK_DRIVER_PYTHON=str(py),
                     PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    try:
        proc = subprocess.run([str(py), "-I", str(script), str(bus)], capture_output=True, text=True,
                              cwd=tmp_path, env=env, timeout=600)
    finally:
        remove_bus(bus)         # the bus and every side file (the writers file too)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("REPORT ")), None)
    assert proc.returncode == 0 and line, proc.stdout[-3000:] + proc.stderr[-5000:]
    report = json.loads(line[len("REPORT "):])

    site = venv.resolve()
    assert pathlib.Path(report["package"]).resolve().is_relative_to(site)
    assert report["version"] == mappedbus_py.__version__
    assert report["jvm_root"] == "None"
    assert [pathlib.Path(j).resolve() for j in report["jars"]] == \
        [site / pathlib.Path(report["package"]).resolve().parent.relative_to(site) / "jars" / j
         for j in JARS]
    assert report["python_exchange"] == [0, True]
    assert report["jpype_prices"] is True
    n = 2000
    assert report["spark"] == [n, n * (n - 1) // 2, 7]
    assert all(j in report["spark_jars"] for j in report["jars"])
    from_checkout = [m for m in report["modules"] if pathlib.Path(m).is_relative_to(ROOT)]
    assert not from_checkout, f"imported from the checkout: {from_checkout}"


@pytest.mark.slow
def test_readme_examples_pass_mypy_strict_with_the_installed_wheel_outside_the_checkout(dists, tmp_path):
    """The README's claim, as a user meets it: the wheel installed in a fresh virtualenv, mypy
    run from a directory outside the checkout. (In the checkout's .venv, with the editable
    install, mypy finds the package only from the checkout's root: its import hook is code
    that mypy does not run.)"""
    pytest.importorskip("mypy")
    from test_typing import readme_examples
    wheel, _ = dists
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q",
                    "--disable-pip-version-check", str(wheel), "numpy"],
                   check=True, cwd=tmp_path, env=_clean_env())
    work = tmp_path / "examples"
    work.mkdir()
    files = []
    for i, block in enumerate(readme_examples()):
        f = work / f"readme_example_{i}.py"
        f.write_text(textwrap.dedent(block))
        files.append(str(f))
    assert len(files) >= 6
    # mypy of this environment, told to look for packages where the new venv's python does.
    proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--python-executable", str(py),
                           "--no-incremental", "--cache-dir=/dev/null", "--verbose", *files],
                          cwd=work, capture_output=True, text=True, timeout=600,
                          env=_clean_env(MYPYPATH=""))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    # The package and its stubs came from the installed wheel, nothing from the checkout.
    parsed = re.findall(r"Parsing (\S+) \((mappedbus_py[\w.]*)\)", proc.stderr)
    assert {m for _, m in parsed} >= {"mappedbus_py", "mappedbus_py._core._reader", "mappedbus_py.rolling"}
    site = venv.resolve()
    assert all(pathlib.Path(f).resolve().is_relative_to(site) for f, _ in parsed), parsed
    assert any(f.endswith("_reader.pyi") for f, _ in parsed)


# --- API reference (slow) ----------------------------------------------------------------------

@pytest.mark.slow
def test_api_reference_builds_without_warnings_and_documents_the_cython_classes(tmp_path):
    pytest.importorskip("sphinx", reason="the docs extra (scripts/setup.sh installs it)")
    out = tmp_path / "docs"
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "docs.sh")], capture_output=True, text=True,
                          env=dict(os.environ, PYTHON=sys.executable, DOCS_OUT=str(out)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    api = (out / "api.html").read_text()
    # Extension classes, with the signatures Cython embeds.
    for anchor in ("mappedbus_py.MappedBusReader.read_batch", "mappedbus_py.MappedBusWriter.write",
                   "mappedbus_py.Record", "mappedbus_py.RollingBusReader", "mappedbus_py.BusGapError"):
        assert f'id="{anchor}"' in api, anchor
    assert "record_size" in api
    assert 'id="mappedbus_py.jvm.jar_paths"' in (out / "jvm.html").read_text()
    # Every guide the README links to is built.
    for guide in ("python", "waiting", "rolling", "consumers", "safety", "containers", "jvm", "spark",
                  "cli", "samples", "performance", "file-formats", "development"):
        assert (out / f"{guide}.html").is_file(), guide
        assert f"docs/{guide}.md" in (ROOT / "README.md").read_text()
