#!/usr/bin/env bash
# The whole test suite, from nothing: makes .venv, installs witness with its test extras, runs pytest on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh test
exec .venv/bin/python -m pytest -n 2 "$@"
