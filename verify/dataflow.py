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
from witness.mixers import RNN

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


def draw(network: Network, path) -> None:
    """Save the dataflow graph as an image: blocks in execution order left to right, directions between them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    graph = dataflow(network).graph()
    blocks = [node for node, data in graph.nodes(data=True) if data["kind"] == "block"]
    directions = [node for node, data in graph.nodes(data=True) if data["kind"] == "direction"]
    position = {name: (2.0 * column, 0.0) for column, name in enumerate(blocks)}
    for row, name in enumerate(directions):
        writers = [position[source][0] for source in graph.predecessors(name)]
        position[name] = (float(np.mean(writers)) + 1.0 if writers else -1.0, -1.0 - row)
    colours = {"position": "#4c72b0", "token": "#55a868", "computed": "#c44e52"}
    node_colours = ["#dddddd" if graph.nodes[node]["kind"] == "block" else colours[graph.nodes[node]["depends_on"]]
                    for node in graph.nodes]
    figure, axes = plt.subplots(figsize=(2 + 1.6 * len(blocks), 1 + 0.35 * len(directions)))
    nx.draw_networkx(graph, position, ax=axes, node_color=node_colours, node_size=260, font_size=7,
                     arrowsize=6, width=0.4, edge_color="#888888")
    axes.set_title("dataflow: blue = position-only, green = token-only, red = computed by a block")
    axes.set_axis_off()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
