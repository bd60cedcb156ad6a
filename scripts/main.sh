#!/usr/bin/env bash
# The main job: the hierarchy with the embedded default configuration (experiments/hierarchy.json), on every core, into
# out/hierarchy/: report.md (a summary first, then every row), report.json, plots/*.png, networks/*.npz and
# certificates/*.json. Every construction, p*, both separations and 2-Sum are certified fresh; the trained networks
# and the capacity curve are replayed from the committed docs/hierarchy (searched fresh; one network and one
# capacity point retrained and compared bit for bit). About 5 minutes on 2 cores after the install (docs/hierarchy.md).
# Extra arguments go to `witness hierarchy`: --full trains everything (about an hour on 2 cores), --quick is a
# smoke run of a minute, --L 1 2 some depths only. torch trains and replays; matplotlib draws the plots.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh torch,plots
.venv/bin/witness hierarchy --out out/hierarchy "$@"
