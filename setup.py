"""Only the extension modules; everything else is in pyproject.toml."""
import os

from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("MAPPEDBUS_DEBUG") == "1"   # annotate, linetrace, bounds checks

MODULES = ["_mapping", "_message", "_record", "_writer", "_reader"]

extensions = [
    Extension(
        f"mappedbus_py.{name}",
        [f"mappedbus_py/{name}.pyx"],
        include_dirs=["mappedbus_py"],
        depends=["mappedbus_py/_atomic.h", "mappedbus_py/_atomic.pxd", "mappedbus_py/_guard.h",
                 "mappedbus_py/_guard.pxd"],
        extra_compile_args=["-O0", "-g"] if DEBUG else ["-O3"],
        define_macros=[("CYTHON_TRACE_NOGIL", "1")] if DEBUG else [],
    )
    for name in MODULES
]

setup(
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
