"""Searching hybrid and full-attention networks for replayable failures (docs/conventions.md §6, issue 5).

    report = search_hybrid(Composition(L=2, m=4, n=(4,)), full_layers=1, linear_per_gap=4, mixer="deltanet",
                           H=1, d_head=4, d_model=8, arith=arithmetic("fp16", "strict"), weights="random", seed=0)

builds the network (`lab.architectures`), then runs the probes -- every input when the family is small
(`exhaustive_limit`); else seeded uniform samples and, beside them at the same number of inputs, the margin-guided
local search and Hypothesis targeted at the margin (`verify.search.margin`); a shrinking Hypothesis search;
indistinguishable pairs across the layout boundary (`verify.search.pairs`), and, where counting forces pairs
(`counting`: the last table holds more bits than the recurrent state), `pairs.targeted_pairs` -- and returns a `SearchReport` whose every failure and pair was confirmed by a fresh run.
With `save_network` the network is written to that file, so each finding replays with
`witness run FILE --tokens ... --format FMT --semantics SEM`. Finding nothing is reported as what was searched,
never as a proof of correctness.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from verify.defaults import PAIR_PREFIXES, SEARCH_SAMPLES
from verify.search import margin, pairs, probes
from lab import architectures
from verify.search.report import SearchReport
from witness.arith import Arithmetic
from witness.ir import Network

#: Default effort per search: sampled inputs, Hypothesis examples, largest family run exhaustively, and for the
#: pairs the suffixes fixed and random prefixes run under each (plus every single-token change of one of them);
#: SAMPLES and PAIR_PREFIXES are defined in verify.defaults, which the command line reads without this module.
SAMPLES = SEARCH_SAMPLES
HYPOTHESIS_EXAMPLES = 100
EXHAUSTIVE_LIMIT = 20_000
PAIR_SUFFIXES = 4


def counting(task, state_bits: int) -> dict[str, Any]:
    """Whether counting alone forces indistinguishable pairs: the last table z_L holds N log2 N bits (N = N_{L-1}
    entries of N values); if every one must cross the boundary through C = `state_bits` bits of recurrent state
    (C > 0: the network carries state), two tables with different answers share a state once N log2 N > C."""
    if task.name != "composition":
        return {"applies": False, "reason": f"counted for composition only, not {task.name}"}
    size = task.domain_sizes[-1]
    table_bits = size * math.log2(size) if size > 1 else 0.0
    return {"applies": state_bits > 0, "table_bits": round(table_bits, 3), "state_bits": state_bits,
            "forced": 0 < state_bits < table_bits}


def search_network(network: Network, arith: Arithmetic, *, seed: int = 0, save_network: str | None = None,
                   samples: int = SAMPLES, hypothesis_examples: int = HYPOTHESIS_EXAMPLES,
                   exhaustive_limit: int = EXHAUSTIVE_LIMIT, pair_suffixes: int = PAIR_SUFFIXES,
                   pair_prefixes: int = PAIR_PREFIXES, boundary: int | None = None,
                   max_failures: int = probes.DEFAULT_MAX_FAILURES, max_pairs: int = pairs.DEFAULT_MAX_PAIRS,
                   extra: dict[str, Any] | None = None) -> SearchReport:
    """Every probe on one network; `extra` goes into `searched` (the architecture, where the weights came from)."""
    task = network.task
    found = []
    if task.count() <= exhaustive_limit:
        found.append(probes.exhaustive(network, arith, exhaustive_limit, max_failures))
    else:  # uniform samples, and the margin-guided probes at the same number of inputs beside them
        found.append(probes.sampled(network, arith, samples, seed, max_failures))
        found.append(margin.margin_search(network, arith, samples, seed, max_failures=max_failures))
        found.append(margin.hypothesis_margin(network, arith, hypothesis_examples, seed, max_failures))
    found.append(probes.hypothesis(network, arith, hypothesis_examples, seed))
    failures = list({tuple(f.tokens): f for probe in found for f in probe.failures}.values())  # each input once
    if boundary is None and not pairs.has_default_boundary(task):
        pair_list, pair_record = [], {"method": "boundary_pairs", "inputs": 0, "seconds": 0.0,
                                      "skipped": f"no layout boundary for {task}"}
    else:
        pair_list, pair_record = pairs.boundary_pairs(network, arith, boundary, pair_suffixes, pair_prefixes, seed,
                                                      max_pairs)
    records = [p.searched for p in found] + [pair_record]
    budget = network.budget(arith.bits).as_dict()
    counted = counting(task, budget["state_bits"])
    if counted.get("forced") and boundary is None and pairs.has_default_boundary(task):
        # Counting says pairs must exist here: look for them by walking two crossings together, at the pair
        # search's budget of inputs; each pair it finds is marked as one counting forced.
        targeted, targeted_record = pairs.targeted_pairs(network, arith, pair_suffixes * pair_prefixes, seed,
                                                         max_pairs=max_pairs)
        known = {(tuple(pair.a), tuple(pair.b)) for pair in pair_list}
        pair_list += [pair for pair in targeted if (tuple(pair.a), tuple(pair.b)) not in known]
        records.append({**targeted_record, "forced_by_counting": True})
    if save_network is not None:
        network.save(save_network)
    searched = {**probes.searched_summary(records), **(extra or {})}
    searched["counting"] = counted
    return SearchReport(save_network, arith.format_name, arith.semantics, budget, failures[:max_failures],
                        pair_list, searched)


def search_hybrid(task, *, full_layers: int, linear_per_gap: int | Sequence[int], mixer: str, H: int, d_head: int,
                  d_model: int, arith: Arithmetic, weights: str = "random", seed: int = 0,
                  save_network: str | None = None, train_seeds: int = architectures.TRAIN_SEEDS,
                  train_steps: int | None = None, mlp_ratio: int = architectures.MLP_RATIO,
                  **effort: Any) -> SearchReport:
    """Search the hybrid with `full_layers` full-attention layers and recurrent gaps of `mixer` layers.

    `weights`: random, trained or a network file; `effort`: the `search_network` settings (samples, ...)."""
    architecture = architectures.hybrid_architecture(full_layers, linear_per_gap, mixer, H, d_head, d_model,
                                                     mlp_ratio)
    network, source = architectures.network(architecture, task, weights, seed, train_seeds, train_steps)
    extra = {"architecture": {"kind": "hybrid", "full_layers": full_layers, "linear_per_gap": linear_per_gap,
                              "mixer": mixer, "layers": architectures.layer_kinds(network)},
             "weights": source.as_dict()}
    return search_network(network, arith, seed=seed, save_network=save_network, extra=extra, **effort)


def search_full(task, *, layers: int, H: int, d_head: int, d_model: int, arith: Arithmetic, weights: str = "random",
                seed: int = 0, save_network: str | None = None, train_seeds: int = architectures.TRAIN_SEEDS,
                train_steps: int | None = None, mlp_ratio: int = architectures.MLP_RATIO,
                **effort: Any) -> SearchReport:
    """Search a plain stack of `layers` causal full-attention layers (CPW's negative side)."""
    architecture = architectures.full_architecture(layers, H, d_head, d_model, mlp_ratio)
    network, source = architectures.network(architecture, task, weights, seed, train_seeds, train_steps)
    extra = {"architecture": {"kind": "full", "layers": architectures.layer_kinds(network)},
             "weights": source.as_dict()}
    return search_network(network, arith, seed=seed, save_network=save_network, extra=extra, **effort)


__all__ = ["search_hybrid", "search_full", "search_network"]
