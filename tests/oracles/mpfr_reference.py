"""A slow, scalar, obviously-correct reference for the `strict` semantics, built on MPFR (`witness.arith.mpfr`).

`reference_run(network, tokens, fmt)` runs one token sequence through a Network with one Python scalar per
value, in exactly the operation order that `witness.execute` documents (and that its vectorised `strict`
arithmetic must reproduce bit for bit):

* every weight rounded to the format once;
* embedding: W_E[t] + W_pos[i], one rounded add;
* dot products accumulate in index order -- acc = x_0 * y_0, then acc = acc + x_k * y_k -- with a rounding after
  every multiply and every add; q, k, v, head outputs, MLP layers and the readout are such dot products plus a
  rounded bias add;
* each layer's mixer is its kind's reference (`witness.mixers.MIXERS[kind].reference`, in the kind's module):
  attention computes q.k for every (query, key) pair, masked pairs included (so a masked score can overflow a
  fixed format, as in the executor), subtracts the maximum allowed score, takes a correctly rounded exp, sums
  the numerators of all keys in index order (masked keys contribute an exact 0), divides, and contracts with v
  in index order; (B,k)-block-sparse attention sums each block's keys in index order, divides by the block's
  length, and keeps each query's own block and its k best; recurrent mixers run position by position from a zero
  state, each state entry updated by its own rounded multiplies and adds in the order of
  `witness.mixers.matrix_state` (e.g. decay: S[i][j] = alpha_i S[i][j] + k_i v_j), read-outs S^T q as dot products
  in index order, sigmoid(u) as 1 / (1 + exp(0 - u));
* heads are added in head order, then b_O; each block's output is added to the residual stream.

The references share no code with the executor or the kernels (tests/test_strict_reference.py checks it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from witness.arith.formats import Format
from witness.arith.mpfr import scalars_for
from witness.errors import InputError
from witness.ir import Network
from witness.mixers import MIXERS


@dataclass(frozen=True, eq=False)
class ReferenceOutputs:
    """`logits` [n_read, d_vocab_out] as float64 (exact: every format value is a float64); `predictions`
    [n_read], the unique argmax or -1 on a tie or a NaN logit."""

    logits: np.ndarray
    predictions: np.ndarray
    read_positions: tuple[int, ...]


def reference_run(network: Network, tokens, fmt: Format) -> ReferenceOutputs:
    """Run `network` on one token sequence under the strict semantics of `fmt`, one scalar at a time."""
    ops = scalars_for(fmt)
    sequence = [int(t) for t in np.asarray(tokens).reshape(-1)]
    if not sequence or len(sequence) > network.n_ctx or min(sequence) < 0 or max(sequence) >= network.d_vocab:
        raise InputError(f"tokens {sequence} do not fit the network (n_ctx {network.n_ctx}, "
                         f"vocabulary {network.d_vocab})")
    length = len(sequence)

    def weight(array, name):
        return _nested(np.asarray(array), lambda x: ops.value(x, f"weights {name}"))

    def dot(xs, ys, operation):
        total = ops.mul(xs[0], ys[0], operation)
        for a, b in zip(xs[1:], ys[1:]):
            total = ops.add(total, ops.mul(a, b, operation), operation)
        return total

    def column(matrix, c):
        return [row[c] for row in matrix]

    W_E, W_pos = weight(network.embedding.W_E, "W_E"), weight(network.embedding.W_pos, "W_pos")
    x = [[ops.add(W_E[t][c], W_pos[i][c], "embed") for c in range(network.d_model)]
         for i, t in enumerate(sequence)]
    read = network.read_positions(length)
    first = 0  # x holds positions first .. length-1
    for l, layer in enumerate(network.layers):
        mixer = MIXERS[layer.mixer.kind]
        # The last layer computes from the first read position on; what the readout does not read, nothing does.
        first = read[0] if l == len(network.layers) - 1 else 0
        if mixer.from_query:
            mixed = mixer.reference(layer.mixer, x, ops, weight, dot, column, from_query=first)
        else:
            mixed = mixer.reference(layer.mixer, x, ops, weight, dot, column)[first:]
        x = [[ops.add(row[c], mixed_row[c], "residual") for c in range(network.d_model)]
             for row, mixed_row in zip(x[first:], mixed)]
        if layer.mlp is not None:
            W_in, b_in = weight(layer.mlp.W_in, "W_in"), weight(layer.mlp.b_in, "b_in")
            W_out, b_out = weight(layer.mlp.W_out, "W_out"), weight(layer.mlp.b_out, "b_out")
            hidden = [[ops.relu(ops.add(dot(row, column(W_in, u), "mlp"), b_in[u], "mlp"))
                       for u in range(layer.mlp.d_mlp)] for row in x]
            out = [[ops.add(dot(hidden_row, column(W_out, c), "mlp"), b_out[c], "mlp")
                    for c in range(network.d_model)] for hidden_row in hidden]
            x = [[ops.add(row[c], out_row[c], "residual") for c in range(network.d_model)]
                 for row, out_row in zip(x, out)]

    W_U, b_U = weight(network.readout.W_U, "W_U"), weight(network.readout.b_U, "b_U")
    logits = [[ops.add(dot(x[i - first], column(W_U, v), "readout"), b_U[v], "readout")
               for v in range(network.d_vocab_out)] for i in read]
    predictions = [_unique_argmax(row, ops) for row in logits]
    return ReferenceOutputs(np.array([[ops.to_float(v) for v in row] for row in logits], dtype=np.float64),
                            np.array(predictions, dtype=np.int64), read)


def _unique_argmax(row, ops) -> int:
    if any(ops.is_nan(v) for v in row):
        return -1
    best = max(row)
    winners = [index for index, value in enumerate(row) if value == best]
    return winners[0] if len(winners) == 1 else -1


def _nested(array: np.ndarray, convert):
    """An ndarray as nested lists of converted scalars (row-major)."""
    if array.ndim == 0:
        return convert(float(array))
    return [_nested(part, convert) for part in array]


__all__ = ["reference_run", "ReferenceOutputs"]
