"""The wire layout is written once per language (layout.py, Layout.java): the two must agree."""
import subprocess

import pytest

from mappedbus_py import jvm
from mappedbus_py.formats.layout import CONSTANTS
from support.procs import java_or_skip

pytestmark = pytest.mark.java


@pytest.fixture(scope="module")
def jar():
    return java_or_skip()


def java_constants(main_class, *args):
    out = subprocess.run(jvm.java_command(main_class, *args), capture_output=True, text=True,
                         timeout=120, check=True).stdout
    pairs = [line.split("=", 1) for line in out.splitlines() if line.strip()]
    return {name: int(value) if value.lstrip("-").isdigit() else value for name, value in pairs}


def test_java_layout_constants_equal_the_python_ones(jar):
    assert java_constants("io.mappedbuspy.Layout") == CONSTANTS


def test_bus_tool_layout_prints_the_same_constants(jar):
    assert java_constants("io.mappedbuspy.tools.BusTool", "layout") == CONSTANTS
