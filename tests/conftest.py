"""Progress bars off for in-process tests, whose stderr assertions are about messages; the bars themselves are
tested in a child process (tests/test_progress.py)."""

import pytest

from witness.progress import set_quiet


@pytest.fixture(autouse=True, scope="session")
def _no_progress_bars():
    set_quiet(True)
    yield
