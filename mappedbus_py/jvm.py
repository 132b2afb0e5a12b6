"""The JVM side from Python: the project's jar, ``java`` command lines for its classes, and
an in-process JVM through JPype.

    from mappedbus_py import jvm
    subprocess.run(jvm.java_command("io.mappedbuspy.tools.BusTool", "layout"))
    jpype = jvm.start_jvm()
    MappedBusWriter = jpype.JClass("io.mappedbuspy.MappedBusWriter")
"""
import os
import pathlib
import shutil
import subprocess

__all__ = ("ROOT", "jar_path", "build_jars", "java_executable", "java_command", "start_jvm")

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "jvm"


def build_jars():
    """Run ``interop/build.sh`` (a no-op when the jars are newer than the sources)."""
    script = ROOT / "interop" / "build.sh"
    if not script.exists():
        raise FileNotFoundError(f"{script} is missing: the JVM side ships with the source tree")
    subprocess.run(["bash", str(script)], check=True, stdout=subprocess.DEVNULL)


def jar_path(build=True):
    """The project's jar, built first if it is missing."""
    jar = BUILD / "mappedbuspy.jar"
    if not jar.exists() and build:
        build_jars()
    return jar


def java_executable():
    home = os.environ.get("JAVA_HOME")
    if home and (pathlib.Path(home) / "bin" / "java").exists():
        return str(pathlib.Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise FileNotFoundError("no java on PATH (install a JDK 17+ or set JAVA_HOME)")
    return found


def java_command(main_class, *args, jvm_args=(), classpath=()):
    """The argument list that runs ``main_class`` of the project's jar in a new JVM."""
    cp = os.pathsep.join([str(jar_path())] + [str(p) for p in classpath])
    return [java_executable(), *jvm_args, "-cp", cp, main_class, *map(str, args)]


def start_jvm(classpath=(), jvm_args=()):
    """Start the JVM in this process (once) with the project's jar; returns the jpype module."""
    import jpype
    if not jpype.isJVMStarted():
        jpype.startJVM(*jvm_args, classpath=[str(jar_path())] + [str(p) for p in classpath])
    return jpype
