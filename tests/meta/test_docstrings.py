"""Every schedule primitive explains itself with a loop nest; every public name has a docstring."""

import inspect
import re

import pytest

import tdsl as td
from tdsl.schedule.schedule import PRIMITIVE_METHODS

# dtype constants (td.float32, ...) are instances of td.dtypes.DType: an instance has no
# docstring of its own, help(td.float32) shows the class's, which is checked below
CONSTANTS = {n for n in td.__all__ if isinstance(getattr(td, n), td.dtypes.DType)}


def _for_loops(doc: str) -> int:
    """Loop headers in a docstring (side by side nests put two on one line)."""
    return len(re.findall(r"\bfor \w+ in ", doc))


@pytest.mark.parametrize("name", PRIMITIVE_METHODS)
@pytest.mark.parametrize("cls", [td.Schedule, td.Template])
def test_primitive_method_shows_a_loop_nest_before_and_after(cls, name):
    doc = inspect.getdoc(getattr(cls, name)) or ""
    assert _for_loops(doc) >= 2, f"{cls.__name__}.{name} shows no loop nest:\n{doc}"
    assert doc.splitlines()[0].strip(), f"{cls.__name__}.{name} has no one-line summary"


def test_every_primitive_method_has_its_record_class():
    methods = {c.method for c in td.schedule.__globals__["PRIMITIVES"].values()}
    assert set(PRIMITIVE_METHODS) == methods


def test_dtype_constants_are_documented_by_their_class():
    assert CONSTANTS == {"bool_", "float16", "bfloat16", "float32", "float64", "int8", "int16",
                         "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
    doc = inspect.getdoc(td.dtypes.DType) or ""
    assert not doc.startswith("DType("), "DType has only the docstring dataclass generates"
    assert "td.float32" in doc and "td.bfloat16" in doc


@pytest.mark.parametrize("name", sorted(set(td.__all__) - CONSTANTS))
def test_public_name_has_a_docstring(name):
    obj = getattr(td, name)
    doc = inspect.getdoc(obj) or ""
    assert doc.strip(), f"td.{name} has no docstring"
    assert not doc.startswith(f"{name}("), f"td.{name} has only a generated signature as doc"


def _public_members(cls):
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        yield name, member


@pytest.mark.parametrize("cls", [td.Schedule, td.Template, td.Kernel, td.Timing, td.Knob])
def test_public_members_have_docstrings(cls):
    missing = []
    for name, member in _public_members(cls):
        if isinstance(member, (classmethod, staticmethod)):
            member = member.__func__
        # inspect.getdoc, as help() does, finds a slot's doc in a dict __slots__
        doc = member.fget.__doc__ if isinstance(member, property) else inspect.getdoc(member)
        if callable(member) or isinstance(member, property) or inspect.isdatadescriptor(member):
            if not (doc or "").strip():
                missing.append(name)
    assert not missing, f"{cls.__name__} members without a docstring: {missing}"
