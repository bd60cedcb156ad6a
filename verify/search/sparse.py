"""Searching one layer of (B,k)-block-sparse attention on 2-Sum (docs/conventions.md §6, Theorem 1.2).

`search_sparse` builds (or loads) a one-layer sparse network within a budget and runs every probe on it
(`verify.search.probes.search_network`: the generic checks -- seeded sampling, the margin-guided checks and
Hypothesis, or every input of a family small enough -- and the summary collisions 2-Sum's record names,
`verify.search.collisions`); it returns a `SearchReport`, the object `witness search sparse` prints, with the
layer's B and k and Theorem 1.2's scale B·log2 n in its budget.
"""

from __future__ import annotations

from typing import Any

from constructions import two_sum_sparse
from lab.architectures import TRAIN_SEEDS, Weights, check_weights_device, layer_kinds, sparse_architecture
from lab.architectures import network as searched_network
from verify.search.collisions import sparse_layer
from verify.search.probes import COLLISION_ATTEMPTS, DEFAULT_MAX_FAILURES, HYPOTHESIS_EXAMPLES, SAMPLES, search_network
from verify.search.report import DEFAULT_MAX_PAIRS, SearchReport
from verify.theorems import sparse_two_sum_scale
from witness.arith import Arithmetic
from witness.errors import ParameterError
from witness.ir import Network
from witness.tasks import TwoSum


def sparse_budget(network: Network, bits: int) -> dict[str, Any]:
    """The budget table (H, d_head, d_model, d, p, Hdp), the layer's B and k, and Theorem 1.2's scale B·log2 n
    (the quantity inside its Omega: the paper gives no constant) to set beside Hdp."""
    layer, task = sparse_layer(network), network.task
    return {**network.budget(bits).as_dict(), "block": layer.block, "k": layer.k,
            "B_log2_n": round(sparse_two_sum_scale(task.n, layer.block).approx, 3)}


def search_sparse(task: TwoSum, *, block: int, k: int, H: int, d_head: int, d_model: int, arith: Arithmetic,
                  weights: str = "random", seed: int = 0, save_network: str | None = None,
                  train_seeds: int = TRAIN_SEEDS, train_steps: int | None = None, samples: int = SAMPLES,
                  hypothesis_examples: int = HYPOTHESIS_EXAMPLES, collision_attempts: int = COLLISION_ATTEMPTS,
                  max_failures: int = DEFAULT_MAX_FAILURES, max_pairs: int = DEFAULT_MAX_PAIRS,
                  device: str = "cpu") -> SearchReport:
    """Search one layer of (block, k)-sparse attention on `task` for failures and summary-collision pairs.

    `weights`: `random` (the trainer's seeded initialisation), `trained` (the shared trainer on `device`,
    `train_seeds` seeds, the best held-out accuracy kept), `natural` (the `two_sum` construction's weights under block-sparse attention;
    H, d_head and d_model are then the construction's) or a saved network file, which must be a one-layer
    (block, k)-sparse network for `task` with the given H, d_head, d_model. With `save_network` the network is
    written there, so every finding replays with `witness run FILE --tokens ... --format FMT --semantics SEM`."""
    if not isinstance(task, TwoSum):
        raise ParameterError(f"search_sparse searches 2-Sum networks, got {type(task).__name__}")
    if weights == "natural":
        check_weights_device(weights, device)
        network = two_sum_sparse.natural(task.n, task.M, task.t, block, k, task.causal)
        source = Weights("natural")
    else:
        architecture = sparse_architecture(task, block, k, H, d_head, d_model)
        network, source = searched_network(architecture, task, weights, seed, train_seeds, train_steps,
                                           device)
        layer = network.layers[0].mixer  # the architecture check made it block-sparse
        if (layer.block, layer.k) != (block, k):
            raise ParameterError(f"{weights} holds ({layer.block},{layer.k})-sparse attention, not ({block},{k})")
    sparse_layer(network)  # refuse a layer that keeps every block before any probe runs
    extra = {"architecture": {"kind": "sparse", "block": block, "k": k, "layers": layer_kinds(network)},
             "weights": source.as_dict()}
    return search_network(network, arith, save_network=save_network, budget=sparse_budget(network, arith.bits),
                          extra=extra, seed=seed, samples=samples, hypothesis_examples=hypothesis_examples,
                          collision_attempts=collision_attempts, max_failures=max_failures, max_pairs=max_pairs)


__all__ = ["search_sparse", "sparse_budget"]
