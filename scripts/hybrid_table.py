"""What the probes find in hybrids with L-1 full-attention layers, next to the certified constructions:
docs/hybrid_results.md.

    .venv/bin/python scripts/hybrid_table.py            # writes docs/hybrid_results.md (a few minutes)
    .venv/bin/python scripts/hybrid_table.py --quick    # fewer sizes and mixers, printed only

For L = 2 and 3 and table sizes m from small to large, the script

* certifies the constructions with `verify.certify.certify` at fp16 strict: `composition` ((L+1) full layers) and,
  where they are registered, `composition_hybrid` (L full + 1 linear) and `composition_hybrid_small_table`
  (linear layers look z_1 up, L-1 full layers do the rest; its budget grows with m);
* searches (`verify.search.hybrid.search_hybrid`) the hybrid with L-1 full layers and a gap of recurrent layers
  before and after each, for every recurrent mixer, with seeded random weights, at two budgets: a small one
  (H 1, d_head 4, d_model 8, float:3,4: Hdp 64) and the (L+1)-layer construction's own (its d_head and d_model at
  fp16);
* trains hybrids with the shared trainer (`rnn` at the small budget; `linear` and `rnn` at a tiny one) and
  searches them too.

Each search row says what was found -- replayable failures, indistinguishable pairs -- or "none found in N inputs".
A found failure or pair is a proof that this network is wrong (each was re-run by the verifier); "none found" is a
sample, not a proof. The last column is Theorem 1.1's smallest prompt length at that Hdp (`witness bounds`):
every size here is far below it, so the theorem promises nothing at these sizes and the table shows what
happens in practice.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import witness
from verify.certify import certify
from lab import architectures
from verify import theorems as theorem_bounds
from verify.search.hybrid import search_hybrid
from verify.search.probes import PAIR_SUFFIXES
from witness.arith import arithmetic, parse_format
from witness.mixers import RECURRENT_MIXERS
from witness.registry import construction_names
from witness.tasks import Composition

SIZES = {2: [(2, (2,)), (4, (4,)), (8, (4,))], 3: [(2, (2, 2)), (4, (2, 2))]}
QUICK_SIZES = {2: [(2, (2,))], 3: [(2, (2, 2))]}
MIXERS = [cls.kind for cls in RECURRENT_MIXERS if cls.kind != "decay"]  # decay is the form behind three presets
CERTIFIED = ("composition", "composition_hybrid", "composition_hybrid_small_table")
SMALL = {"H": 1, "d_head": 4, "d_model": 8, "format": "float:3,4"}
LINEAR_PER_GAP = 2
EFFORT = {"samples": 100, "hypothesis_examples": 10, "pair_suffixes": 2, "pair_prefixes": 32, "exhaustive_limit": 0}
TRAINED = {"mixer": "rnn", "train_seeds": 2, "train_steps": 400}
TRAINED_EFFORT = {**EFFORT, "pair_suffixes": 4, "pair_prefixes": 256}
#: The smallest budget: one head of width 1 in a residual stream of 2 at 6 bits, where crossing messages collide.
TINY = {"H": 1, "d_head": 1, "d_model": 2, "format": "float:2,3"}
TINY_EFFORT = {**EFFORT, "pair_suffixes": PAIR_SUFFIXES, "pair_prefixes": 2000}


NOTES = """Notes.

* Random hybrids: the trainer's initialisation (`lab.train`) scales each recurrent layer so that its read-out
  stays of order one without a layer norm, so outputs are finite and ties rare. Random networks are far from
  solving the task, so they are wrong on most inputs: those failures replay, but they say nothing about the
  architecture, only about these weights.
* Trained rows: the shared trainer (2 seeds, 400 steps each, a fixed count; best held-out accuracy kept) gets near chance
  accuracy within these budgets. The pair search then looks for indistinguishable pairs across the boundary after
  the z_L table; at the tiny budget (d_model 2, float:2,3: Hdp 12) the crossing messages carry few bits, and a pair
  found there is a proof that the trained network answers one of its two inputs wrongly.
* The certified rows are proofs for every input at fp16 strict (`verify.certify`); the search rows are samples.
"""


def theorem_min_n(L: int, Hdp: int) -> str:
    return theorem_bounds.min_prompt_length("theorem_1_1", L, Hdp).display()


def certified_rows(task: Composition, arith) -> list[str]:
    rows = []
    for name in CERTIFIED:
        if name not in construction_names():
            continue
        network = witness.compile(name, L=task.L, m=task.m, n=list(task.n))
        result = certify(network, arith)
        budget = network.budget(arith.bits)
        kinds = architectures.layer_kinds(network)
        shape = f"{kinds.count('attention')} full + {len(kinds) - kinds.count('attention')} linear"
        rows.append(f"| {task.L} | {task.m} | {list(task.n)} | {task.prompt_length} | construction `{name}` | {shape} "
                    f"| fp16 | {budget.H} | {budget.d} | {budget.p} | {budget.Hdp} "
                    f"| {theorem_min_n(task.L, budget.Hdp)} "
                    f"| certify: **{result.status.value}** for all {task.count()} inputs |")
    return rows


def found_text(report) -> str:
    """What the probes found: the failing share of the sampled (or exhaustive) inputs, and the confirmed pairs."""
    probes = {record["method"]: record for record in report.searched["probes"]}
    first = probes.get("exhaustive") or probes["sampled"]
    pair_inputs = probes["boundary_pairs"]["inputs"]
    if not report.failures and not report.pairs:
        return f"none found in {report.searched['inputs']} inputs"
    parts = [f"wrong on {first['failing']}/{first['inputs']} {first['method']} inputs"]
    if report.failures and all(failure.output == -1 for failure in report.failures):
        parts[0] += " (the kept ones are ties)"
    parts.append(f"{len(report.pairs)} pairs in {pair_inputs} pair-search inputs" if report.pairs
                 else f"no pair in {pair_inputs} pair-search inputs")
    return "; ".join(parts)


def search_row(task: Composition, mixer: str, shape: dict, weights: str, seed: int, effort: dict = EFFORT,
               **training) -> str:
    arith = arithmetic(parse_format(shape["format"]), "strict")
    report = search_hybrid(task, full_layers=task.L - 1, linear_per_gap=LINEAR_PER_GAP, mixer=mixer, H=shape["H"],
                           d_head=shape["d_head"], d_model=shape["d_model"], arith=arith, weights=weights, seed=seed,
                           **training, **effort)
    budget = report.budget
    source = report.searched["weights"]
    label = weights if weights != "trained" else f"trained (best accuracy {source['best_accuracy']:.3f})"
    return (f"| {task.L} | {task.m} | {list(task.n)} | {task.prompt_length} | hybrid, {label} | "
            f"{task.L - 1} full + gaps of {LINEAR_PER_GAP} `{mixer}` | {shape['format']} | {budget['H']} "
            f"| {budget['d']} | {budget['p']} | {budget['Hdp']} | {theorem_min_n(task.L, budget['Hdp'])} "
            f"| {found_text(report)} |")


HEADER = ["| L | m | n | prompt | network | layers | format | H | d | p | Hdp | Thm 1.1 applies from n = | found |",
          "|---:|---:|---|---:|---|---|---|---:|---:|---:|---:|---|---|"]


def table(sizes: dict, mixers: list[str], trained: bool) -> list[str]:
    lines = list(HEADER)
    certify_arith = arithmetic(parse_format("fp16"), "strict")
    for L, cases in sizes.items():
        for m, n in cases:
            task = Composition(L=L, m=m, n=n)
            started = time.perf_counter()
            lines += certified_rows(task, certify_arith)
            construction = witness.compile("composition", L=L, m=m, n=list(n)).budget(16)
            same_budget = {"H": 1, "d_head": construction.d_head, "d_model": construction.d_model, "format": "fp16"}
            for mixer in mixers:
                for shape in (SMALL, same_budget):
                    lines.append(search_row(task, mixer, shape, "random", seed=0))
            print(f"L = {L}, m = {m}, n = {list(n)}: {time.perf_counter() - started:.1f} s", flush=True)
    if trained:
        task = Composition(L=2, m=4, n=(4,))
        lines.append(search_row(task, TRAINED["mixer"], SMALL, "trained", seed=0, effort=TRAINED_EFFORT,
                                **{k: v for k, v in TRAINED.items() if k != "mixer"}))
        for mixer in ("linear", "rnn"):
            lines.append(search_row(task, mixer, TINY, "trained", seed=0, effort=TINY_EFFORT))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two sizes, two mixers, no training; print only")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "docs" / "hybrid_results.md"))
    args = parser.parse_args()
    started = time.perf_counter()
    if args.quick:
        print("\n".join(table(QUICK_SIZES, MIXERS[:2], trained=False)))
        return
    lines = table(SIZES, MIXERS, trained=True)
    intro = __doc__.split("\n\n", 2)[2].strip()
    text = "\n".join(["# Hybrids with L-1 full-attention layers: what the probes find", "",
                      "Regenerate with `.venv/bin/python scripts/hybrid_table.py` "
                      f"(this run: {time.perf_counter() - started:.0f} s).", "", intro, "", *lines, "", NOTES])
    Path(args.out).write_text(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
