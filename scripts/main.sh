#!/usr/bin/env bash
# The main job: reproduce the hierarchy with the embedded default configuration (verify/hierarchy.json) and write
# out/hierarchy/report.md, report.json, plots/*.png, networks/*.npz and certificates/*.json. Extra arguments go to
# `witness hierarchy` (e.g. --quick, --L 1 2, --workers 2). torch builds and trains the probed networks;
# matplotlib draws the plots.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh torch,plots
.venv/bin/witness hierarchy --out out/hierarchy "$@"
