"""Shared test configuration: the tiers, hypothesis profiles, golden-file flag, backend
fixture, and `threads`, which runs parallel loops on a given number of threads.

Tiers are folders (docs/testing.md): unit/ and meta/ are the fast tier for the edit-test
loop, e2e/ and fuzz/ the rest of the suite. Every test is marked with its folder's name
(`-m unit`, `-m "not fuzz"`), and the folders are on sys.path so a test module may
import helpers from another (`from test_emit_c import tool`) whichever tier runs.

Hypothesis profiles: `ci` (bounded, derandomized; the default) and `dev` (many
more examples). Select one with `--hypothesis-profile=dev` (hypothesis' own
pytest option) or the environment variable HYPOTHESIS_PROFILE.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tdsl.api import TARGETS

HERE = Path(__file__).resolve().parent
TIERS = ("unit", "e2e", "meta", "fuzz")
for _tier in TIERS:
    if str(HERE / _tier) not in sys.path:
        sys.path.insert(0, str(HERE / _tier))


def pytest_configure(config):
    for tier in TIERS:
        config.addinivalue_line("markers", f"{tier}: a test in tests/{tier}/ (docs/testing.md)")


def pytest_collection_modifyitems(config, items):
    """Mark each test with its tier; a test file outside the tier folders is an error."""
    for item in items:
        path = Path(str(item.fspath)).resolve()
        if not path.is_relative_to(HERE):
            continue  # not one of the suite's files (a doctest of a module, say)
        rel = path.relative_to(HERE).parts
        if len(rel) < 2 or rel[0] not in TIERS:
            raise pytest.UsageError(
                f"{item.fspath}: test files go in one of tests/{{{','.join(TIERS)}}}/ "
                "(docs/testing.md says which)")
        item.add_marker(getattr(pytest.mark, rel[0]))


settings.register_profile(
    "ci",
    max_examples=25,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "dev",
    max_examples=500,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite golden files under tests/golden/ instead of comparing against them",
    )


@pytest.fixture
def update_golden(request) -> bool:
    """True when the run should rewrite golden files (`pytest --update-golden`)."""
    return bool(request.config.getoption("--update-golden"))


def _backend_import_error(target: str) -> str | None:
    """Why the backend package for `target` cannot be imported, or None if it can."""
    try:
        importlib.import_module(f"tdsl.backend_{target}")
    except ImportError as e:
        return f"{type(e).__name__}: {e}"
    return None


@pytest.fixture(params=list(TARGETS))
def backend(request) -> str:
    """Each code-generation target in turn; skipped only if its package cannot be imported."""
    target = request.param
    reason = _backend_import_error(target)
    if reason is not None:
        if target == TARGETS[0]:
            pytest.fail(f"the default backend {target!r} cannot be imported: {reason}")
        pytest.skip(f"backend {target!r} is not available: {reason}")
    return target


@pytest.fixture
def threads():
    """`threads(n)` makes later parallel loops of this test's thread run on n threads
    (both backends run them on tdsl's thread pool, with the calling thread's setting,
    `td.set_num_threads`); the previous setting is restored afterwards. Races between
    iterations can only show with two or more threads, whatever the machine's core
    count."""
    from tdsl.backend_c import pool

    if pool.load() is None:
        pytest.skip(f"tdsl's thread pool is not available ({pool.unavailable()})")
    before = pool.setting()
    yield pool.set_threads
    pool.set_threads(before)


def _restoring_environment():
    from tdsl.backend_c import pool

    before = dict(os.environ)
    loaded = pool._pool
    configured = (pool.default_threads(), pool.cores())
    yield
    if os.environ != before:
        os.environ.clear()
        os.environ.update(before)
    if pool._pool is not None and (loaded is None or (pool.default_threads(), pool.cores())
                                   != configured):
        # the pool read its default when it was loaded, perhaps in the changed environment
        pool._pool.lib.tdsl_configure(pool.default_threads(), pool.cores())


# Each test, and each module (its module-scoped fixtures: a LocalCluster), ends with the
# process environment it started with, and the thread pool with the default threads of
# that environment. distributed's Nanny (a LocalCluster of processes) sets
# OMP_NUM_THREADS=1 and the like in the *calling* process's os.environ before it spawns
# a worker, and leaves them there; the pool, when it is loaded then, takes 1 as its
# default, as OpenMP's runtime reads the variable once; a later test of the same process
# would see another default thread count.
_environment_as_it_was = pytest.fixture(autouse=True)(_restoring_environment)
_module_environment_as_it_was = pytest.fixture(autouse=True, scope="module")(
    _restoring_environment)
