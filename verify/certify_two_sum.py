"""certify for one-layer 2-Sum networks: a sound proof that every position of every input is answered, with a
certificate. `verify.certify.certify` dispatches here for networks whose task is `two_sum`.

What the weights must show (read off by `verify.dataflow`; any other shape is `unknown`, with the reason):

* one layer, one softmax head; queries and keys read token-only directions, so the score of key j for query i
  is a table S[a, u] of the two tokens a = x_i, u = x_j; every value column reads token-only or position-only
  directions, so a value is v(u, j) = v_tok(u) + v_pos(j) on disjoint columns; b_O = 0;
* an MLP that is a weighted sum of absolute values: hidden units in pairs relu(z_p), relu(-z_p) with
  z_p = c_p . resid_mid, b_in = 0, one output direction (the verdict V = b + sum_p w_p |z_p|), which the
  readout alone reads; each c_p reads attention-written directions fed by one kind of value column, plus
  reference directions of the same kind (token or position) of the query position itself.

The argument, for query position i with token a and partner u* = (t - a) mod M:

1. Scores. u* must be the unique best key token of row S[a, .], by a gap G_a. Then whenever a match is present
   every match scores the top, gets the numerator exp(0) = 1 (exactly, under either semantics), and every other
   key a numerator of at most E_a = max_{u != u*} exp(S[a, u] - S[a, u*]) (computed as the executor rounds it
   under `strict`; enclosed from above under `theory`). With N_i keys, the mass off the matches is at most
   eps_i = (N_i - 1) E_a, and the matches share the rest equally.
2. Linearisation. Write pi for the exact softmax weights of the numerators as computed. Each z_p is affine in
   the mixed vector, so z_p = sum_j pi_j z_p(j) + perturbation, with z_p(j) the value of key j pushed through.
   For any sign s: s z <= |z| = |sum_j pi_j z_p(j)| <= sum_j pi_j |z_p(j)|. So V lies between
       b + sum_j pi_j L_j   and   b + sum_j pi_j U_j,
   with per-key L_j = sum_{w_p>0} w_p s_p z_p(j) + sum_{w_p<0} w_p |z_p(j)| and U_j the same with the roles
   swapped (s_p: the sign of the query's own reference part). Both split into a token part and a position part.
3. Cases. Answer 1 (a partner at j != i): the average of L over the matches is at least X = the least L over
   matches j != i, or min(X, (X + L_self)/2) when i is a match too (then at least one other match shares the
   mass equally); so V >= b + min(avg, (1 - eps) avg + eps L_non). Answer 0: no key but i may match, and V is a
   convex combination, at most b + max_j U_j over the keys that may be present.
4. Rounding. `theory`: the head output is stored (error u|y| + eta per direction), the MLP is exact.
   `strict`: every numerator sum, division, product and ordered sum is rounded; per step the error is at most
   u |exact| + eta, accumulated with Higham's gamma_k = k u / (1 - k u) (`unknown` when k u >= 1/2). These
   give a perturbation bound zeta_p per z_p and one on the MLP's own sum; the verdict V is then enclosed, stored
   (rounding is monotone), and both logits evaluated at the ends of the enclosure (each is monotone in V).

The attention-selection step is `Selection`: which keys query i may attend to. Full attention (bidirectional or
causal) is `FullSelection`; a sparse variant supplies its own (it must then prove that a present partner is
always attended, which full attention does by attending to every key).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from verify.certificate import network_identity, new_certificate
from verify.dataflow import Dataflow, dataflow
from verify.enclosure import Rounding, Unknown, exp_upper, gamma, up
from verify.result import Result, Status
from witness.errors import OverflowInFormat
from witness.ir import Attention, Network
from witness.tasks import TwoSum

#: Inputs counts of more than this many bits are reported by their base-2 logarithm only.
COUNT_BITS_LIMIT = 10**5
#: Relative widening of every float64 evaluation of an exact-arithmetic bound (a few dozen float64 operations,
#: each within 2^-53 relative, on exact inputs).
FLOAT64_SLACK = 2.0 ** -40


@dataclass(frozen=True)
class FullSelection:
    """Full softmax attention: query i attends to every key (bidirectional) or to keys j <= i (causal)."""

    causal: bool

    def key_mask(self, n: int) -> np.ndarray:
        """[n, n] bool: key j may be attended by query i. A superset is sound; every partner must be inside."""
        return np.tril(np.ones((n, n), bool)) if self.causal else np.ones((n, n), bool)

    def attended_count(self, key_mask: np.ndarray) -> np.ndarray:
        """[n]: the most keys query i attends to at once (N_i below); full attention: every key it may see."""
        return key_mask.sum(axis=1)


def _partner_mask(task: TwoSum) -> np.ndarray:
    """[n, n] bool: a match at j counts for y_i (the task's definition)."""
    return np.tril(np.ones((task.n, task.n), bool), k=-1) if task.causal else ~np.eye(task.n, dtype=bool)


def certify_two_sum(network: Network, arith, selection=None) -> Result:
    """`verified` with a certificate when every position of every input of the network's 2-Sum task is proven
    answered under `arith` (a rounded `strict` or `theory` arithmetic); else `unknown` with the reason."""
    try:
        fmt = getattr(arith, "format", None)
        if fmt is None:
            raise Unknown(f"certify needs a rounded arithmetic (witness.arith.arithmetic), got {arith.describe()}")
        rounding = Rounding(fmt, arith.semantics)
        certificate = new_certificate(fmt.name, arith.semantics, network_identity(network))
        task = network.task
        if not isinstance(task, TwoSum):
            raise Unknown(f"this certifier proves two_sum networks; this network claims {network.meta.task!r}")
        if selection is None:
            mixer = network.layers[0].mixer if len(network.layers) == 1 else None
            if type(mixer) is not Attention:
                raise Unknown("the full-attention 2-Sum certifier needs exactly one layer of softmax attention")
            selection = FullSelection(bool(mixer.causal))
        _TwoSumCertifier(network, arith, rounding, task, selection, certificate).run()
    except (Unknown, OverflowInFormat) as reason:
        return Result(Status.UNKNOWN, "certify", arith.describe(), 0, 0, None, {"reason": str(reason)})
    log2_count = task.n * math.log2(task.M)
    certificate["inputs_log2"] = log2_count
    checked = task.M ** task.n if log2_count <= COUNT_BITS_LIMIT else 0
    return Result(Status.VERIFIED, "certify", arith.describe(), checked, 0, None,
                  {"certificate": certificate, "inputs_log2": log2_count})


@dataclass(frozen=True)
class _AbsolutePairs:
    """The MLP read as V = bias + sum_p weight[p] |columns[:, p] . resid_mid| (see the module docstring)."""

    verdict: int
    columns: np.ndarray  # [d_model, P]
    weight: np.ndarray  # [P]
    bias: float
    idle_columns: np.ndarray  # [d_model, I]: hidden units that write nothing
    idle_bias: np.ndarray  # [I]


def _absolute_pairs(W_in, b_in, W_out, b_out, flow: Dataflow) -> _AbsolutePairs:
    outputs = np.flatnonzero(W_out.any(axis=0) | (b_out != 0))
    if outputs.size != 1:
        raise Unknown(f"the MLP writes {outputs.size} directions; the 2-Sum certifier needs one verdict direction")
    verdict = int(outputs[0])
    if flow.readout != frozenset({verdict}):
        raise Unknown("the readout must read the MLP's verdict direction alone")
    if verdict in flow.token_written | flow.position_written | flow.layers[0].attn_writes:
        raise Unknown("the verdict direction must be empty before the MLP")
    units = [int(h) for h in np.flatnonzero(W_out[:, verdict])]
    idle = np.setdiff1d(np.arange(W_in.shape[1]), units)  # computed all the same: they must not overflow
    if np.any(b_in[units] != 0):
        raise Unknown("the MLP's hidden units must have no bias (relu(z) + relu(-z) = |z|)")
    unpaired, columns, weights = set(units), [], []
    for h in units:
        if h not in unpaired:
            continue
        unpaired.discard(h)
        partner = next((g for g in sorted(unpaired) if np.array_equal(W_in[:, g], -W_in[:, h])
                        and W_out[g, verdict] == W_out[h, verdict]), None)
        if partner is None:
            raise Unknown(f"MLP hidden unit {h} has no partner unit computing relu of the negated input")
        unpaired.discard(partner)
        columns.append(W_in[:, h])
        weights.append(W_out[h, verdict])
    return _AbsolutePairs(verdict, np.array(columns).T.reshape(W_in.shape[0], -1), np.array(weights),
                          float(b_out[verdict]), W_in[:, idle], b_in[idle])


class _TwoSumCertifier:
    def __init__(self, network: Network, arith, rounding: Rounding, task: TwoSum, selection, certificate: dict):
        self.network, self.arith, self.r, self.task = network, arith, rounding, task
        self.selection, self.certificate = selection, certificate
        self.flow = dataflow(network)
        self.w = {name: arith.weights(array) for name, array in network.state_dict().items()}
        for name, array in self.w.items():
            if not np.isfinite(array).all():
                raise Unknown(f"weight {name} overflows {rounding.format.name}")

    # -- exact (theory) or as-executed (strict) point values ------------------------------------------------
    def _affine(self, X: np.ndarray, W: np.ndarray, b: np.ndarray, what: str) -> np.ndarray:
        """X W + b for point rows X: as the executor rounds it under strict; exactly under theory."""
        if self.r.strict:
            out = self.arith.add(self.arith.matmul(X, W), b)
        else:
            lo, hi = self.r.point_dot(X, W, rounded=False)
            lo, hi = self.r.add(lo, hi, np.broadcast_to(b, lo.shape), np.broadcast_to(b, hi.shape), what)
            if not np.array_equal(lo, hi):
                raise Unknown(f"{what} is not exact in float64; the theory certifier needs exact point values")
            out = lo
        if not np.isfinite(out).all():
            raise Unknown(f"{what} overflows {self.r.format.name}")
        return out

    def run(self) -> None:
        net, task, flow, w, r = self.network, self.task, self.flow, self.w, self.r
        n, M = task.n, task.M
        if len(net.layers) != 1 or net.layers[0].mixer.n_heads != 1:
            raise Unknown("the 2-Sum certifier handles one layer with one head")
        if net.readout.read != "all" or net.d_vocab_out != 2 or net.d_vocab < M or net.n_ctx < n:
            raise Unknown("the readout must read every position with two logits, over the task's tokens")
        key_mask = self.selection.key_mask(n)
        partners = _partner_mask(task)
        if not np.array_equal(key_mask & ~np.eye(n, dtype=bool), partners):
            raise Unknown("the keys a query attends to (other than itself) must be exactly the task's partners")
        layer = flow.layers[0]
        if not (layer.query | layer.key) <= flow.token_only:
            raise Unknown("queries and keys must read token-only directions (scores a function of two tokens)")
        if np.any(w["blocks.0.attn.b_O"] != 0):
            raise Unknown("the attention output bias must be zero")
        if layer.attn_writes & (flow.token_written | flow.position_written):
            raise Unknown("the attention must write directions the embedding leaves empty")
        mlp = net.layers[0].mlp
        if mlp is None:
            raise Unknown("the 2-Sum certifier needs an MLP after the attention")
        pairs = _absolute_pairs(w["blocks.0.mlp.W_in"], w["blocks.0.mlp.b_in"], w["blocks.0.mlp.W_out"],
                                w["blocks.0.mlp.b_out"], flow)

        # -- embeddings: token u at position 0, and token 0 at position j ----------------------------------
        W_E, W_pos = w["embed.W_E"][:M], w["pos_embed.W_pos"][:n]
        X_tok = self.arith.store(self.arith.add(W_E, W_pos[:1]))
        X_pos = self.arith.store(self.arith.add(W_E[:1], W_pos))
        if not (np.isfinite(X_tok).all() and np.isfinite(X_pos).all()):
            raise Unknown(f"the embedding overflows {r.format.name}")

        # -- 1. scores --------------------------------------------------------------------------------------
        a = np.arange(M)
        partner = (task.t - a) % M
        q = self._affine(X_tok, w["blocks.0.attn.W_Q"][0], w["blocks.0.attn.b_Q"][0], "a query")
        k = self._affine(X_tok, w["blocks.0.attn.W_K"][0], w["blocks.0.attn.b_K"][0], "a key")
        scores = self._affine(q, k.T, np.zeros(M), "an attention score")  # [a, u]
        top = scores[a, partner]
        others = scores.copy()
        others[a, partner] = -np.inf
        gap = top - others.max(axis=1)
        if not (scores.max(axis=1) - scores.min(axis=1) <= r.limit).all():
            raise Unknown(f"a score difference (the max subtracted) may overflow {r.format.name}")
        if not (gap > 0).all():
            worst = int(np.argmin(gap))
            raise Unknown(f"for query token {worst} the partner {int(partner[worst])} is not the unique best key")
        if r.strict:
            # the executor's numerator for a non-match when a match holds the top: exp(round(s - top)), rounded
            spread = self.arith.sub(scores, top[:, None])
            if not np.isfinite(spread).all():
                raise Unknown(f"a score difference overflows {r.format.name}")
            numerators = self.arith.exp(spread)
        else:
            numerators = exp_upper(up(scores - top[:, None]))
        numerators[a, partner] = 0.0
        off_match = numerators.max(axis=1)  # E_a

        # -- 2. values, split into token and position columns ---------------------------------------------
        W_V, b_V = w["blocks.0.attn.W_V"][0], w["blocks.0.attn.b_V"][0]
        column_kind = []
        for c in range(W_V.shape[1]):
            rows = set(np.flatnonzero(W_V[:, c]).tolist())
            if rows <= flow.token_only:
                column_kind.append("token")
            elif rows <= flow.position_only:
                column_kind.append("position")
            else:
                raise Unknown(f"value column {c} reads directions that are neither token-only nor position-only")
        is_token_col = np.array([kind == "token" for kind in column_kind], dtype=bool)
        v_tok = self._affine(X_tok, W_V, b_V, "a value") * is_token_col  # [u, d_head]
        v_pos = self._affine(X_pos, W_V, b_V, "a value") * ~is_token_col  # [j, d_head]
        v_max = np.maximum(np.abs(v_tok).max(axis=0), np.abs(v_pos).max(axis=0))  # per column, every key
        unit_values = np.isin(np.concatenate([v_tok, v_pos]), (-1.0, 0.0, 1.0)).all(axis=0)  # products exact

        # -- z_p per key, split by kind ----------------------------------------------------------------------
        W_O = w["blocks.0.attn.W_O"][0]  # [d_head, d_model]
        attn_dirs = np.array(sorted(layer.attn_writes), dtype=np.int64)
        C = pairs.columns  # [d_model, P]
        g = W_O[:, attn_dirs] @ C[attn_dirs]  # [d_head, P]: what each pair reads of the mixed vector
        ref = C.copy()
        ref[attn_dirs] = 0.0
        P = C.shape[1]
        pair_kind = []
        for p in range(P):
            reads_cols = set(np.flatnonzero(g[:, p]).tolist())
            # directions nothing writes hold 0 at resid_mid (the verdict among them): they add nothing
            ref_rows = set(np.flatnonzero(ref[:, p]).tolist()) & (flow.token_written | flow.position_written)
            kinds = {column_kind[c] for c in reads_cols}
            if ref_rows and ref_rows <= flow.token_only:
                kinds.add("token")
            elif ref_rows and ref_rows <= flow.position_only:
                kinds.add("position")
            elif ref_rows:
                raise Unknown(f"MLP pair {p} reads directions that are neither token-only nor position-only")
            if len(kinds) > 1:
                raise Unknown(f"MLP pair {p} mixes token and position information")
            pair_kind.append(kinds.pop() if kinds else "token")
        tok_pairs = np.array([kind == "token" for kind in pair_kind], dtype=bool)
        # z[query, key, p]: token pairs over (a, u), position pairs over (i, j)
        z_tok = (v_tok @ g)[None, :, :] + (X_tok @ ref)[:, None, :]  # [a, u, P]
        z_pos = (v_pos @ g)[None, :, :] + (X_pos @ ref)[:, None, :]  # [i, j, P]
        sign_tok = np.where(X_tok @ ref >= 0, 1.0, -1.0)[:, None, :]
        sign_pos = np.where(X_pos @ ref >= 0, 1.0, -1.0)[:, None, :]
        weight = pairs.weight

        def lower_upper(z, sign, use):
            wt = np.where(use, weight, 0.0)
            linear, absolute = sign * z, np.abs(z)
            low = (np.where(wt > 0, linear, absolute) * wt).sum(axis=-1)
            high = (np.where(wt > 0, absolute, linear) * wt).sum(axis=-1)
            slack = up((np.abs(z) * np.abs(wt)).sum(axis=-1) * FLOAT64_SLACK + 1e-300)
            return low - slack, high + slack

        L_tok, U_tok = lower_upper(z_tok, sign_tok, tok_pairs)  # [a, u]
        L_pos, U_pos = lower_upper(z_pos, sign_pos, ~tok_pairs)  # [i, j]

        # -- 3. cases ----------------------------------------------------------------------------------------
        others_mask = key_mask & ~np.eye(n, dtype=bool)
        keys = self.selection.attended_count(key_mask)  # N_i
        has_others = others_mask.any(axis=1)
        # rows without other keys (causal position 0) have no answer-1 case; 0 keeps their arithmetic finite
        L_pos_others = np.where(has_others, np.where(others_mask, L_pos, np.inf).min(axis=1), 0.0)  # [i]
        U_pos_others = np.where(has_others, np.where(others_mask, U_pos, -np.inf).max(axis=1), 0.0)
        L_self = L_tok[a, a][None, :] + np.diag(L_pos)[:, None]  # [i, a]
        U_self = U_tok[a, a][None, :] + np.diag(U_pos)[:, None]
        non = np.ones((M, M), bool)
        non[a, partner] = False
        L_tok_non = np.where(non, L_tok, np.inf).min(axis=1)  # [a]
        U_tok_non = np.where(non, U_tok, -np.inf).max(axis=1)
        self_match = (a == partner)[None, :]

        # answer 1
        X = L_tok[a, partner][None, :] + L_pos_others[:, None]  # [i, a]
        average = np.where(self_match, np.minimum(X, (X + L_self) / 2), X)
        L_non = L_tok_non[None, :] + L_pos_others[:, None]
        L_non = np.where(self_match, L_non, np.minimum(L_non, L_self))
        eps = np.minimum(1.0, up((keys[:, None] - 1) * off_match[None, :] * (1 + 2.0 ** -50)))
        match_low = pairs.bias + np.minimum(average, (1 - eps) * average + eps * L_non)
        match_low = match_low - up(np.abs(match_low) * FLOAT64_SLACK + 1e-300)
        # answer 0
        U_others = U_tok_non[None, :] + U_pos_others[:, None]
        none_high = pairs.bias + np.where(has_others[:, None], np.maximum(U_others, U_self), U_self)
        none_high = none_high + up(np.abs(none_high) * FLOAT64_SLACK + 1e-300)

        # -- 4. rounding -------------------------------------------------------------------------------------
        # sum_p |w_p| |z_p(pi)| <= the largest per-key sum_p |w_p| |z_p(j)| over the keys that may carry mass
        A_tok = (np.abs(z_tok) * np.abs(np.where(tok_pairs, weight, 0.0))).sum(axis=-1)  # [a, u]
        A_pos = (np.abs(z_pos) * np.abs(np.where(tok_pairs, 0.0, weight))).sum(axis=-1)  # [i, j]
        A_pos_keys = np.where(key_mask, A_pos, 0.0).max(axis=1)  # [i]
        A_tok_non = np.where(non, A_tok, 0.0).max(axis=1)  # [a]
        magnitude_match = (A_tok[a, partner][None, :] + A_pos_keys[:, None]
                           + eps * (A_tok_non[None, :] + A_pos_keys[:, None]))
        magnitude_none = np.maximum(A_tok_non[None, :] + A_pos_keys[:, None], A_tok[a, a][None, :] + np.diag(A_pos)[:, None])
        z_max = np.where(tok_pairs, np.abs(z_tok).max(axis=(0, 1)), np.abs(z_pos).max(axis=(0, 1)))  # [P]
        ref_max = np.maximum(np.abs(X_tok).max(axis=0), np.abs(X_pos).max(axis=0))  # [d_model]
        perturbation_match = self._perturbation(keys, v_max, unit_values, W_O, attn_dirs, pairs, ref_max, z_max,
                                                up(magnitude_match * (1 + FLOAT64_SLACK)))
        perturbation_none = self._perturbation(keys, v_max, unit_values, W_O, attn_dirs, pairs, ref_max, z_max,
                                               up(magnitude_none * (1 + FLOAT64_SLACK)))
        verdict_match = match_low - perturbation_match
        verdict_none = none_high + perturbation_none

        can_match = partners.any(axis=1)  # [i]
        low_end = self._store(np.where(can_match[:, None], verdict_match, 0.0))
        high_end = self._store(verdict_none)
        margin_one = self._logit_margin(low_end, answer=1, verdict=pairs.verdict)
        margin_zero = self._logit_margin(high_end, answer=0, verdict=pairs.verdict)
        margin_one = np.where(can_match[:, None], margin_one, np.inf)
        if not (margin_one > 0).all():
            i, t = np.unravel_index(int(np.argmin(margin_one)), margin_one.shape)
            raise Unknown(f"position {i}, token {t}, a partner present: the verdict is not provably positive "
                          f"(lower bound {float(verdict_match[i, t]):.4g})")
        if not (margin_zero > 0).all():
            i, t = np.unravel_index(int(np.argmin(margin_zero)), margin_zero.shape)
            raise Unknown(f"position {i}, token {t}, no partner: the verdict is not provably negative "
                          f"(upper bound {float(verdict_none[i, t]):.4g})")

        self.certificate["certifier"] = "two_sum"
        self.certificate["selection"] = type(self.selection).__name__
        self.certificate["layers"].append({
            "layer": 0,
            "tokens": [{"token": int(x), "partner": int(partner[x]), "score_gap": float(gap[x]),
                        "off_match_numerator": float(off_match[x])} for x in a],
            "worst_score_gap": float(gap.min()),
            "worst_off_match_numerator": float(off_match.max()),
        })
        cases = []
        for i in range(n):
            for answer, margins, bound in ((1, margin_one, verdict_match), (0, margin_zero, verdict_none)):
                if answer == 1 and not can_match[i]:
                    continue
                x = int(np.argmin(margins[i]))
                cases.append({"position": i, "answer": answer, "token": x, "verdict_bound": float(bound[i, x]),
                              "margin": float(margins[i, x])})
        self.certificate["readout"] = {"directions": [self.flow.labels[pairs.verdict]], "cases": cases,
                                       "worst_margin": float(min(c["margin"] for c in cases)),
                                       "largest_perturbation": float(max(perturbation_match.max(),
                                                                                     perturbation_none.max()))}

    def _perturbation(self, keys, v_max, unit_values, W_O, attn_dirs, pairs, ref_max, z_max,
                      magnitude) -> np.ndarray:
        """A bound on |computed V - (b + sum_p w_p |z_p(pi)|)| per query position (N_i keys, row of `keys`) and
        token (column of `magnitude`, which bounds sum_p |w_p| |z_p(pi)| there): every rounding of the head
        output, the softmax, the mix, the MLP's dot products and its sum (module docstring, step 4)."""
        r = self.r
        u, eta = r.unit, r.eta
        C = pairs.columns
        W_O_attn = np.abs(W_O[:, attn_dirs])  # [d_head, A]
        h_max = v_max @ W_O_attn  # [A]: |exact head output| per attention-written direction
        C_attn = np.abs(C[attn_dirs])  # [A, P]
        outside = np.where(np.isin(np.arange(ref_max.size), attn_dirs), 0.0, ref_max)
        ref_part = np.abs(C).T @ outside  # [P]: what the query's own directions add to |z_p|
        weight = np.abs(pairs.weight)
        # exact steps the strict bound may skip: every attention-written direction copies one head column with
        # weight +-1, and every pair's column has at most two entries, each +-1
        selects = bool(np.all(np.count_nonzero(W_O_attn, axis=0) <= 1) and np.isin(W_O_attn, (0.0, 1.0)).all())
        differences = bool(np.all(np.count_nonzero(C, axis=0) <= 2) and np.isin(np.abs(C), (0.0, 1.0)).all())
        out = np.empty(magnitude.shape)
        for count in np.unique(keys):
            N = int(count)
            rows = keys == count
            if r.strict:
                # softmax: sum of N numerators (relative gamma_N), then p_j = round(e_j / sum): |p_j - pi_j| <=
                # rho pi_j + eta; the mix: N rounded products p_j v_jc and their ordered sum
                g_sum = gamma(N, u) if u else 0.0
                rho = up((u + g_sum) / (1 - g_sum))
                total_p = 1 + rho + N * eta  # >= sum_j p_j
                terms = up((1 + u) * v_max * total_p + N * eta)  # >= sum_j |round(p_j v_jc)|
                # (float additions err by at most u |sum| even among subnormals; fixed additions are exact)
                # (a product by a value of 0 or +-1 is exact)
                product_error = np.where(unit_values, 0.0, u * v_max * total_p + N * eta)
                mix_error = up(v_max * (rho + N * eta) + product_error + g_sum * terms)
                # head output: an ordered dot product over the head's columns, then stored (b_O = 0 adds exactly);
                # a direction fed by one column with weight +-1 copies it exactly (the other products are zeros)
                if selects:
                    head_error = mix_error @ W_O_attn
                else:
                    depth = int(np.count_nonzero(W_O_attn, axis=0).max(initial=1))
                    g_head = gamma(depth + 1, u) if u else 0.0
                    head_error = up(mix_error @ W_O_attn + g_head * ((v_max + mix_error) @ W_O_attn)
                                    + 2 * (depth + 1) * eta)
                if differences:
                    # z_p = round(+-y_d -+ x_r): one rounding of the exact sum, |z~| within (1 +- u) of |z| +-
                    # the head error; the relative part is u sum_p |w_p| |z_p| <= u * magnitude (below)
                    zeta = up(head_error @ C_attn * (1 + u))
                    relative = u
                else:
                    # z_p: an ordered dot product of resid_mid with the pair's column
                    width = int(np.count_nonzero(C, axis=0).max(initial=1))
                    g_dot = gamma(width + 1, u) if u else 0.0
                    zeta = up(head_error @ C_attn + g_dot * ((h_max + head_error) @ C_attn + ref_part)
                              + 2 * (width + 1) * eta)
                    relative = 0.0
                # V: an ordered sum of the hidden units' rounded products, then the bias add; of each pair's
                # relu(z), relu(-z) one is 0, whose product and addition are exact, so P + 1 terms count
                mlp_terms = pairs.weight.size + 1
                g_mlp = gamma(mlp_terms + 1, u) if u else 0.0
                sum_size = magnitude[rows] + weight @ zeta + abs(pairs.bias)
                bound = up(weight @ zeta + relative * sum_size + g_mlp * sum_size + 2 * (mlp_terms + 1) * eta)
                # every product and partial sum the executor forms is at most one of these (the mix, the head
                # output, the z_p dot products, the MLP sum; the softmax denominator at most 2 N)
                dot_terms = (h_max + head_error) @ C_attn + ref_part  # |partial sums| of each z_p's dot product
                idle = np.abs(pairs.idle_columns)
                idle_terms = (h_max + head_error) @ idle[attn_dirs] + outside @ idle + np.abs(pairs.idle_bias)
                if idle_terms.size and u:
                    idle_terms = up(idle_terms * (1 + gamma(idle.shape[0] + 1, u)))
                largest = max(float(np.max(terms, initial=0)), float(np.max(h_max + head_error, initial=0)),
                              float(np.max(dot_terms, initial=0)), float(np.max(idle_terms, initial=0)),
                              float(np.max(z_max + zeta, initial=0)),
                              float(np.max(sum_size + bound)), 2.0 * N)
            else:
                head_error = up(u * h_max + eta)  # the stored head output; inside the block all is exact
                zeta = up(head_error @ C_attn)
                bound = np.full(magnitude[rows].shape, up(weight @ zeta))
                # stored: the head outputs and the verdict (the MLP is exact inside the block)
                largest = max(float(np.max(h_max + head_error, initial=0)),
                              float(np.max(magnitude[rows] + bound + abs(pairs.bias))))
            if largest > r.limit:
                raise Unknown(f"intermediate values (up to {largest:.4g}) may overflow {r.format.name}")
            out[rows] = up(bound * (1 + 2.0 ** -40))
        return out

    def _store(self, values: np.ndarray) -> np.ndarray:
        """The stored verdict at an end of its enclosure (rounding is monotone)."""
        return self.r.round(values, "the verdict")

    def _logit_margin(self, verdict_values: np.ndarray, answer: int, verdict: int) -> np.ndarray:
        """logit[answer] - logit[other], enclosed from below, at every listed stored verdict; the logits are
        monotone in the verdict, so the ends of its enclosure are the worst cases."""
        r = self.r
        W_U, b_U = self.w["unembed.W_U"][verdict:verdict + 1], self.w["unembed.b_U"]
        flat = verdict_values.reshape(-1, 1)
        lo, hi = r.point_dot(flat, W_U, rounded=r.strict)
        lo, hi = r.add_bias(lo, hi, b_U, "a logit")
        other = 1 - answer
        return (lo[:, answer] - hi[:, other]).reshape(verdict_values.shape)
