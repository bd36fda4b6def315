"""Shared test configuration: hypothesis profiles, golden-file flag, backend fixture,
and `threads`, which runs parallel loops on a given number of threads.

Hypothesis profiles: `ci` (bounded, derandomized; the default) and `dev` (many
more examples). Select one with `--hypothesis-profile=dev` (hypothesis' own
pytest option) or the environment variable HYPOTHESIS_PROFILE.
"""

from __future__ import annotations

import importlib
import os

import pytest
from hypothesis import HealthCheck, settings

from tdsl.api import TARGETS

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
