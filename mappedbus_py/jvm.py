"""The JVM side from Python: the project's jar, ``java`` command lines for its classes, and
an in-process JVM through JPype.

    from mappedbus_py import jvm
    subprocess.run(jvm.java_command("io.mappedbuspy.tools.BusTool", "layout"))

    java = jvm.java_classes()                  # starts the JVM in this process (once)
    with java.MappedBusReader(path, file_size, 12).open() as r:
        ...

The jar is ``build/jvm/mappedbuspy.jar`` of the source tree (built by ``interop/build.sh``
when missing), or the one in ``$MAPPEDBUS_PY_JARS`` when that names a directory. The JVM is
``$JAVA_HOME/bin/java`` when set, else ``java`` on ``PATH``.
"""
import os
import pathlib
import shutil
import subprocess
import types

__all__ = ("JavaNotFoundError", "jar_path", "build_jars", "java_executable", "java_command",
           "start_jvm", "java_classes")

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "jvm"
JAR_NAME = "mappedbuspy.jar"

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


def build_jars():
    """Run ``interop/build.sh`` (a no-op when the jars are newer than the sources)."""
    script = ROOT / "interop" / "build.sh"
    if not script.is_file():
        raise JavaNotFoundError(f"{script} is missing: the JVM side is built from the source tree; "
                                "set MAPPEDBUS_PY_JARS to a directory holding a built mappedbuspy.jar")
    if not _jdk_tool("javac"):
        raise JavaNotFoundError("building the jar needs javac (a JDK 17+, not only a JRE) on PATH "
                                "or in JAVA_HOME")
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"{script} failed with exit code {proc.returncode}:\n"
                           f"{proc.stdout}{proc.stderr}")


def jar_path(build=True):
    """The project's jar, built first (when ``build``) if it is missing."""
    jar_dir = os.environ.get("MAPPEDBUS_PY_JARS")
    if jar_dir:
        jar = pathlib.Path(jar_dir) / JAR_NAME
        if not jar.is_file():
            raise JavaNotFoundError(f"MAPPEDBUS_PY_JARS={jar_dir} has no {JAR_NAME}")
        return jar
    jar = BUILD / JAR_NAME
    if not jar.is_file() and build:
        build_jars()
    if not jar.is_file():
        raise JavaNotFoundError(f"{jar} is missing: run `bash interop/build.sh`")
    return jar


def java_command(main_class, *args, jvm_args=(), classpath=()):
    """The argument list that runs ``main_class`` of the project's jar in a new JVM."""
    cp = os.pathsep.join([str(jar_path())] + [str(p) for p in classpath])
    return [java_executable(), *jvm_args, "-cp", cp, main_class, *map(str, args)]


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
    """Start the JVM in this process with the project's jar (and ``classpath``); returns jpype.

    A JVM can start only once per process: later calls (or a JVM started elsewhere) add the
    jar and any new ``classpath`` entries to the running JVM's dynamic class loader, and
    ``jvm_args`` are then ignored.
    """
    try:
        import jpype
    except ImportError:
        raise ImportError("start_jvm needs JPype: pip install JPype1") from None
    paths = [str(jar_path())] + [str(pathlib.Path(p).resolve()) for p in classpath]
    if not jpype.isJVMStarted():
        jpype.startJVM(*jvm_args, jvmpath=_jvm_library(), classpath=paths)
    else:
        system = jpype.JClass("java.lang.System")
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
