"""Which block reads and writes which named residual direction, read off the nonzero pattern of the weights.

The graph has one node per residual direction (its basis label) and one per block (`embed:pos`, `embed:tok`,
`blocks.{l}.attn`, `blocks.{l}.mlp`, `unembed`). An edge direction -> block means the block reads it (a nonzero
row of W_Q, W_K, W_V, W_in or W_U; the edge's `roles` say which); block -> direction means the block writes it (a
nonzero column of W_pos, W_E, W_O, b_O, W_out or b_out).

From the graph follow the facts the certifier (`verify.certify`) relies on: a direction that only the position
table writes holds a value that depends on the position alone; one that only the token table writes depends on the
token at that position alone. An attention layer whose keys read only position-only directions has scores that
the query fixes; one whose values read only token-only directions fetches the content of the positions it attends
to, and nothing an earlier layer computed.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np

from witness.ir import Network
from witness.mixers import RECURRENT_MIXERS, RNN

EMBED_POS, EMBED_TOK, UNEMBED = "embed:pos", "embed:tok", "unembed"


def _rows(*arrays: np.ndarray) -> frozenset[int]:
    """Residual directions with a nonzero entry: arrays are [..., d_model, x] (rows = directions)."""
    found = set()
    for array in arrays:
        moved = np.moveaxis(np.asarray(array), -2, 0).reshape(array.shape[-2], -1)
        found |= set(np.flatnonzero((moved != 0).any(axis=1)).tolist())
    return frozenset(found)


def _cols(*arrays: np.ndarray) -> frozenset[int]:
    """Residual directions with a nonzero entry: arrays are [..., d_model] (columns = directions)."""
    found = set()
    for array in arrays:
        flat = np.asarray(array).reshape(-1, array.shape[-1])
        found |= set(np.flatnonzero((flat != 0).any(axis=0)).tolist())
    return frozenset(found)


@dataclass(frozen=True)
class LayerFlow:
    """Read and write sets (direction indices) of one layer's attention and MLP."""

    query: frozenset[int]
    key: frozenset[int]
    value: frozenset[int]
    attn_writes: frozenset[int]
    mlp_reads: frozenset[int]
    mlp_writes: frozenset[int]

    @property
    def reads(self) -> frozenset[int]:
        return self.query | self.key | self.value | self.mlp_reads

    @property
    def writes(self) -> frozenset[int]:
        return self.attn_writes | self.mlp_writes


@dataclass(frozen=True)
class Dataflow:
    """The read/write sets of every block, and the embedding's classification of every direction."""

    labels: tuple[str, ...]
    position_written: frozenset[int]
    token_written: frozenset[int]
    layers: tuple[LayerFlow, ...]
    readout: frozenset[int]

    @property
    def block_written(self) -> frozenset[int]:
        return frozenset().union(*(layer.writes for layer in self.layers))

    @property
    def position_only(self) -> frozenset[int]:
        """Directions whose value depends on the position alone: no token row and no block writes them."""
        return frozenset(range(len(self.labels))) - self.token_written - self.block_written

    @property
    def token_only(self) -> frozenset[int]:
        """Directions whose value depends on the position's own token alone."""
        return self.token_written - self.position_written - self.block_written

    def live_before(self, layer: int) -> frozenset[int]:
        """Directions some block of layer `layer` or later (or the readout) reads."""
        return self.readout.union(*(flow.reads for flow in self.layers[layer:]))

    def graph(self) -> nx.DiGraph:
        graph = nx.DiGraph()
        for index, label in enumerate(self.labels):
            kind = ("position" if index in self.position_only else "token" if index in self.token_only
                    else "computed")
            graph.add_node(label, kind="direction", depends_on=kind)
        blocks = [(EMBED_POS, {}, self.position_written), (EMBED_TOK, {}, self.token_written)]
        for l, flow in enumerate(self.layers):
            blocks.append((f"blocks.{l}.attn", {"query": flow.query, "key": flow.key, "value": flow.value},
                           flow.attn_writes))
            blocks.append((f"blocks.{l}.mlp", {"input": flow.mlp_reads}, flow.mlp_writes))
        blocks.append((UNEMBED, {"readout": self.readout}, frozenset()))
        for name, reads, writes in blocks:
            graph.add_node(name, kind="block")
            for role, directions in reads.items():
                for index in directions:
                    label = self.labels[index]
                    if graph.has_edge(label, name):
                        graph.edges[label, name]["roles"].append(role)
                    else:
                        graph.add_edge(label, name, roles=[role])
            for index in writes:
                graph.add_edge(name, self.labels[index], roles=["write"])
        return graph


def _mixer_reads(mixer) -> tuple[frozenset[int], frozenset[int], frozenset[int]]:
    """(query, key, value) reads of a mixer. For a recurrent mixer the gates (W_alpha, W_beta) count as key reads and
    the general RNN's input W_x as value reads, so that every direction a mixer reads is in one of the three."""
    if isinstance(mixer, RNN):
        return frozenset(), frozenset(), _rows(mixer.W_x)
    gates = [mixer.arrays()[name] for name in ("W_alpha", "W_beta") if name in mixer.array_names]
    return _rows(mixer.W_Q), _rows(mixer.W_K, *gates), _rows(mixer.W_V)


def dataflow(network: Network) -> Dataflow:
    layers = []
    for layer in network.layers:
        attn, mlp = layer.mixer, layer.mlp
        query, key, value = _mixer_reads(attn)
        layers.append(LayerFlow(
            query=query, key=key, value=value,
            attn_writes=_cols(attn.W_O, attn.b_O),
            mlp_reads=frozenset() if mlp is None else _rows(mlp.W_in),
            mlp_writes=frozenset() if mlp is None else _cols(mlp.W_out, mlp.b_out)))
    return Dataflow(network.basis.labels, _cols(network.embedding.W_pos), _cols(network.embedding.W_E),
                    tuple(layers), _rows(network.readout.W_U))


#: Above this many residual directions `draw` gives one row per label group (`R1[*]`) instead of one per direction.
MAX_ROWS = 120
#: Cell colours of `draw`: nothing, read, written, both.
CELL_COLOURS = ("#ffffff", "#9ecae1", "#fc9272", "#c994c7")


def _group(label: str) -> str:
    """The group of a basis label: `R1[0]` -> `R1`, `type:z1` -> `type`, `one` -> `one`."""
    return label.split("[", 1)[0].split(":", 1)[0]


def draw(network: Network, path=None):
    """The dataflow as a grid, saved to `path` when given; returns the Figure. Rows: residual directions (basis
    labels, grouped, one row per group past `MAX_ROWS` directions) with what their value depends on; columns:
    blocks in execution order (embedding, each layer's mixer and MLP, readout). A cell is coloured when the block
    reads (blue), writes (red) or both (purple) the direction, and its letters say how: Q, K, V (query, key,
    value; a recurrent mixer's gates count as K, an RNN's input as V), in (MLP input), U (unembedding), W
    (write)."""
    from matplotlib.colors import ListedColormap
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    flow = dataflow(network)
    columns: list[tuple[str, dict[str, frozenset[int]], frozenset[int]]] = [
        ("embed\npos", {}, flow.position_written), ("embed\ntok", {}, flow.token_written)]
    for l, (layer, lf) in enumerate(zip(network.layers, flow.layers)):
        columns.append((f"blocks.{l}\n{layer.mixer.kind}", {"Q": lf.query, "K": lf.key, "V": lf.value},
                        lf.attn_writes))
        if layer.mlp is not None:
            columns.append((f"blocks.{l}\nmlp", {"in": lf.mlp_reads}, lf.mlp_writes))
    columns.append(("unembed", {"U": flow.readout}, frozenset()))
    depends = {index: "position" for index in flow.position_only} | {index: "token" for index in flow.token_only}
    groups: dict[str, list[int]] = {}
    for index, label in enumerate(flow.labels):
        groups.setdefault(_group(label), []).append(index)
    if len(flow.labels) <= MAX_ROWS:
        rows = [(label, [index]) for index, label in enumerate(flow.labels)]
    else:
        rows = [(f"{name} ({len(indices)})" if len(indices) > 1 else flow.labels[indices[0]], indices)
                for name, indices in groups.items()]
    codes = np.zeros((len(rows), len(columns)), dtype=int)
    texts = [["" for _ in columns] for _ in rows]
    for r, (_, indices) in enumerate(rows):
        members = set(indices)
        for c, (_, reads, writes) in enumerate(columns):
            roles = [role for role, directions in reads.items() if members & directions]
            wrote = bool(members & writes)
            codes[r, c] = (1 if roles else 0) + (2 if wrote else 0)
            texts[r][c] = "".join(roles) + (" W" if roles and wrote else "W" if wrote else "")
    figure = Figure(figsize=(3.2 + 0.8 * len(columns), 1.9 + 0.22 * len(rows)), layout="constrained")
    axes = figure.add_subplot()
    axes.imshow(codes, cmap=ListedColormap(CELL_COLOURS), vmin=-0.5, vmax=3.5, aspect="auto",
                interpolation="nearest")
    for r, line in enumerate(texts):
        for c, text in enumerate(line):
            if text:
                axes.text(c, r, text, ha="center", va="center", fontsize=6.5)
    kinds = [{depends.get(index, "computed") for index in indices} for _, indices in rows]
    axes.set_yticks(range(len(rows)), [f"{label}  ({kind.pop() if len(kind) == 1 else 'mixed'})"
                                       for (label, _), kind in zip(rows, kinds)], fontsize=7)
    axes.set_xticks(range(len(columns)), [name for name, _, _ in columns], fontsize=7)
    axes.xaxis.tick_top()
    axes.tick_params(length=0)
    boundaries = [r for r in range(1, len(rows)) if _group(rows[r][0]) != _group(rows[r - 1][0])]
    for r in boundaries:
        axes.axhline(r - 0.5, color="#666666", linewidth=0.8)
    for c in range(1, len(columns)):  # dark where a layer (or the readout) begins, light inside one
        inside = columns[c][0].startswith("embed") or columns[c][0].endswith("mlp")
        axes.axvline(c - 0.5, color="#cccccc" if inside else "#666666", linewidth=0.8 if inside else 1.2)
    axes.set_title(f"Dataflow of {getattr(network.task, 'name', None) or 'the network'}: which block reads and "
                   "writes which residual direction\n(row label: what the direction's value depends on)",
                   fontsize=9)
    recurrent = any(isinstance(layer.mixer, RECURRENT_MIXERS) for layer in network.layers)
    read = "read (Q, K, V: query, key, value; in: MLP input; U: unembedding" + (
        "; recurrent mixers: gates count as K, an RNN's input as V)" if recurrent else ")")
    figure.legend(handles=[Patch(facecolor=colour, edgecolor="#666666", label=words) for colour, words in zip(
        CELL_COLOURS[1:], (read, "written (W)", "read and written"))], loc="outside lower center", ncols=1,
        fontsize=7, frameon=False)
    if path is not None:
        figure.savefig(path, dpi=110, bbox_inches="tight")
    return figure
