"""Every public member has a docstring: each name in the __all__ of mappedbus_py and of its
public modules, and every public attribute of each class among them (methods, properties,
Cython attributes; plain class-level data and message fields are named, as ``name``, in a
docstring of the class or of a base class). Agrona documents every public member; so does
this package."""
import importlib
import inspect
import pkgutil

import pytest

import mappedbus_py

PUBLIC_MODULES = ["mappedbus_py"] + sorted(   # every layer's modules, none of _core
    m.name for m in pkgutil.walk_packages(mappedbus_py.__path__, "mappedbus_py.")
    if not any(part.startswith("_") for part in m.name.split(".")[1:]))
DATA = (int, float, str, bytes, tuple, frozenset, list, dict, type(None))


def _documented(obj):
    doc = getattr(obj, "__doc__", None)
    # An instance's __doc__ may be its type's (a property object, a Cython descriptor):
    # that describes the type, not the member.
    return bool(doc and doc.strip()) and doc != type(obj).__doc__


def _class_docs(cls):
    return " ".join(k.__doc__ or "" for k in cls.__mro__
                    if k.__module__.startswith("mappedbus_py"))


def _undocumented_members(cls):
    from mappedbus_py._core._message import Field
    for name in dir(cls):
        if name.startswith("_"):
            continue
        owner = next((k for k in cls.__mro__ if name in vars(k)), None)
        if owner is None or not owner.__module__.startswith("mappedbus_py"):
            continue                     # inherited from Exception, object, ...
        raw = vars(owner)[name]
        if isinstance(raw, (classmethod, staticmethod)):
            raw = raw.__func__
        if isinstance(raw, DATA + (Field,)):
            if f"``{name}``" not in _class_docs(cls):
                yield f"{cls.__name__}.{name} (class data, named in no docstring of the class)"
        elif not _documented(raw):
            yield f"{cls.__name__}.{name} ({type(raw).__name__} of {owner.__name__})"


def _public(module_name):
    mod = importlib.import_module(module_name)
    return mod, [(n, getattr(mod, n)) for n in getattr(mod, "__all__", ())]


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_member_has_a_docstring(module_name):
    mod, names = _public(module_name)
    missing = [] if _documented(mod) else [f"{module_name} (the module)"]
    for name, obj in names:
        if inspect.isclass(obj):
            if not (obj.__doc__ or "").strip():
                missing.append(name)
            missing.extend(_undocumented_members(obj))
        elif callable(obj) and not _documented(obj):
            missing.append(name)
    assert not missing, f"{module_name}: no docstring for " + ", ".join(missing)


def test_the_walk_sees_what_it_must():
    # The walk reaches the members the issue named, Cython attributes included.
    from mappedbus_py import MappedBusReader, Record, RollingBusReader
    assert "mappedbus_py.rolling" in PUBLIC_MODULES and "mappedbus_py.messages" in PUBLIC_MODULES
    for cls, name in ((MappedBusReader, "skipped"), (MappedBusReader, "rollbacks"),
                      (Record, "position"), (Record, "meta"), (Record, "payload"),
                      (RollingBusReader, "open"), (RollingBusReader, "close")):
        assert _documented(inspect.getattr_static(cls, name)), (cls, name)

    class Bare:
        def undocumented(self):
            pass
    Bare.__module__ = "mappedbus_py.fake"
    assert list(_undocumented_members(Bare)) == ["Bare.undocumented (function of Bare)"]
