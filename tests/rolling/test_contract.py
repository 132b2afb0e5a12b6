"""The contract between the rolling bus's Cython bases (rolling/_rolling.pyx) and their Python
subclasses (rolling/writer.py, rolling/reader.py): the methods a base calls back are named in
its module (WRITER_CONTRACT, READER_CONTRACT), declared in the base raising NotImplementedError,
and defined by the subclass; the base calls no other method it does not define itself."""
import os
import re

import pytest

from mappedbus_py.rolling import _rolling
from mappedbus_py.rolling._rolling import (READER_CONTRACT, WRITER_CONTRACT, RollingReaderBase,
                                           RollingWriterBase)
from mappedbus_py.rolling.reader import RollingBusReader
from mappedbus_py.rolling.writer import RollingBusWriter

SOURCE = os.path.join(os.path.dirname(_rolling.__file__), "_rolling.pyx")
PXD = os.path.join(os.path.dirname(_rolling.__file__), "_rolling.pxd")
CASES = [(RollingWriterBase, RollingBusWriter, WRITER_CONTRACT),
         (RollingReaderBase, RollingBusReader, READER_CONTRACT)]
ARGS = {"_check_id": (0,), "_commit_position": (None,)}     # the methods that take arguments


def _class_source(name):
    text = open(SOURCE).read()
    start = text.index(f"cdef class {name}")
    nxt = re.compile(r"^(cdef class |class |cdef int |def )", re.M).search(text, start + 1)
    return text[start:nxt.start() if nxt else len(text)]


@pytest.mark.parametrize("base, sub, contract", CASES, ids=["writer", "reader"])
def test_the_base_declares_each_method_raising(base, sub, contract):
    class Bare(base):
        pass

    bare = Bare()
    for name in contract:
        with pytest.raises(NotImplementedError, match=name):
            getattr(bare, name)(*ARGS.get(name, ()))


@pytest.mark.parametrize("base, sub, contract", CASES, ids=["writer", "reader"])
def test_the_subclass_defines_each_method(base, sub, contract):
    for name in contract:
        assert getattr(sub, name) is not getattr(base, name), \
            f"{sub.__name__} does not define {name}, which {base.__name__} calls"


@pytest.mark.parametrize("base, sub, contract", CASES, ids=["writer", "reader"])
def test_the_base_calls_only_what_it_defines_or_the_contract_names(base, sub, contract):
    body = _class_source(base.__name__)
    called = set(re.findall(r"self\.(_[a-z_]+)\(", body))
    defined = set(re.findall(r"^\s+(?:cdef [\w ]+ |c?p?def )(_[a-z_]+)\(", body, re.M))
    defined |= set(re.findall(r"^\s+cdef (?:inline )?[\w ]*?(_[a-z_]+)\(", open(PXD).read(), re.M))
    assert called - defined <= set(contract), \
        f"{base.__name__} calls {sorted(called - defined - set(contract))}, which neither it nor " \
        f"its contract declares"
    assert set(contract) <= defined, "each contract method is declared in the base"


def test_a_subclass_missing_a_method_fails_loudly():
    # What a subclass that forgot _follow gets at the end of a segment: the base's stub, naming it.
    class Forgetful(RollingReaderBase):
        pass

    with pytest.raises(NotImplementedError, match="_follow"):
        Forgetful()._follow()
