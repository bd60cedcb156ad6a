"""The test suite, one folder per package (witness, constructions, lab, verify, experiments, cli), plus docs/ for
the README, the docs pages and the notebooks, and oracles/ for the independent references the tests share."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
