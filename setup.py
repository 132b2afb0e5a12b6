"""The extension modules and the jars a wheel carries; everything else is in pyproject.toml.

The wheel holds ``mappedbus_py/jars/mappedbuspy.jar`` (the library), ``mappedbuspy-tools.jar`` (the
command-line tools the Python side runs) and ``mappedbuspy-spark.jar`` (the Spark connector), copied
from ``build/jvm`` of the source tree (or unpacked sdist) at ``build_py`` time; never the samples' or
the benchmark drivers' jars, which ``interop/build.sh`` builds for the checkout:

- the library and tools jars are rebuilt with ``interop/build.sh`` (needs javac) when missing or
  older than their sources;
- the Spark connector compiles against pyspark's jars, which an isolated build environment does
  not have. It is rebuilt with ``interop/build_spark.sh`` only when it is missing or older than its
  sources, and then needs pyspark importable by the building interpreter
  (``pip wheel --no-build-isolation`` in an environment with pyspark) or ``SPARK_JARS`` naming a
  Spark ``jars`` directory. Otherwise the prebuilt jar is used as it is: ``scripts/setup.sh`` and
  ``scripts/wheel.sh`` build it before ``pip wheel``, and the sdist carries it.

Beside them goes ``mappedbus_py/jars/libmappedbuswake.so``, the JNI library through which Java readers
park on a bus's wake file and Java writers wake them (``interop/build_native.sh``, rebuilt by the same
staleness rule). It is machine code for the platform of the wheel, so the sdist carries its source, not
the library: a wheel built from the sdist compiles it with the C compiler the extensions need.

Beside them also go the compression libraries through which Java readers read compressed archived
segments (issue 37), copied from the system's packages by ``interop/codec-libs.sh`` (Debian:
``libzstd-jni-java``, ``liblz4-java``; ``scripts/setup.sh`` installs them): ``zstd-jni.jar``,
``lz4-java.jar`` and ``libzstd-jni.so`` (zstd-jni's JNI library, over ``libzstd.so.1``, which
``auditwheel repair`` puts in the wheel). The sdist carries the two jars as it carries the others;
the library, machine code, is copied from the system when the wheel is built, as the wake library
is compiled then.

``MAPPEDBUS_PY_NO_JARS=1`` builds a wheel without jars (the JVM and Spark helpers then need
``MAPPEDBUS_PY_JARS``).
"""
import os
import shutil
import subprocess
import sys

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
JVM_OUT = os.path.join(HERE, "build", "jvm")
JARS = {  # jar -> (build script, sources it is compiled from)
    "mappedbuspy.jar": ("interop/build.sh", ["interop/build.sh", "interop/src/main"]),
    "mappedbuspy-tools.jar": ("interop/build.sh", ["interop/build.sh", "interop/src/main", "interop/src/tools"]),
    "mappedbuspy-spark.jar": ("interop/build_spark.sh",
                              ["interop/build_spark.sh", "interop/src/main", "interop/src/spark"]),
    # The compression libraries of the archive (copied from the system, never built here).
    "zstd-jni.jar": ("interop/codec-libs.sh", ["interop/codec-libs.sh"]),
    "lz4-java.jar": ("interop/codec-libs.sh", ["interop/codec-libs.sh"]),
}

# The JNI library of the wake file -> (build script, sources): built for the wheel's own platform.
NATIVE = {
    "libmappedbuswake.so": ("interop/build_native.sh",
                            ["interop/build_native.sh", "interop/native", "mappedbus_py/_core/_wake.h",
                             "mappedbus_py/_core/_atomic.h", "mappedbus_py/_core/_liveness.h",
                             "mappedbus_py/groups/_group.h"]),
    # zstd-jni's JNI library, copied from the system (interop/codec-libs.sh): machine code, so the
    # wheel carries it (auditwheel grafts the libzstd it links) and the sdist does not.
    "libzstd-jni.so": ("interop/codec-libs.sh", ["interop/codec-libs.sh"]),
}

DEBUG = os.environ.get("MAPPEDBUS_DEBUG") == "1"   # annotate, linetrace, bounds checks

# Extension module -> its .pyx: the compiled core in mappedbus_py/_core/, the rolling bus's
# per-record base classes beside the rolling package that subclasses them, the work groups'
# claim loop in their subpackage (its own header beside it, the core's from _core).
MODULES = {f"mappedbus_py._core.{name}": f"mappedbus_py/_core/{name}.pyx"
           for name in ["_mapping", "_message", "_record", "_liveness", "_wake", "_wakefd",
                        "_consumers", "_writers", "_topics", "_frames", "_writer", "_slotscan", "_waiter",
                        "_consumerhold", "_reader"]}
MODULES["mappedbus_py.rolling._rolling"] = "mappedbus_py/rolling/_rolling.pyx"
MODULES["mappedbus_py.groups._group"] = "mappedbus_py/groups/_group.pyx"

# Every header and declaration file an extension may include or cimport (a change rebuilds).
CORE = "mappedbus_py/_core"
DEPENDS = [f"{CORE}/{name}" for name in [
    "_atomic.h", "_atomic.pxd", "_guard.h", "_guard.pxd", "_wake.h", "_wakefd.h", "_consumers.h",
    "_consumers_clock.h", "_layout.pxd", "_background.h", "_liveness.h", "_liveness.pxd",
    "_watch.h", "_writers.h", "_writers.pxd", "_reader.pxd"]] + [
    "mappedbus_py/groups/_group.h", "mappedbus_py/groups/_group_frames.h",
    "mappedbus_py/groups/_group.pxd"]

extensions = [
    Extension(
        name,
        [source],
        include_dirs=[CORE] + ([os.path.dirname(source)] if "groups" in name else []),
        depends=DEPENDS,
        extra_compile_args=["-O0", "-g"] if DEBUG else ["-O3"],
        define_macros=[("CYTHON_TRACE_NOGIL", "1")] if DEBUG else [],
    )
    for name, source in MODULES.items()
]


def _newer_source(jar, sources):
    """A source file newer than ``jar`` (the build scripts' own staleness rule), or None."""
    jar_time = os.path.getmtime(jar)
    for source in sources:
        source = os.path.join(HERE, source)
        paths = [source] if os.path.isfile(source) else (
            os.path.join(folder, name) for folder, _, names in os.walk(source) for name in names)
        for path in paths:
            if os.path.getmtime(path) > jar_time:
                return path
    return None


def _spark_jars_dir():
    """pyspark's jars directory for build_spark.sh: ``SPARK_JARS``, or this interpreter's pyspark."""
    if os.environ.get("SPARK_JARS"):
        return os.environ["SPARK_JARS"]
    try:
        import pyspark
    except ImportError:
        return None
    return os.path.join(os.path.dirname(pyspark.__file__), "jars")


def fresh_jars(artifacts=JARS):
    """Paths of the jars (or of ``artifacts``) in ``build/jvm``, rebuilt first where stale (see the
    module docstring)."""
    paths = []
    for name, (script, sources) in artifacts.items():
        jar = os.path.join(JVM_OUT, name)
        stale = None if not os.path.isfile(jar) else _newer_source(jar, sources)
        if not os.path.isfile(jar) or stale:
            why = f"{jar} is missing" if not os.path.isfile(jar) else f"{stale} is newer than {jar}"
            env = dict(os.environ, PYTHON=sys.executable)
            if name == "mappedbuspy-spark.jar":
                spark_jars = _spark_jars_dir()
                if not spark_jars:
                    raise SystemExit(
                        f"error: {why}, and building the Spark connector needs pyspark's jars: "
                        "run `bash interop/build_spark.sh` (or scripts/setup.sh) before building the "
                        "wheel, or build with pyspark importable (pip wheel --no-build-isolation), "
                        "or set SPARK_JARS to a Spark jars directory")
                env["SPARK_JARS"] = spark_jars
            print(f"building {name}: {why}", file=sys.stderr)
            subprocess.run(["bash", os.path.join(HERE, script)], check=True,
                           stdout=subprocess.DEVNULL, env=env)
        paths.append(jar)
    return paths


class BuildPyWithJars(build_py):
    """build_py that also copies the jars and the JNI library into the package (``mappedbus_py/jars/``)."""

    def run(self):
        super().run()
        # An editable install runs from the checkout, which finds build/jvm itself.
        if getattr(self, "editable_mode", False) or os.environ.get("MAPPEDBUS_PY_NO_JARS") == "1":
            return
        target = os.path.join(self.build_lib, "mappedbus_py", "jars")
        os.makedirs(target, exist_ok=True)
        for path in fresh_jars() + fresh_jars(NATIVE):
            shutil.copyfile(path, os.path.join(target, os.path.basename(path)))


class SdistWithJars(sdist):
    """sdist that carries the jars in ``build/jvm`` (which setuptools prunes from the file list),
    with their times kept, so a wheel built from it needs neither javac nor pyspark."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        if os.environ.get("MAPPEDBUS_PY_NO_JARS") == "1":
            return
        target = os.path.join(base_dir, "build", "jvm")
        os.makedirs(target, exist_ok=True)
        for jar in fresh_jars():
            shutil.copy2(jar, os.path.join(target, os.path.basename(jar)))


setup(
    cmdclass={"build_py": BuildPyWithJars, "sdist": SdistWithJars},
    ext_modules=cythonize(
        extensions,
        annotate=DEBUG,
        compiler_directives={
            "language_level": 3,
            "embedsignature": True,
            "boundscheck": DEBUG,
            "wraparound": DEBUG,
            "linetrace": DEBUG,
        },
    ),
)
