"""The proof that a one-layer network answers every position of every input of 2-Sum(n, M, t).

Shape, read off the weights: one head of softmax attention (causal exactly when the task is) or of (B,k)-block-sparse
attention with k >= 1; queries and keys read token-only directions, so the score of key j for query i is a table
S[a, u] of the two tokens; each value column reads token-only or position-only directions, so a value is
v(u) + v'(j) on disjoint columns; b_O = 0 and the attention writes directions the embedding leaves empty; the MLP
is a weighted sum of absolute values, V = b + sum_p w_p |z_p| (hidden units in pairs relu(z), relu(-z) of one column
c_p, no bias) written into one `verdict` direction that the readout alone reads, with logit_1 non-decreasing and
logit_0 non-increasing in it. Each z_p = c_p . resid_mid reads attention directions fed by one kind of value column
plus reference directions of the same kind (token or position) at the query position itself.

The argument, for query position i holding token a, whose partner is a* = (t - a) mod M:

1. Scores: a* is the unique best key token of row S[a, .]. With a match present every match scores the top and
   gets the numerator exactly 1; every other key at most E_a = max_{u != a*} exp(S[a, u] - S[a, a*]) (under strict
   the executor's rounded value, computed exactly; under theory enclosed from above). With N_i keys attended, the
   mass off the matches is at most eps_i = min(1, (N_i - 1) E_a).
2. Linearisation: with pi the exact softmax of the numerators as computed, z_p(pi) = sum_j pi_j z_p(j). For
   w_p > 0, w_p |z| >= w_p s z (s the sign of the query's own reference part), and for w_p < 0,
   w_p |z| >= w_p sum_j pi_j |z_p(j)|; so V >= b + sum_j pi_j L_j, and likewise V <= b + sum_j pi_j U_j, with
   per-key L, U = (token part)[a, x_j] + (position part)[i, j].
3. Cases. Answer 1 (some partner j != i, attended): the matches share their mass equally, the query itself at
   most half of it, so V >= b + min(avg, (1 - eps) avg + eps L_non). Answer 0: V <= b + the largest U of a key
   that may be present.
4. Rounding: theory stores the head output (error <= u |y| + eta per direction) and, since the executor computes
   the inside of the block in float64, also bounds float64's error in the softmax, mix and head
   (`numbers.float64_softmax_error`), in each z_p and in the MLP's sum (Higham's gamma_k at u = 2^-53; the two
   units of a pair may round apart, so each counts); strict rounds the softmax sum
   (relative gamma_N: additions of floats have no absolute error), each weight (u relative + eta), the mix, the head
   output, each z_p and the MLP sum, bounded step by step with Higham's gamma_k = k u / (1 - k u). The verdict is
   stored (rounding is monotone) and both logits taken at the ends of its enclosure.
5. Block-sparse attention needs one more fact, the block-choice lemma: each query has one nonzero coordinate e(a),
   positive; keys are >= 0, zero at e(a) except for a's partner, positive there; so a block without a partner has
   summary coordinate e(a) exactly 0 and block score 0, a block with one at least round(lambda round(kappa / B)),
   which must be > 0. With k >= 1 a present partner outside i's own block keeps some partner block; and i attends
   to at most its own block's keys plus k B others.
Numbers are exact (float64 values whose exactness the products module proves) or bounds rounded outward.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from verify.checker.files import Weights
from verify.checker.numbers import Format, down, exp_upper, float64_softmax_error, number, up, upper_float
from verify.checker.products import affine, exact_matmul
from verify.checker.ranges import network_ranges
from verify.checker.refusal import require
from verify.checker.tasks import TwoSum


def _gamma(k: int, u: float) -> float:
    require(k * u < 0.5, f"a {k}-term sum is too long for a relative error bound at unit roundoff {u:g}")
    return float(up(up(k * u) / down(1 - k * u)))


def prove(weights: Weights, task: TwoSum, fmt: Format, strict: bool) -> dict:
    structure = weights.structure
    layers = structure["layers"]
    require(len(layers) == 1 and layers[0].get("mlp"), "a 2-Sum proof needs one layer with an MLP")
    spec = layers[0]
    require(spec.get("mixer") in ("attention", "block_sparse"), "the 2-Sum proof handles softmax and block-sparse "
                                                                "attention")
    # The executor runs a layer without a `causal` entry as causal (the option's default), so absence is no "false".
    require(isinstance(spec.get("causal"), bool) and spec["causal"] == task.causal,
            f"the attention's causal flag ({spec.get('causal', 'absent')!r}) is not the task's ({task.causal})")
    require(structure.get("read") == "all", "the readout must read every position")
    if spec["mixer"] == "block_sparse":
        block, kept = spec.get("block"), spec.get("k")
        # The executor's loader (witness.mixers.softmax.check_span) refuses block outside [1, 2^24] and k outside
        # [0, 2^24]: a file it would not run is no network the claim can be about. Checked first, since the range
        # argument folds a block's sum term by term (a span of 2^25 would take minutes before being refused).
        require(type(block) is int and type(kept) is int and 1 <= block <= 2 ** 24 and 0 <= kept <= 2 ** 24,
                f"the block-sparse layer's block ({block!r}) and k ({kept!r}) must be integers in [1, 2^24] and "
                f"[0, 2^24]")
    w = {name: fmt.round_array(a, f"weight {name}") for name, a in weights.arrays.items()}
    n, M = task.n, task.M
    W_E, W_pos = w["embed.W_E"], w["pos_embed.W_pos"]
    require(W_E.shape[0] >= M and W_pos.shape[0] >= n and w["unembed.W_U"].shape[1] == 2,
            "the network's vocabulary, context or answers do not fit the task")
    require(w["blocks.0.attn.W_Q"].shape[0] == 1, "the 2-Sum proof handles one head")
    W_E, W_pos = W_E[:M], W_pos[:n]
    record = {"ranges": {"largest_residual_entry_after_layer": network_ranges(fmt, strict, w, structure, M, n)}}
    token, position = W_E.any(axis=0), W_pos.any(axis=0)
    require(not (token & position).any(), "the token and position tables share a direction")
    a = {k: w[f"blocks.0.attn.{k}"][0] for k in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V")}
    require(not w["blocks.0.attn.b_O"].any(), "the attention output bias must be zero")
    q_rows, k_rows = a["W_Q"].any(axis=1), a["W_K"].any(axis=1)
    require(not ((q_rows | k_rows) & position).any(), "queries and keys must read token-only directions")
    attn_dirs = a["W_O"].any(axis=0)
    require(not (attn_dirs & (token | position)).any(), "the attention must write directions the embedding leaves "
                                                        "empty")

    # -- 1. scores ------------------------------------------------------------------------------------------
    q = affine(W_E, a["W_Q"], a["b_Q"], fmt, strict, "a query")  # [M, d_head]; W_pos is zero on these rows
    k = affine(W_E, a["W_K"], a["b_K"], fmt, strict, "a key")
    scores = affine(q, k.T, np.zeros(M), fmt, strict, "a score")  # [a, u]
    tokens = np.arange(M)
    partner = (task.t - tokens) % M
    top = scores[tokens, partner]
    others = scores.copy()
    others[tokens, partner] = -np.inf
    require((top > others.max(axis=1)).all(), "some query token's partner is not its unique best key")
    runner_up = others.max(axis=1)
    # E_a: the largest numerator of a non-match when a match holds the top (exp and rounding are monotone)
    if strict:
        off_match = fmt.exp_array(fmt.sub(runner_up, top, "a score difference"))
    else:
        off_match = np.array([upper_float(exp_upper(Fraction(float(o)) - Fraction(float(t))))
                              for o, t in zip(runner_up, top)])
    gaps = [Fraction(float(t)) - Fraction(float(o)) for t, o in zip(top, runner_up)]
    record["scores"] = [{"token": int(x), "partner": int(partner[x]), "score_gap": number(gaps[x]),
                         "off_match_numerator": float(off_match[x])} for x in tokens]

    # -- which keys each query attends to ---------------------------------------------------------------------
    visible = np.tril(np.ones((n, n), bool)) if task.causal else np.ones((n, n), bool)
    counts = visible.sum(axis=1)
    if spec["mixer"] == "block_sparse":
        block, kept = spec["block"], spec["k"]  # within the executor's limits: checked before the ranges
        record["block_choice"] = _block_choice(fmt, strict, q, k, partner, block, kept)
        start = np.arange(n) // block * block
        own = np.arange(n) - start + 1 if task.causal else np.minimum(start + block, n) - start
        counts = np.minimum(counts, own + kept * block)

    # -- 2. values, pairs, per-key bounds L and U -------------------------------------------------------------
    W_V, b_V, W_O = a["W_V"], a["b_V"], a["W_O"]
    kinds = []
    for c in range(W_V.shape[1]):
        rows = W_V[:, c] != 0
        require(not (rows & token).any() or not (rows & position).any(),
                f"value column {c} reads token and position directions")
        kinds.append("position" if (rows & position).any() else "token")
    is_token_col = np.array([kind == "token" for kind in kinds])
    v_tok = np.where(is_token_col, affine(W_E, W_V, b_V, fmt, strict, "a value"), 0.0)
    v_pos = np.where(is_token_col, 0.0, affine(W_pos, W_V, b_V, fmt, strict, "a value"))
    pairs = _absolute_pairs(w, attn_dirs, token | position)
    verdict, C, weight, bias = pairs["verdict"], pairs["columns"], pairs["weights"], pairs["bias"]
    reads = np.abs(W_O[:, attn_dirs]) @ np.abs(C[attn_dirs])  # [d_head, P]: nonzero where pair p reads head column
    reference = np.where((token | position)[:, None], C, 0.0)  # the query position's own part
    token_pair = []
    for p in range(C.shape[1]):
        kinds_read = {kinds[c] for c in np.flatnonzero(reads[:, p])}
        ref_rows = reference[:, p] != 0
        if ref_rows.any():
            require(not (ref_rows & token).any() or not (ref_rows & position).any(),
                    f"MLP pair {p} reads token and position directions of the query position")
            kinds_read.add("token" if (ref_rows & token).any() else "position")
        require(len(kinds_read) <= 1, f"MLP pair {p} mixes token and position information")
        token_pair.append(kinds_read != {"position"})
    token_pair = np.array(token_pair)
    g = exact_matmul(W_O[:, attn_dirs], C[attn_dirs], "a pair's read of the head")  # [d_head, P]
    z_tok = _exact_add(exact_matmul(v_tok, g, "z")[None], exact_matmul(W_E, reference, "z")[:, None])  # [a, u, P]
    z_pos = _exact_add(exact_matmul(v_pos, g, "z")[None], exact_matmul(W_pos, reference, "z")[:, None])  # [i, j, P]
    sign_tok = np.where(exact_matmul(W_E, reference, "z") >= 0, 1.0, -1.0)[:, None]
    sign_pos = np.where(exact_matmul(W_pos, reference, "z") >= 0, 1.0, -1.0)[:, None]
    L_tok, U_tok = _lower_upper(z_tok, sign_tok, np.where(token_pair, weight, 0.0))
    L_pos, U_pos = _lower_upper(z_pos, sign_pos, np.where(token_pair, 0.0, weight))

    # -- 3. cases --------------------------------------------------------------------------------------------
    partners = task.partner_mask()
    others_mask = visible & ~np.eye(n, dtype=bool)
    has_others = others_mask.any(axis=1)
    L_pos_others = np.where(has_others, np.where(others_mask, L_pos, np.inf).min(axis=1), 0.0)  # [i]
    U_pos_others = np.where(has_others, np.where(others_mask, U_pos, -np.inf).max(axis=1), 0.0)
    L_self = _exact_add(L_tok[tokens, tokens][None, :], np.diag(L_pos)[:, None])  # [i, a]
    U_self = _exact_add(U_tok[tokens, tokens][None, :], np.diag(U_pos)[:, None])
    non = np.ones((M, M), bool)
    non[tokens, partner] = False
    L_tok_non = np.where(non, L_tok, np.inf).min(axis=1)
    U_tok_non = np.where(non, U_tok, -np.inf).max(axis=1)
    self_match = (tokens == partner)[None, :]
    X = _exact_add(L_tok[tokens, partner][None, :], L_pos_others[:, None])  # [i, a]
    average = np.where(self_match, np.minimum(X, _exact_add(X, L_self) / 2), X)
    L_non = _exact_add(L_tok_non[None, :], L_pos_others[:, None])
    L_non = np.where(self_match, L_non, np.minimum(L_non, L_self))
    eps = np.minimum(1.0, up((counts[:, None] - 1) * off_match[None, :]))
    # min over eps' in [0, eps] of avg - eps' (avg - L_non), rounded down
    shortfall = up(eps * up(np.maximum(average - L_non, 0.0)))
    match_low = down(down(average - shortfall) + bias)
    U_others = _exact_add(U_tok_non[None, :], U_pos_others[:, None])
    none_high = up(np.where(has_others[:, None], np.maximum(U_others, U_self), U_self) + bias)

    # -- 4. rounding -----------------------------------------------------------------------------------------
    A_tok = _abs_weighted(z_tok, np.where(token_pair, weight, 0.0))  # sum_p |w_p| |z_p|, [a, u]
    A_pos = _abs_weighted(z_pos, np.where(token_pair, 0.0, weight))  # [i, j]
    A_pos_keys = np.where(visible, A_pos, 0.0).max(axis=1)
    A_tok_non = np.where(non, A_tok, 0.0).max(axis=1)
    magnitude_match = up(A_tok[tokens, partner][None, :] + A_pos_keys[:, None] + up(eps * up(A_tok_non[None, :]
                                                                                             + A_pos_keys[:, None])))
    magnitude_none = up(np.maximum(A_tok_non[None, :] + A_pos_keys[:, None],
                                   A_tok[tokens, tokens][None, :] + np.diag(A_pos)[:, None]))
    v_max = np.maximum(np.abs(v_tok).max(axis=0), np.abs(v_pos).max(axis=0))
    unit_values = np.isin(np.concatenate([v_tok, v_pos]), (-1.0, 0.0, 1.0)).all(axis=0)
    ref_max = np.maximum(np.abs(W_E).max(axis=0), np.abs(W_pos).max(axis=0))  # |x| per direction, any position
    perturbation = _Perturbation(fmt, strict, v_max, unit_values, np.abs(W_O[:, attn_dirs]), C, attn_dirs, ref_max,
                                 weight, bias, w["blocks.0.mlp.W_in"].shape[1])
    low = fmt.round_array(down(match_low - perturbation(counts, magnitude_match)), "the verdict")
    high = fmt.round_array(up(none_high + perturbation(counts, magnitude_none)), "the verdict")

    # -- the readout at the ends of the verdict's enclosure ----------------------------------------------------
    W_U, b_U = w["unembed.W_U"], w["unembed.b_U"]
    require(not np.delete(W_U, verdict, axis=0).any(), "the readout reads more than the verdict direction")
    require(W_U[verdict, 1] >= 0 >= W_U[verdict, 0], "logit 1 must not fall, nor logit 0 rise, with the verdict")
    can_match = partners.any(axis=1)
    cases = []
    for i in range(n):
        for answer, ends, better in ((1, low[i], np.argmin), (0, high[i], np.argmax)):
            if answer == 1 and not can_match[i]:
                continue
            x = int(better(ends))
            logits = affine(np.array([[ends[x]]]), W_U[verdict:verdict + 1], b_U, fmt, strict, "a logit")[0]
            margin = Fraction(float(logits[answer])) - Fraction(float(logits[1 - answer]))
            require(margin > 0, f"position {i}, token {x}: answer {answer} is not provably read out (verdict bound "
                                f"{float(ends[x]):.6g})")
            cases.append({"position": i, "answer": answer, "token": x, "verdict_bound": float(ends[x]),
                          "margin": number(margin)})
    record["readout"] = {"verdict": weights.basis[verdict] if weights.basis else str(verdict), "cases": cases}
    return record


def _exact_add(a, b) -> np.ndarray:
    """a + b of exact float64 arrays, exactly (or Refused)."""
    a, b = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    finite = np.isfinite(a) & np.isfinite(b)
    total = a + b
    back = total - a
    exact = ((a - (total - back)) + (b - back)) == 0  # TwoSum: the rounding error of a + b
    require((exact | ~finite).all(), "a bound's sum is not exact in float64")
    return total


def _lower_upper(z: np.ndarray, sign: np.ndarray, weight: np.ndarray):
    """Per key: L = sum_{w>0} w s z + sum_{w<0} w |z| and U = sum_{w>0} w |z| + sum_{w<0} w s z (step 2), exactly."""
    positive, negative = np.maximum(weight, 0.0), np.minimum(weight, 0.0)
    linear, absolute = sign * z, np.abs(z)
    L = exact_matmul(np.concatenate([linear, absolute], axis=-1), np.concatenate([positive, negative]), "L")
    U = exact_matmul(np.concatenate([absolute, linear], axis=-1), np.concatenate([positive, negative]), "U")
    return L, U


def _abs_weighted(z: np.ndarray, weight: np.ndarray) -> np.ndarray:
    return exact_matmul(np.abs(z), np.abs(weight), "a magnitude")


def _absolute_pairs(w: dict, attn_dirs: np.ndarray, embedded: np.ndarray) -> dict:
    """V = bias + sum_p weights[p] |columns[:, p] . resid_mid| in one verdict direction (module docstring)."""
    W_in, b_in = w["blocks.0.mlp.W_in"], w["blocks.0.mlp.b_in"]
    W_out, b_out = w["blocks.0.mlp.W_out"], w["blocks.0.mlp.b_out"]
    outputs = np.flatnonzero(W_out.any(axis=0) | (b_out != 0))
    require(outputs.size == 1, f"the MLP writes {outputs.size} directions; the 2-Sum proof needs one verdict")
    verdict = int(outputs[0])
    require(not attn_dirs[verdict] and not embedded[verdict], "the verdict direction must be empty before the MLP")
    units = [int(h) for h in np.flatnonzero(W_out[:, verdict])]
    require(not b_in[units].any(), "the MLP's units must have no bias (relu(z) + relu(-z) = |z|)")
    unpaired, columns, weights = set(units), [], []
    for h in units:
        if h not in unpaired:
            continue
        unpaired.discard(h)
        mate = next((g for g in sorted(unpaired) if np.array_equal(W_in[:, g], -W_in[:, h])
                     and W_out[g, verdict] == W_out[h, verdict]), None)
        require(mate is not None, f"MLP unit {h} has no partner unit computing relu of the negated input")
        unpaired.discard(mate)
        columns.append(W_in[:, h])
        weights.append(W_out[h, verdict])
    return {"verdict": verdict, "columns": np.array(columns).T.reshape(W_in.shape[0], -1),
            "weights": np.array(weights), "bias": float(b_out[verdict])}


class _Perturbation:
    """A bound on |computed V - (b + sum_p w_p |z_p(pi)|)| per query position (N keys) and token (`magnitude`
    bounds sum_p |w_p| |z_p(pi)| there): step 4 of the module docstring. Every operation rounds up."""

    def __init__(self, fmt: Format, strict: bool, v_max, unit_values, W_O_attn, C, attn_dirs, ref_max, weight, bias,
                 hidden: int):
        self.fmt, self.strict, self.hidden = fmt, strict, hidden
        self.v_max, self.unit_values, self.W_O_attn = v_max, unit_values, W_O_attn
        self.C_attn = np.abs(C[attn_dirs])
        self.width = int(np.count_nonzero(C, axis=0).max(initial=1))
        self.depth = int(np.count_nonzero(W_O_attn, axis=0).max(initial=1))
        self.selects = bool((np.count_nonzero(W_O_attn, axis=0) <= 1).all() and np.isin(W_O_attn, (0.0, 1.0)).all())
        self.differences = bool((np.count_nonzero(C, axis=0) <= 2).all() and np.isin(np.abs(C), (0.0, 1.0)).all())
        outside = np.where(attn_dirs, 0.0, ref_max)  # what the query's own directions hold, at most
        self.ref_part = up((outside @ np.abs(C)) * (1 + 2.0 ** -48))  # their share of each |z_p|
        self.weight, self.bias = np.abs(weight), abs(bias)
        self.h_max = up(up(v_max @ W_O_attn) * (1 + 2.0 ** -50))  # |exact head output| per attention direction

    def __call__(self, counts: np.ndarray, magnitude: np.ndarray) -> np.ndarray:
        out = np.empty(magnitude.shape)
        for N in np.unique(counts):
            rows = counts == N
            out[rows] = self._bound(int(N), magnitude[rows])
        return out

    def _bound(self, N: int, magnitude: np.ndarray) -> np.ndarray:
        u, eta = float(self.fmt.unit), float(self.fmt.eta)
        w, P = self.weight, self.weight.size
        widen = 1 + 2.0 ** -48  # float64 matrix products of nonnegative bounds, rounded up
        if not self.strict:  # step 4, theory: the float64 head output, its store, z_p and V in float64
            head_float = up(up(float64_softmax_error(N, self.W_O_attn.shape[0]) * self.h_max) * widen)
            head_error = up(up(up(u * up(self.h_max + head_float)) + eta) + head_float)
            g_dot, g_mlp = _gamma(self.width, 2.0 ** -53), _gamma(self.hidden + 1, 2.0 ** -53)  # float64's unit
            zeta = up((head_error @ self.C_attn + 2 * g_dot * ((self.h_max + head_error) @ self.C_attn
                                                               + self.ref_part)) * widen)
            sum_size = up((magnitude + w @ zeta + self.bias) * widen)
            return up((w @ zeta + g_mlp * sum_size) * widen)
        v = self.v_max
        g_sum = _gamma(N, u) if u else 0.0
        rho = up(up(u + g_sum) / down(1 - g_sum))  # |p_j - pi_j| <= rho pi_j + eta
        total_p = up(up(1 + rho) + up(N * eta))  # >= sum_j p_j
        terms = up(up(up(1 + u) * up(v * total_p)) + up(N * eta))  # >= sum_j |round(p_j v_j)|
        product_error = np.where(self.unit_values, 0.0, up(up(u * up(v * total_p)) + up(N * eta)))
        mix_error = up(up(up(v * up(rho + up(N * eta))) + product_error) + up(g_sum * terms))
        if self.selects:  # each attention direction copies one head column exactly
            head_error = up((mix_error @ self.W_O_attn) * widen)
        else:
            g_head = _gamma(self.depth + 1, u)
            head_error = up((mix_error @ self.W_O_attn + g_head * ((v + mix_error) @ self.W_O_attn)) * widen
                            + 2 * (self.depth + 1) * eta)
        if self.differences:  # z_p: one rounding of an exact two-term sum
            zeta = up((head_error @ self.C_attn) * (1 + u) * widen)
            relative = u
        else:
            g_dot = _gamma(self.width + 1, u)
            zeta = up((head_error @ self.C_attn + g_dot * ((self.h_max + head_error) @ self.C_attn + self.ref_part))
                      * widen + 2 * (self.width + 1) * eta)
            relative = 0.0
        # V: an ordered sum of the units' rounded products and the bias; of each pair one unit is an exact 0
        terms_mlp = P + 1
        g_mlp = _gamma(terms_mlp + 1, u)
        sum_size = up((magnitude + w @ zeta + self.bias) * widen)
        return up((w @ zeta + relative * sum_size + g_mlp * sum_size + 2 * (terms_mlp + 1) * eta) * widen)


def _block_choice(fmt: Format, strict: bool, q, k, partner, block: int, kept: int) -> dict:
    """Step 5: the block-choice lemma, from the exact (theory) or as-rounded (strict) queries and keys."""
    require(kept >= 1, "with k = 0 other blocks a query never sees a partner outside its own block")
    nonzero = q != 0
    require((nonzero.sum(axis=1) == 1).all(), "a query does not have exactly one nonzero coordinate")
    e = nonzero.argmax(axis=1)
    tokens = np.arange(q.shape[0])
    lam = q[tokens, e]
    require((lam > 0).all(), "a query's nonzero coordinate is not positive")
    require((k >= 0).all(), "a key coordinate is negative, so a partner-free block could outscore a partner's")
    at = k[:, e].T  # [a, u]: key coordinate e(a) of token u
    off = np.ones(at.shape, bool)
    off[tokens, partner] = False
    require(not at[off].any(), "a key is nonzero where a non-partner's query looks")
    kappa = at[tokens, partner]
    require((kappa > 0).all(), "a partner's key is zero where its query looks")
    if strict:  # rounded sums of nonnegative terms never drop below a term; rounding is monotone
        least = fmt.mul(lam, fmt.div(kappa, float(block), "a block summary"), "a block score")
        require((least > 0).all(), "a block holding a partner may score 0 (underflow)")
    else:  # exact, enclosed; the executor's float64 stand-in rounds its three steps, so it must stay far from 0
        least = down(down(lam * down(kappa / block)) * (1 - 2.0 ** -50))
        require((least >= 2.0 ** -1000).all(), "a block holding a partner may score 0 (float64 underflow in the "
                                               "executor's stand-in for theory)")
    return {"block": block, "k": kept, "least_partner_block_score": float(least.min()),
            "partner_free_block_score": 0.0}
