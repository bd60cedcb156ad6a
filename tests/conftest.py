"""Progress bars off for in-process tests, whose stderr assertions are about messages; the bars themselves are
tested in a child process (tests/test_progress.py). `strict_shortcuts_everywhere` for the tests that judge strict
runs against MPFR."""

import pytest

from witness.arith import semantics
from witness.progress import set_quiet


@pytest.fixture(autouse=True, scope="session")
def _no_progress_bars():
    set_quiet(True)
    yield


@pytest.fixture
def strict_shortcuts_everywhere(monkeypatch):
    """The strict matmul's shortcuts (witness.arith.semantics) taken at every size, not only from SHORTCUTS_FROM on:
    the networks of the MPFR comparisons are small, and the reference should judge the shortcuts too (one that does
    not apply falls back to the plain loop, so that is judged as well)."""
    monkeypatch.setattr(semantics, "SHORTCUTS_FROM", 0)
