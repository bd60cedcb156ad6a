"""Pictures of a network at work, as matplotlib Figures (for notebooks, `witness inspect --plot`, reports).

    fig = lab.plots.residual_stream(network, tokens)   # rows: embedding and each block; columns: basis labels
    fig.savefig("resid.png")

Every function takes a Network and, where it runs one, the tokens of a single input; values come from the
float64 executor's trace, so what is drawn is what the verifier checks. Axes carry the network's basis labels
(`type:z1`, `R1[0]`, ...) and, for positions, the task segment and token id. The figures are built without
pyplot, so nothing here touches the interactive backend.
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:
    from matplotlib.figure import Figure
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("lab.plots needs matplotlib: pip install 'witness[plots]'") from exc

from witness.errors import InputError, ParameterError
from witness.execute import check_network_tokens, logit_margins, run
from witness.ir import Network
from witness.mixers import RECURRENT_MIXERS

#: Inches per heatmap cell; figures grow with the number of labels so that every label stays readable.
CELL = 0.28


def position_labels(network: Network, tokens: np.ndarray) -> list[str]:
    """`segment[index]=token` for each position when the task has named segments (composition), else `pos:token`."""
    segments = getattr(network.task, "segments", None)
    labels = [f"{pos}:{int(token)}" for pos, token in enumerate(tokens)]
    for segment in segments or ():
        for offset in range(segment.length):
            pos = segment.start + offset
            if pos < len(tokens):
                labels[pos] = f"{segment.name}[{offset}]={int(tokens[pos])}"
    return labels


def single_input(network: Network, tokens: Any) -> np.ndarray:
    batch = check_network_tokens(network, tokens)
    if batch.shape[0] != 1:
        raise InputError(f"plots draw one input at a time, got a batch of {batch.shape[0]}")
    return batch[0]


def _heatmap(ax, values: np.ndarray, row_labels: list[str], col_labels: list[str], title: str,
             symmetric: bool = True, colorbar: bool = True) -> None:
    limit = float(np.abs(values).max()) or 1.0
    options = {"cmap": "RdBu_r", "vmin": -limit, "vmax": limit} if symmetric else {"cmap": "viridis", "vmin": 0.0}
    image = ax.imshow(values, aspect="auto", interpolation="nearest", **options)
    ax.set_xticks(range(len(col_labels)), col_labels, rotation=90, fontsize=7)
    ax.set_yticks(range(len(row_labels)), row_labels, fontsize=7)
    ax.set_title(title, fontsize=9)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.03, pad=0.01)


def _figure(width: float, height: float) -> Figure:
    return Figure(figsize=(max(4.0, width), max(2.5, height)), layout="constrained")


def residual_stream(network: Network, tokens: Any, position: int = -1) -> Figure:
    """The residual stream at one position (default: the last) after the embedding and after each block.
    Rows are TransformerLens hook names, columns the basis labels."""
    row = single_input(network, tokens)
    if not -len(row) <= position < len(row):
        raise InputError(f"position {position} is outside the {len(row)} tokens")
    trace = run(network, row, trace=True).trace
    hooks = [name for name in trace if name == "hook_embed" or "hook_resid" in name]
    values = np.stack([trace[name][0, position] for name in hooks])
    fig = _figure(CELL * network.d_model + 3, CELL * len(hooks) + 2)
    label = position_labels(network, row)[position]
    _heatmap(fig.add_subplot(), values, hooks, list(network.basis.labels), f"residual stream at {label}")
    return fig


def attention_patterns(network: Network, tokens: Any, layers: list[int] | None = None) -> Figure:
    """Each head's attention pattern (query position x key position) in the chosen layers (default: every layer
    with one, i.e. every layer but the recurrent ones)."""
    row = single_input(network, tokens)
    chosen = _pattern_layers(network) if layers is None else list(layers)
    for l in chosen:
        if not 0 <= l < len(network.layers):
            raise ParameterError(f"layer {l} is outside [0, {len(network.layers)})")
        if l not in _pattern_layers(network):
            raise ParameterError(f"blocks.{l} is a {network.layers[l].mixer.kind} layer, which has no attention pattern")
    if not chosen:
        raise ParameterError("the network has no attention layer to draw")
    trace = run(network, row, trace=True).trace
    labels = position_labels(network, row)
    panels = [(l, h) for l in chosen for h in range(network.layers[l].mixer.n_heads)]
    side = CELL * len(row) + 2
    fig = _figure(side * len(panels), side)
    for k, (l, h) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), k + 1)
        pattern = trace[f"blocks.{l}.attn.hook_pattern"][0, h]
        _heatmap(ax, pattern, labels if k == 0 else [""] * len(labels), labels, f"blocks.{l}.attn head {h}",
                 symmetric=False, colorbar=k == len(panels) - 1)
    return fig


#: Which axes of each array (after choosing a head) run over the residual stream, and so carry basis labels.
RESIDUAL_AXES = {"W_E": (1,), "W_pos": (1,), "W_Q": (0,), "W_K": (0,), "W_V": (0,), "W_O": (1,), "b_O": (1,),
                 "W_in": (0,), "W_out": (1,), "b_out": (1,), "W_U": (0,)}


def weight_matrix(network: Network, name: str, head: int = 0) -> Figure:
    """One array of the state dict (e.g. `blocks.1.attn.W_Q`) with basis labels on its residual-stream axes;
    for per-head arrays, the chosen head. Vectors are drawn as one row."""
    state = network.state_dict()
    if name not in state:
        raise ParameterError(f"no array {name!r}; the network has {', '.join(list(state)[:8])}, ...")
    values = state[name]
    if values.ndim == 3:
        if not 0 <= head < values.shape[0]:
            raise ParameterError(f"head {head} is outside [0, {values.shape[0]})")
        values = values[head]
    values = np.atleast_2d(values)
    residual = RESIDUAL_AXES.get(name.rsplit(".", 1)[-1], ())
    rows, cols = ([list(network.basis.labels) if axis in residual else [str(i) for i in range(size)]
                   for axis, size in enumerate(values.shape)])
    fig = _figure(CELL * values.shape[1] + 3, CELL * values.shape[0] + 2)
    title = name + (f" head {head}" if state[name].ndim == 3 else "")
    _heatmap(fig.add_subplot(), values, rows, cols, title)
    return fig


def margins(network: Network, tokens: Any) -> np.ndarray:
    """Per input: the answer's logit minus the best other logit, least over the read positions (float64 executor,
    `witness.execute.logit_margins`). Positive means correct; zero is a tie, which counts as a failure."""
    task = network.task
    if task is None:
        raise ParameterError("the network names no task, so there is no answer to measure a margin against")
    batch = task.check_tokens(tokens)
    return logit_margins(run(network, batch).logits, task.answers(batch).reshape(len(batch), -1))


def margin_histogram(network: Network, tokens: Any, bins: int = 40) -> Figure:
    """Histogram of `margins` over the given inputs; a line marks zero (to its left: wrong answers)."""
    values = margins(network, tokens).ravel()
    fig = _figure(6, 3.5)
    ax = fig.add_subplot()
    ax.hist(values, bins=bins, color="tab:blue")
    ax.axvline(0.0, color="tab:red", linewidth=1)
    wrong = int((values <= 0).sum())
    ax.set_title(f"logit margin of the answer over {values.size} read positions ({wrong} not positive)", fontsize=9)
    ax.set_xlabel("answer logit - best other logit")
    ax.set_ylabel("count")
    return fig


def _pattern_layers(network: Network) -> list[int]:
    """The layers whose mixer has an attention pattern: all but the recurrent ones."""
    return [l for l, layer in enumerate(network.layers) if not isinstance(layer.mixer, RECURRENT_MIXERS)]


def overview(network: Network, tokens: Any) -> Figure:
    """What `witness inspect --plot` draws for one input: the residual stream at the last position after every
    block (basis labels on the x axis) above every head's attention row for that position."""
    row = single_input(network, tokens)
    trace = run(network, row, trace=True).trace
    hooks = [name for name in trace if name == "hook_embed" or "hook_resid" in name]
    heads = [(l, h) for l in _pattern_layers(network) for h in range(network.layers[l].mixer.n_heads)]
    labels = position_labels(network, row)
    fig = _figure(CELL * max(network.d_model, len(row)) + 4, CELL * (len(hooks) + len(heads)) + 4)
    top, bottom = fig.subplots(2, 1, height_ratios=[len(hooks) + 1, len(heads) + 1]) if heads else (
        fig.add_subplot(), None)
    values = np.stack([trace[name][0, -1] for name in hooks])
    _heatmap(top, values, hooks, list(network.basis.labels), f"residual stream at {labels[-1]}")
    if bottom is not None:
        rows = np.stack([trace[f"blocks.{l}.attn.hook_pattern"][0, h, -1] for l, h in heads])
        _heatmap(bottom, rows, [f"blocks.{l}.attn head {h}" for l, h in heads], labels,
                 f"attention from {labels[-1]}", symmetric=False)
    return fig


__all__ = ["residual_stream", "attention_patterns", "weight_matrix", "margins", "margin_histogram", "overview",
           "position_labels"]
