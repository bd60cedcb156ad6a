#!/usr/bin/env bash
# The main job: compile the (L+1)-layer composition network for L=3, m=4, n=(2,4), check it on 1,000 random
# inputs in float64, and print its layers and budget table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh
mkdir -p out
.venv/bin/witness compile composition --L 3 --m 4 --n 2 4 -o out/composition.npz
.venv/bin/witness run out/composition.npz --random 1000 --seed 0
.venv/bin/witness inspect out/composition.npz
