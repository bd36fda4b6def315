"""The kernel ABI (tdsl.lower.abi): one argument check for the modules of every
target, and a Kernel call that checks its arguments once."""

from __future__ import annotations

import numpy as np
import pytest

import tdsl as td
from tdsl.lower import abi


def _kernel(backend):
    (x,) = td.dims("x")
    N = td.size("N")
    a = td.input("a", {x: N}, td.float32)
    o = td.compute("o", {x: N}, a[x] + 1)
    return td.build(td.schedule(o), target=backend)


@pytest.mark.parametrize("bad, message", [
    (lambda a, o: ([a.astype(np.float64), o], [4]), "must have dtype float32"),
    (lambda a, o: ([a, o[::2]], [2]), "must have 2 elements|C-contiguous"),
    (lambda a, o: ([a, o], [4, 1]), "takes 2 arrays .* and 1 sizes"),
    (lambda a, o: ([a.tolist(), o], [4]), "must be a numpy array"),
    (lambda a, o: ([a, np.zeros(3, np.float32)], [4]), "must have 4 elements, got 3"),
])
def test_every_module_checks_its_arguments(backend, bad, message):
    module = _kernel(backend)._module
    a, o = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    with pytest.raises(td.ArgumentError, match=message):
        module.call(*bad(a, o))
    assert module.call([a, o], [4]) == abi.OK
    np.testing.assert_array_equal(o, a + 1)


def test_a_kernel_call_checks_once(backend, monkeypatch):
    f = _kernel(backend)
    calls = []
    monkeypatch.setattr(abi, "_check_array", lambda *a: calls.append(a))
    np.testing.assert_array_equal(f(a=np.ones(3, np.float32)), np.full(3, 2, np.float32))
    assert calls == []  # bound and checked by the algorithm's binding, not again


def test_status_codes_have_messages():
    assert abi.STATUS[abi.OK] == "success"
    assert "out of memory" in abi.STATUS[abi.OUT_OF_MEMORY]
