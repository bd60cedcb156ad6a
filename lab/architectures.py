"""The architectures the search probes (docs/conventions.md §6), as `lab.train.Architecture`s, and their networks.

* `hybrid_architecture(...)`: Theorem 1.1's negative side. `L_full` causal full-attention layers; before each of
  them a gap of recurrent (linear-attention) layers and one more gap after the last, each gap `linear_per_gap`
  layers long (one int for every gap, or one int per gap); an MLP after every mixing layer.
* `full_architecture(...)`: CPW's negative side, a plain stack of causal full-attention layers, an MLP after each.
* `sparse_architecture(...)`: Theorem 1.2's, one (B,k)-block-sparse attention layer read at every position.

`architecture_of_kind(kind, task, ...)` is any of the three by name (`KINDS`, `witness train --arch`), given exactly
the options its shape needs. `cannot_express(architecture, task)` says why no weights of an architecture answer a
task, where a short argument proves it (the probes' rows carry it as `expressive: false` and `why`).

`hybrid(task, ...)` and `full(task, ...)` are those architectures with seeded random weights;
`network(architecture, task, weights, seed)` gives the IR network: `random` weights (the trainer's seeded
initialisation), `trained` (the shared trainer for a fixed number of steps, several seeds, the best kept), or a FILE
(loaded, and refused unless it is a network for the same task with the requested architecture).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from witness.errors import ParameterError
from witness.io import load
from witness.ir import Network
from witness.mixers import RECURRENT_MIXERS, BlockSparseAttention
from witness.tasks import Composition
from witness.tasks.base import check_int
from lab.rates import check_device_name

#: MLP width after each mixing layer, as a multiple of d_model (GPT-2's ratio).
MLP_RATIO = 4
#: `weights="trained"`: seeds tried (each trained for the trainer's DEFAULT_STEPS unless told otherwise).
TRAIN_SEEDS = 3


def _training():
    """lab.train (torch) is imported only when an architecture is built, so `witness` starts without torch."""
    from lab import train

    return train


def gap_lengths(L_full: int, linear_per_gap: int | Sequence[int]) -> tuple[int, ...]:
    """The recurrent layers in each of the L_full + 1 gaps."""
    L_full = check_int("L_full", L_full, 0)
    if isinstance(linear_per_gap, Sequence):
        gaps = tuple(check_int("linear_per_gap", g, 0) for g in linear_per_gap)
        if len(gaps) != L_full + 1:
            raise ParameterError(f"linear_per_gap lists {len(gaps)} gaps; {L_full} full layers have {L_full + 1}")
        return gaps
    return (check_int("linear_per_gap", linear_per_gap, 0),) * (L_full + 1)


def _mlp_width(d_model: int, mlp_ratio: int) -> int | None:
    return check_int("mlp_ratio", mlp_ratio, 0) * check_int("d_model", d_model, 1) or None


def hybrid_architecture(L_full: int, linear_per_gap: int | Sequence[int], mixer: str, H: int, d_head: int,
                        d_model: int, mlp_ratio: int = MLP_RATIO):
    """`Architecture`: gap, full layer, gap, ..., full layer, gap; every layer followed by an MLP of width
    mlp_ratio x d_model (0: no MLPs)."""
    train = _training()
    recurrent = [cls.kind for cls in RECURRENT_MIXERS]
    if mixer not in recurrent:
        raise ParameterError(f"mixer must be a recurrent kind, one of {recurrent}; got {mixer!r}")
    d_mlp = _mlp_width(d_model, mlp_ratio)
    recurrent_layer = train.LayerSpec(mixer=mixer, d_mlp=d_mlp)
    full_layer = train.LayerSpec(d_mlp=d_mlp)
    layers: list = []
    for g, gap in enumerate(gap_lengths(L_full, linear_per_gap)):
        layers += [recurrent_layer] * gap + ([full_layer] if g < L_full else [])
    if not layers:
        raise ParameterError("the hybrid has no layers: give at least one full layer or one recurrent layer")
    return train.Architecture(H=H, d_head=d_head, d_model=d_model, layers=tuple(layers))


def full_architecture(layers: int, H: int, d_head: int, d_model: int, mlp_ratio: int = MLP_RATIO):
    """`Architecture`: `layers` causal softmax-attention layers, each followed by an MLP of width
    mlp_ratio x d_model (0: no MLPs)."""
    train = _training()
    count = check_int("layers", layers, 1)
    spec = train.LayerSpec(d_mlp=_mlp_width(d_model, mlp_ratio))
    return train.Architecture(H=H, d_head=d_head, d_model=d_model, layers=(spec,) * count)


def sparse_architecture(task, block: int, k: int, H: int, d_head: int, d_model: int, mlp_ratio: int = MLP_RATIO):
    """`Architecture`: one (block, k)-sparse attention layer (causal as the task is), then an MLP (mlp_ratio x
    d_model wide; 2-Sum's comparison needs one), read at every position."""
    train = _training()
    layer = train.LayerSpec(causal=task.causal,
                            d_mlp=check_int("mlp_ratio", mlp_ratio, 1) * check_int("d_model", d_model, 1),
                            mixer=BlockSparseAttention.kind, options={"block": block, "k": k})
    return train.Architecture(H=H, d_head=d_head, d_model=d_model, layers=(layer,), read="all")


@dataclass(frozen=True)
class Kind:
    """An architecture kind of `architecture_of_kind`: the options its shape needs (it takes no others), where its
    networks are read (`Architecture.read`), and the MLP ratio it trains with when none is given."""

    options: tuple[str, ...]
    read: str
    mlp_ratio: int


#: The architecture kinds by name. Full and hybrid train without MLPs unless told otherwise (their pointer look-ups
#: train more reliably without); sparse with them (2-Sum's comparison needs one).
KINDS = {
    "full": Kind(("layers",), "last", 0),
    "hybrid": Kind(("full_layers", "linear_per_gap", "mixer"), "last", 0),
    "sparse": Kind(("block", "k"), "all", MLP_RATIO),
}


def architecture_of_kind(kind: str, task, *, H: int, d_head: int, d_model: int, mlp_ratio: int | None = None,
                         **options: Any):
    """The `Architecture` of kind `kind` (`KINDS`) for `task`: `options` are the shape options of every kind, None
    where not given, and exactly those of `kind` must be given; `mlp_ratio` None is the kind's own. A task read at
    every position needs a kind read there, and a task read at its last position (or answered by generated tokens,
each step read at its last position) one read there."""
    if kind not in KINDS:
        raise ParameterError(f"architecture kind must be one of {', '.join(KINDS)}; got {kind!r}")
    spec = KINDS[kind]
    given = sorted(name for name, value in options.items() if value is not None)
    if given != sorted(spec.options):
        raise ParameterError(f"architecture {kind} takes {', '.join(spec.options)} and no other architecture "
                             f"options; given: {', '.join(given) or 'none'}")
    generated = getattr(task, "generated_tokens", 0)
    # A task answered by generated tokens runs one step per token, each read at its last position, whatever its
    # read positions in the full transcript.
    read = "last" if generated or len(task.read_positions) == 1 else "all"
    if spec.read != read:
        fitting = " or ".join(name for name, other in KINDS.items() if other.read == read)
        where = {"all": "every position", "last": "its last position only"}
        said = f"answered by {generated} generated tokens, each step read at {where[read]}" if generated else \
            f"read at {where[read]}"
        raise ParameterError(f"{task.name} is {said}, architecture {kind} at {where[spec.read]}: train it with "
                             f"{fitting}")
    shape = {"H": H, "d_head": d_head, "d_model": d_model,
             "mlp_ratio": spec.mlp_ratio if mlp_ratio is None else mlp_ratio}
    if kind == "full":
        return full_architecture(options["layers"], **shape)
    if kind == "hybrid":
        return hybrid_architecture(options["full_layers"], options["linear_per_gap"], options["mixer"], **shape)
    return sparse_architecture(task, options["block"], options["k"], **shape)


def hybrid(task, L_full: int, linear_per_gap: int | Sequence[int], mixer: str, H: int, d_head: int, d_model: int,
           seed: int = 0) -> Network:
    """The hybrid for `task` with seeded random weights."""
    return hybrid_architecture(L_full, linear_per_gap, mixer, H, d_head, d_model).initial_network(task, seed)


def full(task, layers: int, H: int, d_head: int, d_model: int, seed: int = 0) -> Network:
    """The full-attention stack for `task` with seeded random weights."""
    return full_architecture(layers, H, d_head, d_model).initial_network(task, seed)


#: The one-layer forms `cannot_express` proves inexpressive at L = 1, by mixer: what the layer's output at a position
#: with a fixed query q is. Plain linear attention and retnet (its decay gamma is a constant) read a sum of one term
#: per position; softmax attention divides that sum by a positive normaliser, which keeps the sign of a logit
#: difference a sum only with one head (two heads add two ratios over different normalisers, which can change sign
#: as a product does).
ADDITIVE_READS = {
    "linear": "plain linear attention: o = sum_s (phi(q) . phi(k_s)) v_s W_O + b_O",
    "retnet": "retnet: o = sum_s gamma^(n-1-s) (q . k_s) v_s W_O + b_O",
    "attention": "one softmax head: o = sum_s exp(q . k_s) v_s W_O / Z + b_O, Z = sum_s exp(q . k_s) > 0",
}


def cannot_express(architecture, task) -> str | None:
    """Why no weights of `architecture` (a `lab.train.Architecture`) answer every input of `task` in exact
    arithmetic, where a short argument proves it; None where none is known (which does not mean that some do).
    Proven here: L = 1 composition (m >= 2, read at its query token) by one layer without an MLP whose mixer is
    plain (unnormalised) linear attention, retnet or a single softmax head (`ADDITIVE_READS`)."""
    # The argument. At L = 1 the query w has one value (there is no w_l) and the answer is read at w's own position,
    # so the residual entering the layer there, W_E[w] + W_pos[n-1], is the same in every input, and so is the
    # layer's query q there; the key and value of a position s depend on s and its token only. By ADDITIVE_READS
    # the layer's output at the read position is then a sum of one term per (position, token) -- over all heads for
    # linear attention and retnet -- divided by Z > 0 for softmax (Z = 1 otherwise). With no MLP the logits are
    # (x + o) W_U + b_U, so for the answers 0 and 1, F = Z (logit_0 - logit_1) is a constant plus one term per
    # (position, token). Fix the table but z_1[0] and z_1[1]: the inputs (z_0; z_1[0], z_1[1]) = (0; 0, 1) and
    # (1; 1, 0) answer 0, and (1; 0, 1) and (0; 1, 0) answer 1, so a network right on all four has F > 0 on the
    # first pair and F < 0 on the second (a tie is wrong). Both pairs hold the same (position, token) terms, so F
    # sums to the same over each pair: a contradiction, in every quadruple of this shape. Rounding is not additive,
    # so at a finite format the argument holds up to rounding only. An MLP after the layer is a nonlinear function
    # of the sum, which the argument does not bound: no label there.
    if not (isinstance(task, Composition) and task.L == 1 and task.m >= 2
            and task.read_positions == (task.segment("w").start,)):
        return None
    if len(architecture.layers) != 1 or architecture.layers[0].d_mlp is not None:
        return None
    layer = architecture.layers[0]
    plain = layer.mixer == "retnet" or (layer.mixer == "linear" and not dict(layer.options).get("normalize"))
    if not (plain or (layer.mixer == "attention" and architecture.H == 1)):
        return None
    return (f"one layer of {ADDITIVE_READS[layer.mixer]}, no MLP, at L = 1: its query at the read position (the "
            "one query token) is the same for every input, so each logit difference is, times a positive number, "
            "a sum of one term per position, and no such sum answers all of (z_0; z_1[0], z_1[1]) = (0; 0, 1), "
            "(1; 1, 0), (1; 0, 1), (0; 1, 0) (answers 0, 0, 1, 1) in exact arithmetic "
            "(lab.architectures.cannot_express)")


@dataclass(frozen=True)
class Weights:
    """Where a searched network's weights came from: `source` is random, trained or the file; `training` lists
    each seed's `TrainReport` (as dicts) when trained, the kept one first."""

    source: str
    training: tuple[dict[str, Any], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source}
        if self.training:
            out["best_accuracy"] = self.training[0]["accuracy"]
            out["training"] = [{k: v for k, v in r.items() if k != "history"} for r in self.training]
        return out


def layer_kinds(network: Network) -> list[str]:
    return [layer.mixer.kind for layer in network.layers]


def _check_matches(loaded: Network, architecture, task, path: str) -> None:
    if loaded.task != task:
        raise ParameterError(f"{path} is a network for {loaded.meta.task} {loaded.meta.params}, not for {task}")
    got = (layer_kinds(loaded), loaded.budget().H, loaded.budget().d_head, loaded.d_model)
    wanted = ([spec.mixer for spec in architecture.layers], architecture.H, architecture.d_head, architecture.d_model)
    if got != wanted:
        raise ParameterError(f"{path} has layers {got[0]}, H {got[1]}, d_head {got[2]}, d_model {got[3]}; the "
                             f"requested architecture has {wanted[0]}, H {wanted[1]}, d_head {wanted[2]}, "
                             f"d_model {wanted[3]}")


def check_weights_device(weights: str, device: str) -> None:
    """A ParameterError where `device` names somewhere other than the CPU for weights that do not train there (a
    GPU asked for and silently unused would read as a GPU run)."""
    if check_device_name(device) != "cpu" and weights != "trained":
        raise ParameterError(f"device {device} is where trained weights train; {weights!r} weights are not trained")


def network(architecture, task, weights: str = "random", seed: int = 0, train_seeds: int = TRAIN_SEEDS,
            train_steps: int | None = None, device: str = "cpu") -> tuple[Network, Weights]:
    """The network to search: `weights` is `random`, `trained`, or a path to a saved network (.npz/.safetensors,
    e.g. written by `witness train`).

    Trained: seeds seed, seed+1, ... (`train_seeds` of them), each for exactly `train_steps` steps (None: the
    trainer's default) on `device` (`lab.train.train`'s) with the trainer's defaults otherwise; the network with the
    best held-out accuracy is kept (ties: the earlier seed)."""
    seed = check_int("seed", seed, 0)
    check_weights_device(weights, device)
    if weights == "random":
        return architecture.initial_network(task, seed), Weights("random")
    if weights == "trained":
        train = _training()
        runs = []
        for s in range(seed, seed + check_int("train_seeds", train_seeds, 1)):
            steps = {} if train_steps is None else {"steps": train_steps}
            runs.append(train.train(architecture, task, seed=s, device=device, **steps))
        runs.sort(key=lambda run: -run[1].accuracy)  # stable: the earlier seed wins a tie
        return runs[0][0], Weights("trained", tuple(report.as_dict() for _, report in runs))
    loaded = load(weights)
    _check_matches(loaded, architecture, task, weights)
    return loaded, Weights(weights)


__all__ = ["hybrid", "full", "hybrid_architecture", "full_architecture", "sparse_architecture", "architecture_of_kind",
           "KINDS", "Kind", "network", "check_weights_device", "gap_lengths", "layer_kinds", "Weights", "MLP_RATIO",
           "cannot_express", "ADDITIVE_READS"]
