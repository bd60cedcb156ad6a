"""certify for one-layer 2-Sum networks under (B,k)-block-sparse attention: the block-choice lemma, proven from
the weights, then the 2-Sum certifier (verify/certify_two_sum.py) for everything after it.

The 2-Sum certifier's argument needs one fact about which keys a query attends to: whenever some j != i is a
partner of i (x_i + x_j = t mod M; j < i when causal), query i attends to at least one partner j' != i, and every
key it attends to is one it could see under full attention. Full attention has this for free. Block-sparse
attention has it when the block summaries can tell a block holding a partner from one that does not:

  (Q) the query of token a has exactly one non-zero coordinate e(a), and it is positive (at least lambda_a);
  (K) every key coordinate is >= 0, and key coordinate e(a) of token u is exactly 0 unless u is a's partner
      (t - a) mod M, for which it is positive (at least kappa_a);
  (k) the mixer keeps k >= 1 other blocks, and is causal exactly when the task is.

Then a block without a partner of a has summary coordinate e(a) equal to an exact 0 (a sum of exact zeros,
divided), so block score 0 (every other product is 0 times a finite summary); a block holding one has
summary coordinate at least round(kappa_a / B) (rounded sums of non-negative terms never drop below a term, and
rounding is monotone) and block score at least round(lambda_a round(kappa_a / B)) -- which must be > 0 in the
format (checked here; it fails only by underflow). So a candidate block holding a partner outscores every block
that holds none; with k >= 1 the best candidate holds a partner. If the partner j is in i's own block, i sees it
(its own block is always kept; under causal masking it sees j < i). Otherwise j's block is a candidate (causal:
j < i, so it lies before i's block) with a positive score, so i keeps some block holding a partner j' != i.

q and k are enclosed with `verify.enclosure.Rounding` exactly as the executor computes them (strict: every step
rounded; theory: exact), from the token-only directions that `verify.dataflow` finds they read. Any failed
assumption answers `unknown` with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verify.certify_two_sum import FullSelection, certify_two_sum
from verify.dataflow import dataflow
from verify.enclosure import Rounding, Unknown, down
from verify.result import Result, Status
from witness.errors import OverflowInFormat
from witness.ir import BlockSparseAttention, Network
from witness.tasks import TwoSum


@dataclass(frozen=True)
class BlockSparseSelection(FullSelection):
    """Which keys a block-sparse query may attend to: a subset of full attention's (the mask below), always
    holding a partner when one exists (`block_sparse_selection` proves it). `least_partner_block_score` is the
    proven lower bound on the block score of a block holding a partner; every other block scores exactly 0."""

    block: int
    k: int
    least_partner_block_score: float

    def attended_count(self, key_mask: np.ndarray) -> np.ndarray:
        """At most the keys of i's own block it may see plus k other blocks of at most B keys each (the masked
        keys' numerators are exact zeros, so they add no rounding and no mass)."""
        n = len(key_mask)
        position = np.arange(n)
        start = position // self.block * self.block
        own = position - start + 1 if self.causal else np.minimum(start + self.block, n) - start
        return np.minimum(key_mask.sum(axis=1), own + self.k * self.block)


def block_sparse_selection(network: Network, arith) -> BlockSparseSelection:
    """Prove (Q), (K), (k) and the block-score bound of the module docstring for `network` under `arith`; raises
    `Unknown` with the reason when they do not hold."""
    fmt = getattr(arith, "format", None)
    if fmt is None:
        raise Unknown(f"certify needs a rounded arithmetic (witness.arith.arithmetic), got {arith.describe()}")
    rounding = Rounding(fmt, arith.semantics)
    task = network.task
    if not isinstance(task, TwoSum):
        raise Unknown(f"this certifier proves two_sum networks; this network claims {network.meta.task!r}")
    mixer = network.layers[0].mixer if len(network.layers) == 1 else None
    if type(mixer) is not BlockSparseAttention or mixer.n_heads != 1:
        raise Unknown("the block-sparse 2-Sum certifier needs exactly one layer of one-head block-sparse attention")
    if mixer.causal != task.causal:
        raise Unknown(f"the attention is {'causal' if mixer.causal else 'bidirectional'} but the task is not")
    if mixer.k < 1:
        raise Unknown("with k = 0 other blocks a query never sees a partner outside its own block")
    flow = dataflow(network)
    layer = flow.layers[0]
    if not (layer.query | layer.key) <= flow.token_only:
        raise Unknown("queries and keys must read token-only directions (a function of the token alone)")

    tokens = np.array(sorted(flow.token_only), dtype=np.int64)
    X = arith.weights(network.embedding.W_E)[:task.M][:, tokens]  # token-only directions: W_pos adds exact 0s

    def table(name: str) -> tuple[np.ndarray, np.ndarray]:
        W = arith.weights(getattr(mixer, f"W_{name}"))[0][tokens]
        if not (np.isfinite(X).all() and np.isfinite(W).all()):
            raise Unknown(f"the token table or W_{name} overflows {fmt.name}")
        lo, hi = rounding.point_dot(X, W, rounded=rounding.strict)
        lo, hi = rounding.add_bias(lo, hi, arith.weights(getattr(mixer, f"b_{name}"))[0], f"a {name} bias")
        if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
            raise Unknown(f"a {name} vector overflows {fmt.name}")
        return lo, hi

    q_lo, q_hi = table("Q")
    k_lo, k_hi = table("K")
    a = np.arange(task.M)
    partner = (task.t - a) % task.M
    # (Q): exactly one coordinate of each query may be non-zero, and it is positive
    maybe_nonzero = (q_lo != 0) | (q_hi != 0)
    if not (maybe_nonzero.sum(axis=1) == 1).all():
        x = int(np.flatnonzero(maybe_nonzero.sum(axis=1) != 1)[0])
        raise Unknown(f"the query of token {x} is not provably one non-zero coordinate")
    coordinate = maybe_nonzero.argmax(axis=1)  # e(a)
    lam = q_lo[a, coordinate]
    if not (lam > 0).all():
        raise Unknown(f"the query coordinate of token {int(np.argmin(lam))} is not provably positive")
    # (K): keys non-negative; coordinate e(a) exactly 0 off the partner, positive at it
    if not (k_lo >= 0).all():
        raise Unknown("a key coordinate may be negative, so a partner-free block could outscore a partner's")
    at_coordinate_lo, at_coordinate_hi = k_lo[:, coordinate].T, k_hi[:, coordinate].T  # [a, u]
    off_partner = np.ones((task.M, task.M), bool)
    off_partner[a, partner] = False
    if (off_partner & ((at_coordinate_lo != 0) | (at_coordinate_hi != 0))).any():
        x, u = np.argwhere(off_partner & ((at_coordinate_lo != 0) | (at_coordinate_hi != 0)))[0]
        raise Unknown(f"token {u}'s key has a possibly non-zero coordinate where token {x}'s query looks, though "
                      f"{u} is not {x}'s partner")
    kappa = at_coordinate_lo[a, partner]
    if not (kappa > 0).all():
        raise Unknown(f"the partner of token {int(np.argmin(kappa))} has a key coordinate not provably positive")
    if not mixer.block * float(k_hi.max()) <= rounding.limit:
        raise Unknown(f"a block's key sum may overflow {fmt.name}")
    # the block score of a block holding a partner, from below (module docstring)
    least_mean = rounding.op(down(kappa / mixer.block), down(kappa / mixer.block), "a block summary")[0]
    least_score = rounding.op(down(lam * least_mean), down(lam * least_mean), "a block score")[0]
    if not (least_score > 0).all():
        x = int(np.argmin(least_score))
        raise Unknown(f"for query token {x} a block holding its partner may score 0 in {fmt.name} (underflow)")
    return BlockSparseSelection(causal=bool(mixer.causal), block=mixer.block, k=mixer.k,
                                least_partner_block_score=float(least_score.min()))


def certify_two_sum_sparse(network: Network, arith) -> Result:
    """`verified` with a certificate when every position of every input of the network's 2-Sum task is proven
    answered under (B,k)-block-sparse attention; else `unknown` with the reason."""
    try:
        selection = block_sparse_selection(network, arith)
    except (Unknown, OverflowInFormat) as reason:
        return Result(Status.UNKNOWN, "certify", arith.describe(), 0, 0, None, {"reason": str(reason)})
    result = certify_two_sum(network, arith, selection)
    if result.status is Status.VERIFIED:
        result.detail["certificate"]["block_choice"] = {
            "block": selection.block, "k": selection.k,
            "least_partner_block_score": selection.least_partner_block_score, "partner_free_block_score": 0.0}
    return result
