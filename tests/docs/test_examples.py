"""The runnable examples run, and what they print is true."""

from __future__ import annotations

import re
import subprocess
import sys

import witness
from tests.oracles.reference_tasks import composition_answer_from_tokens
from tests import REPO

EXAMPLES = REPO / "examples"


def test_quickstart(tmp_path):
    done = subprocess.run([sys.executable, str(EXAMPLES / "quickstart.py"), str(tmp_path)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    said = re.search(r"network says (\d+), the task says (\d+)", done.stdout)
    tokens = witness.Composition(3, 4, (2, 4)).random_tokens(seed=0, count=1)[0]  # the example's input
    expected = composition_answer_from_tokens(4, (2, 4), tokens)
    assert said and int(said.group(1)) == int(said.group(2)) == expected
    assert "same output True" in done.stdout and "1000/1000 random inputs correct" in done.stdout
    assert re.search(r"^\s+Hdp\s+\d+$", done.stdout, re.MULTILINE)
    assert witness.load(tmp_path / "composition.npz").task == witness.Composition(3, 4, (2, 4))
