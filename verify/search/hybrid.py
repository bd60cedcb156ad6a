"""Searching hybrid and full-attention networks on composition for replayable failures (docs/conventions.md §6,
issue 5): Theorem 1.1's negative side (L-1 full layers plus recurrent gaps) and CPW's (L full layers).

    report = search_hybrid(Composition(L=2, m=4, n=(4,)), full_layers=1, linear_per_gap=4, mixer="deltanet",
                           H=1, d_head=4, d_model=8, arith=arithmetic("fp16", "strict"), weights="random", seed=0)

builds the network (`lab.architectures`), then runs every probe on it (`verify.search.probes.search_network`: the
generic checks, and the boundary and counting-targeted pairs composition's record names) and returns a
`SearchReport` whose every failure and pair was confirmed by a fresh run. With `save_network` the network is
written to that file, so each finding replays with `witness run FILE --tokens ... --format FMT --semantics SEM`.
Finding nothing is reported as what was searched, never as a proof of correctness.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lab import architectures
from verify.search.probes import search_network
from verify.search.report import SearchReport
from witness.arith import Arithmetic


def search_hybrid(task, *, full_layers: int, linear_per_gap: int | Sequence[int], mixer: str, H: int, d_head: int,
                  d_model: int, arith: Arithmetic, weights: str = "random", seed: int = 0,
                  save_network: str | None = None, train_seeds: int = architectures.TRAIN_SEEDS,
                  train_steps: int | None = None, mlp_ratio: int = architectures.MLP_RATIO, device: str = "cpu",
                  **effort: Any) -> SearchReport:
    """Search the hybrid with `full_layers` full-attention layers and recurrent gaps of `mixer` layers.

    `weights`: random, trained (on `device`) or a network file; `effort`: the fields of
    `verify.search.probes.Effort`."""
    architecture = architectures.hybrid_architecture(full_layers, linear_per_gap, mixer, H, d_head, d_model,
                                                     mlp_ratio)
    network, source = architectures.network(architecture, task, weights, seed, train_seeds, train_steps, device)
    extra = {"architecture": {"kind": "hybrid", "full_layers": full_layers, "linear_per_gap": linear_per_gap,
                              "mixer": mixer, "layers": architectures.layer_kinds(network)},
             "weights": source.as_dict()}
    return search_network(network, arith, seed=seed, save_network=save_network, extra=extra, **effort)


def search_full(task, *, layers: int, H: int, d_head: int, d_model: int, arith: Arithmetic, weights: str = "random",
                seed: int = 0, save_network: str | None = None, train_seeds: int = architectures.TRAIN_SEEDS,
                train_steps: int | None = None, mlp_ratio: int = architectures.MLP_RATIO, device: str = "cpu",
                **effort: Any) -> SearchReport:
    """Search a plain stack of `layers` causal full-attention layers (CPW's negative side); trained weights train on
    `device`."""
    architecture = architectures.full_architecture(layers, H, d_head, d_model, mlp_ratio)
    network, source = architectures.network(architecture, task, weights, seed, train_seeds, train_steps, device)
    extra = {"architecture": {"kind": "full", "layers": architectures.layer_kinds(network)},
             "weights": source.as_dict()}
    return search_network(network, arith, seed=seed, save_network=save_network, extra=extra, **effort)


__all__ = ["search_hybrid", "search_full"]
