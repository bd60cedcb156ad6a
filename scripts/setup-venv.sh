#!/usr/bin/env bash
# Create .venv (if missing) and install witness with the given extras, under constraints.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt -e ".${extras:+[$extras]}"
