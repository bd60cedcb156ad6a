"""The proof that a network from a weights file answers every input of its composition family.

The claim: under the stated format and semantics, for every input of Composition(L, m, n) the network's readout at
the last position is i_L. The proof, re-derived here from the weights, is an induction over the layers at that
position:

0. Shape: L + 1 layers, each one head of causal softmax attention or of linear attention (no normaliser), with an
   optional MLP; the readout reads the last position. `ranges` shows nothing overflows anywhere.
1. Keys read position-only directions (the token table is zero there and no earlier layer writes them), so the key
   of position j is one exact vector k_j; values read token-only directions (zero in the position table, written by
   no earlier layer), so the value at j is one exact vector v(u) per token u. Adding an exact zero to a format
   value keeps it, so the residual stream holds the embedding there after every layer.
2. States: the read position's residual vector before layer l is one of finitely many exact vectors, each with the
   task's future (the query digits still to be used, the current index i_{l-1}); the first are the embeddings of
   the query tokens. Directions no later step reads or writes are dropped and equal states merged.
3. Layer l, softmax. Each distinct query is a case; its scores against every k_j are exact (theory) or as rounded
   (strict). The unique best key t* must be the position the task reads, for every state of the case.
   * theory: the off-target mass is R <= sum_{j != t*} e^(s_j - s_t*), enclosed from above by MPFR, so the target's
     weight is at least pi = 1/(1 + R), and the mix is pi' v(tau) + (1 - pi') (a convex combination of the other
     values), pi' in [pi, 1]: per coordinate between min(v, pi v + (1 - pi) lo) and max(v, pi v + (1 - pi) hi), lo
     and hi the least and greatest value any other position can hold there. The executor's theory runs compute
     this softmax, mix and head output in float64, so before the store the enclosure is widened by a bound on
     float64's error there (`numbers.float64_softmax_error`); every other sum inside a block must be exact in
     float64 (`products.exact_matmul`, `mlp`), and `ranges` keeps every value inside a block finite there.
   * strict: the numerators round(exp(round(s_j - max))), their index-order rounded sum D and the weights
     round(e_j / D) are computed exactly as the executor does; the mix is the index-order rounded sum of
     round(p_j v_j), enclosed by folding intervals (rounding is monotone): at t* the target's own value, elsewhere
     the hull of the values the position allows.
   Layer l, linear: phi(k_j) per position; every key coordinate must be nonzero at one position at most (its owner),
   and each case's phi(q) must read coordinates owned by t* alone (or by nobody): each state row is then
   round(phi(k_t*)_i v(tau)) and the read-out a function of tau alone, computed exactly.
   Then the head output, b_O and the residual add, and the MLP evaluated on every format value of the box (`mlp`):
   each direction the layer writes must come out as one exact value per tau. The next states follow.
4. Readout: for every final state, the logit of the answer i_L beats every other.
The record this returns is what the certificate lists; `check` compares the two entry by entry.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from verify.checker.files import Weights
from verify.checker.mlp import MLP
from verify.checker.numbers import (Format, down, exp_upper, float64_softmax_error, lower_float, number, up,
                                    upper_float)
from verify.checker.products import affine, exact_matmul, strict_matmul
from verify.checker.ranges import network_ranges
from verify.checker.refusal import require
from verify.checker.tasks import Composition

#: Score matrices are formed for at most this many (case x key) entries at a time.
CHUNK = 1 << 21


def rounded_arrays(weights: Weights, fmt: Format) -> dict[str, np.ndarray]:
    """Every weight rounded to the format, as a run rounds it."""
    return {name: fmt.round_array(array, f"weight {name}") for name, array in weights.arrays.items()}


def prove(weights: Weights, task: Composition, fmt: Format, strict: bool) -> dict:
    return _Proof(weights, task, fmt, strict).run()


class _Proof:
    def __init__(self, weights: Weights, task: Composition, fmt: Format, strict: bool):
        self.task, self.fmt, self.strict = task, fmt, strict
        self.labels = weights.basis
        self.layers = weights.structure["layers"]
        self.w = rounded_arrays(weights, fmt)
        require(weights.structure.get("read") == "last", "the readout must read the last position")
        require(len(self.layers) == task.L + 1, f"the task reads {task.L + 1} table entries; the network has "
                                                f"{len(self.layers)} layers")
        self.n = task.prompt_length
        W_E, W_pos = self.w["embed.W_E"], self.w["pos_embed.W_pos"]
        require(W_E.shape[0] >= task.vocab and W_pos.shape[0] >= self.n and self.w["unembed.W_U"].shape[1]
                >= task.value_vocab, "the network's vocabulary, context or answers do not cover the task")
        self.W_E, self.W_pos = W_E[:task.vocab], W_pos[:self.n]
        self.d_model = W_E.shape[1]
        require(len(self.labels) == self.d_model, "the basis labels do not match d_model")
        self.writes = []
        for l, spec in enumerate(self.layers):
            p = f"blocks.{l}"
            require(spec.get("mixer") in ("attention", "linear"), f"{p}.attn is a {spec.get('mixer')} layer; the "
                                                                   "proof handles softmax and linear attention")
            require(self.w[f"{p}.attn.W_Q"].shape[0] == 1, f"{p}.attn must have one head")
            require(spec.get("mixer") != "attention" or spec.get("causal") is True, f"{p}.attn must be causal")
            # Spelled as the executor reads them (absent: its defaults, identity and no normaliser), nothing else.
            require(spec.get("mixer") != "linear" or (spec.get("feature_map", "identity") in ("identity", "relu")
                                                      and spec.get("normalize", False) is False),
                    f"{p}.attn: the proof handles linear attention with feature_map identity or relu and no "
                    f"normaliser, not {spec.get('feature_map')!r} / normalize {spec.get('normalize')!r}")
            written = self.w[f"{p}.attn.W_O"][0].any(axis=0) | (self.w[f"{p}.attn.b_O"] != 0)
            if spec.get("mlp"):
                written = written | self.w[f"{p}.mlp.W_out"].any(axis=0) | (self.w[f"{p}.mlp.b_out"] != 0)
            self.writes.append(written)

    def _reads(self, l: int) -> np.ndarray:
        """Directions the read position's computation at layer l reads or (through the residual add) keeps."""
        p = f"blocks.{l}"
        reads = self.w[f"{p}.attn.W_Q"][0].any(axis=1) | self.writes[l]
        if self.layers[l].get("mlp"):
            reads = reads | self.w[f"{p}.mlp.W_in"].any(axis=1)
        return reads

    def live(self, l: int) -> np.ndarray:
        """Directions the read position still needs before layer l (l = L + 1: the readout's)."""
        live = self.w["unembed.W_U"].any(axis=1).copy()
        for later in range(l, len(self.layers)):
            live |= self._reads(later)
        return live

    def run(self) -> dict:
        record = {"ranges": {"largest_residual_entry_after_layer": network_ranges(
            self.fmt, self.strict, self.w, {"layers": self.layers}, self.task.vocab, self.n)}}
        states, rest, index = self._initial()
        record["layers"] = []
        for l in range(len(self.layers)):
            entry, (states, rest, index) = self._layer(l, states, rest, index)
            record["layers"].append(entry)
        record["readout"] = self._readout(states, index)
        return record

    def _initial(self):
        first, count = self.task.alphabet("w")
        tokens = first + np.arange(count)
        x = self.fmt.add(self.W_E[tokens], self.W_pos[self.n - 1], "the read position's embedding")
        return self._merge(x, tokens - self.task.value_vocab, np.zeros(count, dtype=np.int64), self.live(0))

    @staticmethod
    def _merge(x, rest, index, live):
        """States that agree on the live directions and the task's future are one."""
        keys = np.concatenate([np.where(live, x, 0.0), rest[:, None], index[:, None]], axis=1)
        _, rows = np.unique(keys, axis=0, return_index=True)
        return np.where(live, x, 0.0)[rows], rest[rows], index[rows]

    # -- one layer ------------------------------------------------------------------------------------------
    def _layer(self, l: int, states, rest, index):
        p = f"blocks.{l}.attn"
        w = {k: self.w[f"{p}.{k}"][0] for k in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V")}
        earlier = np.zeros(self.d_model, bool)
        for previous in self.writes[:l]:
            earlier |= previous
        key_dirs, value_dirs = w["W_K"].any(axis=1), w["W_V"].any(axis=1)
        require(not (key_dirs & (self.W_E.any(axis=0) | earlier)).any(),
                f"{p}'s keys read directions that depend on more than the position")
        require(not (value_dirs & (self.W_pos.any(axis=0) | earlier)).any(),
                f"{p}'s values read directions that depend on more than the token")
        require(not (states[:, self.writes[l]] != 0).any(),
                f"layer {l} writes directions that are not empty before it at the read position")
        if self.layers[l].get("mlp"):
            mlp_reads = self.w[f"blocks.{l}.mlp.W_in"].any(axis=1)
            attn_writes = w["W_O"].any(axis=0) | (self.w[f"{p}.b_O"] != 0)
            require(not (mlp_reads & ~attn_writes).any(), f"blocks.{l}.mlp reads directions its attention does not "
                                                          "write")
        fmt, strict = self.fmt, self.strict
        q_dirs = w["W_Q"].any(axis=1)
        queries = affine(states[:, q_dirs], w["W_Q"][q_dirs], w["b_Q"], fmt, strict, f"{p} queries")
        keys = affine(self.W_pos[:, key_dirs], w["W_K"][key_dirs], w["b_K"], fmt, strict, f"{p} keys")
        values = affine(self.W_E[:, value_dirs], w["W_V"][value_dirs], w["b_V"], fmt, strict, f"{p} values")
        linear = self.layers[l]["mixer"] == "linear"
        if linear and self.layers[l].get("feature_map") == "relu":
            queries, keys = np.maximum(queries, 0.0), np.maximum(keys, 0.0)
        cases, case_of = np.unique(queries, axis=0, return_inverse=True)
        case_of = case_of.reshape(-1)
        wanted = self.task.read_position(l, rest, index)

        if linear:
            targets, heads_lo, heads_hi, case_records = self._linear(p, w, cases, keys, values, wanted, case_of, l)
        else:
            targets, heads_lo, heads_hi, case_records = self._softmax(p, w, cases, keys, values, wanted, case_of, l)
        tokens = np.arange(*self._alphabet_range(targets, p))
        b_O = self.w[f"{p}.b_O"]
        attn_lo = fmt.add(heads_lo, b_O, f"{p} attention output")
        attn_hi = fmt.add(heads_hi, b_O, f"{p} attention output")
        # The layer's directions are empty before it, so resid_mid = round(0 + attn) = attn on them.
        attn_dirs = np.flatnonzero(w["W_O"].any(axis=0) | (b_O != 0))
        live_after = self.live(l + 1)
        written = np.flatnonzero(self.writes[l] & live_after)
        outputs = np.zeros((tokens.size, self.d_model))
        if self.layers[l].get("mlp"):
            mlp = MLP.from_dense(fmt, strict, *(self.w[f"blocks.{l}.mlp.{k}"] for k in ("W_in", "b_in", "W_out",
                                                                                         "b_out")), f"blocks.{l}.mlp")
            for d in written:
                relevant = mlp.inputs(int(d)) + [int(d)]
                boxes, which = np.unique(np.concatenate([attn_lo[:, relevant], attn_hi[:, relevant]], axis=1), axis=0,
                                         return_inverse=True)
                values = [float(mlp.output(int(d), attn_lo[t], attn_hi[t]))
                          for t in np.unique(which.reshape(-1), return_index=True)[1]]
                outputs[:, d] = np.array(values)[which.reshape(-1)]
        else:
            require(np.array_equal(attn_lo[:, written], attn_hi[:, written]),
                    f"layer {l}: a written direction is not exact after the layer")
            outputs[:, written] = attn_lo[:, written]
        entry = {"layer": l, "mixer": self.layers[l]["mixer"], "states": int(states.shape[0]),
                 "query_directions": [self.labels[d] for d in np.flatnonzero(q_dirs)], "cases": case_records,
                 "fetched": {self.labels[d]: sorted({(float(a), float(b)) for a, b in zip(attn_lo[:, d], attn_hi[:, d])})
                             for d in attn_dirs},
                 "writes": {self.labels[d]: sorted(set(outputs[:, d].tolist())) for d in written}}
        entry["fetched"] = {k: [list(v) for v in vals] for k, vals in entry["fetched"].items()}

        # Next states: the kept directions of each state, times every token the target may hold.
        keep = live_after & ~self.writes[l]
        new_rest = self.task.advance(l, rest) if l >= 1 else rest
        base = np.concatenate([np.where(keep, states, 0.0), new_rest[:, None].astype(np.float64)], axis=1)
        base, rows = np.unique(base, axis=0, return_index=True)
        x = np.repeat(base[:, :-1], tokens.size, axis=0)
        x[:, written] = np.tile(outputs[:, written], (base.shape[0], 1))
        nxt = self._merge(x, np.repeat(new_rest[rows], tokens.size), np.tile(tokens, base.shape[0]), live_after)
        return entry, nxt

    def _alphabet_range(self, targets: np.ndarray, p: str) -> tuple[int, int]:
        names = {s.name for s in self.task.segments for t in np.unique(targets) if s.start <= t < s.stop}
        require(len(names) == 1, f"{p}'s targets lie in several segments")
        first, count = self.task.alphabet(names.pop())
        return first, first + count

    @staticmethod
    def _check_targets(p: str, targets, wanted, case_of):
        wrong = np.flatnonzero(targets[case_of] != wanted)
        if wrong.size:
            s = wrong[0]
            require(False, f"{p} attends to position {int(targets[case_of[s]])} where the task reads {int(wanted[s])}")

    def _softmax(self, p, w, cases, keys, values, wanted, case_of, l):
        fmt, strict, n = self.fmt, self.strict, self.n
        segment_of = np.zeros(n, dtype=np.int64)
        hull_lo, hull_hi = [], []
        for s, segment in enumerate(self.task.segments):
            segment_of[segment.start:segment.stop] = s
            first, count = self.task.alphabet(segment.name)
            hull_lo.append(values[first:first + count].min(axis=0))
            hull_hi.append(values[first:first + count].max(axis=0))
        hull_lo, hull_hi = np.array(hull_lo), np.array(hull_hi)  # [segments, d_v]
        targets = np.empty(cases.shape[0], dtype=np.int64)
        weights = np.empty(cases.shape[0])
        lo_parts, hi_parts = [], []
        chunk = max(1, CHUNK // n)
        for start in range(0, cases.shape[0], chunk):
            rows = slice(start, start + chunk)
            scores = (strict_matmul(cases[rows], keys.T, fmt, f"{p} scores") if strict
                      else exact_matmul(cases[rows], keys.T, f"{p} scores"))
            top = scores.max(axis=1)
            require(((scores == top[:, None]).sum(axis=1) == 1).all(), f"{p}: a query has no unique best key")
            target = scores.argmax(axis=1)
            targets[rows] = target
            first, stop = self._alphabet_range(target, p)
            target_values = values[first:stop]  # [tokens, d_v]
            if strict:
                weight, lo, hi = self._strict_mix(p, scores, top, target, target_values, hull_lo, hull_hi, segment_of)
            else:
                weight, lo, hi = self._theory_mix(scores, top, target, target_values, hull_lo, hull_hi, segment_of)
            weights[rows] = weight
            lo_parts.append(lo)
            hi_parts.append(hi)
        self._check_targets(p, targets, wanted, case_of)
        mixed_lo, mixed_hi = np.min(lo_parts, axis=0), np.max(hi_parts, axis=0)  # [tokens, d_v], hull over cases
        magnitude = np.maximum(np.abs(hull_lo), np.abs(hull_hi)).max(axis=0)  # |v_c| at any position, at most
        heads_lo, heads_hi = self._head(p, w["W_O"], mixed_lo, mixed_hi, magnitude)
        records = [{"query": case.tolist(), "target": int(t), "target_weight_at_least": number(wt)}
                   for case, t, wt in zip(cases, targets, weights)]
        return targets, heads_lo, heads_hi, records

    def _theory_mix(self, scores, top, target, target_values, hull_lo, hull_hi, segment_of):
        """pi = 1/(1 + R) per case, then the convex-combination hull (module docstring, step 3, theory), its ends
        computed in float64 rounded outward."""
        differences = scores - top[:, None]  # exact: two float64 integers on one grid, below 2^52 of it
        distinct, inverse = np.unique(differences, return_inverse=True)
        bounds = [exp_upper(Fraction(float(v))) for v in distinct]
        inverse = inverse.reshape(differences.shape)
        counts = np.zeros((target.size, distinct.size), dtype=np.int64)
        np.add.at(counts, (np.repeat(np.arange(target.size), inverse.shape[1]), inverse.ravel()), 1)
        counts[np.arange(target.size), inverse[np.arange(target.size), target]] -= 1  # the target itself
        patterns, which = np.unique(counts, axis=0, return_inverse=True)
        weight_of = [lower_float(1 / (1 + sum((int(c) * b for c, b in zip(row, bounds) if c), Fraction(0))))
                     for row in patterns]
        weights = np.array(weight_of)[which.reshape(-1)]
        pi = weights.min()
        # an off-target key may be at any position of the prompt
        other_lo, other_hi = hull_lo[segment_of].min(axis=0), hull_hi[segment_of].max(axis=0)
        # 1 - pi in float64 is exact only for pi >= 1/2 (Sterbenz), so it is enclosed: (1 - pi) lo lies between
        # rest_low lo and rest_high lo whatever lo's sign, and each product is rounded to nearest, hence down/up.
        rest = 1 - Fraction(pi)
        rest_low, rest_high = lower_float(rest), upper_float(rest)
        mixed_lo = down(down(pi * target_values) + down(np.minimum(rest_low * other_lo, rest_high * other_lo)))
        mixed_hi = up(up(pi * target_values) + up(np.maximum(rest_low * other_hi, rest_high * other_hi)))
        return weights, np.minimum(target_values, mixed_lo), np.maximum(target_values, mixed_hi)

    def _strict_mix(self, p, scores, top, target, target_values, hull_lo, hull_hi, segment_of):
        """The executor's softmax, exactly, and the mix folded as intervals (module docstring, step 3, strict)."""
        fmt = self.fmt
        numerators = fmt.exp_array(fmt.sub(scores, top[:, None], f"{p} score differences"))
        denominator = None
        for j in np.flatnonzero(numerators.any(axis=0)):
            column = numerators[:, j]
            denominator = column if denominator is None else fmt.add(denominator, column, f"{p} softmax sums")
        pattern = fmt.div(numerators, denominator[:, None], f"{p} attention weights")
        cases = np.arange(target.size)
        weight = pattern[cases, target]
        # Per value coordinate, the distinct values the target may hold: the intervals are folded per distinct
        # value. Coordinates with the same hulls at every position and the same target values fold alike: once.
        distinct = [np.unique(target_values[:, c]) for c in range(target_values.shape[1])]
        width = max(v.size for v in distinct)
        grid = np.array([np.pad(v, (0, width - v.size), mode="edge") for v in distinct])  # [d_v, K]
        signature = np.concatenate([hull_lo, hull_hi, grid.T], axis=0)  # one column per coordinate
        _, first, alike = np.unique(signature, axis=1, return_index=True, return_inverse=True)
        hull = np.stack([hull_lo[:, first], hull_hi[:, first]], axis=1)  # [segments, lo/hi, coordinates]
        grid = grid[first]
        acc = None
        for j in np.flatnonzero(pattern.any(axis=0)):
            term = fmt.mul(pattern[:, j, None, None], hull[segment_of[j]][None], f"{p} mix")  # [cases, 2, coords]
            term = np.repeat(term[..., None], grid.shape[1], axis=-1)  # [cases, 2, coords, K]
            hit = np.flatnonzero(target == j)
            if hit.size:
                term[hit] = fmt.mul(pattern[hit, j, None, None, None], grid[None, None], f"{p} mix")
            acc = term if acc is None else fmt.add(acc, term, f"{p} mix")
        alike = alike.reshape(-1)
        hull_case_lo, hull_case_hi = acc[:, 0].min(axis=0)[alike], acc[:, 1].max(axis=0)[alike]  # [d_v, K]
        which = np.stack([np.searchsorted(distinct[c], target_values[:, c]) for c in range(len(distinct))], axis=1)
        columns = np.arange(target_values.shape[1])
        return weight, hull_case_lo[columns, which], hull_case_hi[columns, which]

    def _head(self, p, W_O, mixed_lo, mixed_hi, magnitude):
        """store(mix W_O) for mixes in the box [lo, hi] (interval endpoints; W_O a point; `magnitude` bounds every
        position's values, coordinate by coordinate)."""
        fmt = self.fmt
        if not self.strict:  # the exact head output enclosed in float64 rounded outward, widened, then the store
            lo = np.zeros((mixed_lo.shape[0], self.d_model))
            hi = np.zeros_like(lo)
            for c in np.flatnonzero(W_O.any(axis=1)):
                a, b = mixed_lo[:, c:c + 1] * W_O[c], mixed_hi[:, c:c + 1] * W_O[c]
                lo, hi = down(lo + down(np.minimum(a, b))), up(hi + up(np.maximum(a, b)))
            # a float64 product of nonnegative bounds errs by far less than the factor 1 + 2^-40
            spread = up(up(magnitude @ np.abs(W_O)) * (1 + 2.0 ** -40))
            slack = up(float64_softmax_error(self.n, W_O.shape[0]) * spread)
            lo, hi = down(lo - slack), up(hi + slack)
            written = W_O.any(axis=0)
            lo = np.where(written, fmt.round_array(lo, f"{p} head output"), 0.0)
            hi = np.where(written, fmt.round_array(hi, f"{p} head output"), 0.0)
            return lo, hi
        lo = hi = None
        for c in np.flatnonzero(W_O.any(axis=1)):
            weight = W_O[c]
            a = fmt.mul(mixed_lo[:, c:c + 1], weight, f"{p} head output")
            b = fmt.mul(mixed_hi[:, c:c + 1], weight, f"{p} head output")
            lo = np.minimum(a, b) if lo is None else fmt.add(lo, np.minimum(a, b), f"{p} head output")
            hi = np.maximum(a, b) if hi is None else fmt.add(hi, np.maximum(a, b), f"{p} head output")
        zero = np.zeros((mixed_lo.shape[0], self.d_model))
        return (zero, zero) if lo is None else (lo, hi)

    def _linear(self, p, w, cases, keys, values, wanted, case_of, l):
        fmt, strict = self.fmt, self.strict
        nonzero = keys != 0
        shared = np.flatnonzero(nonzero.sum(axis=0) > 1)
        require(shared.size == 0, f"{p}: key coordinate {int(shared[0]) if shared.size else 0} is nonzero at several "
                                  "positions")
        owners = np.where(nonzero.any(axis=0), nonzero.argmax(axis=0), -1)
        targets = np.empty(cases.shape[0], dtype=np.int64)
        for c, query in enumerate(cases):
            read = set(owners[query != 0].tolist()) - {-1}
            require(len(read) == 1, f"{p}: a query reads the keys of {len(read)} positions, not one")
            targets[c] = read.pop()
        self._check_targets(p, targets, wanted, case_of)
        first, stop = self._alphabet_range(targets, p)
        target_values = values[first:stop]  # [tokens, d_v]
        lo = hi = None
        for query, target in zip(cases, targets):
            rows = np.flatnonzero((query != 0) & (owners == target))
            # state row i: round(phi(k_t*)_i v(tau)) (added to an exact zero, stored); other rows meet q_i = 0
            state = np.zeros(target_values.shape[:1] + (rows.size,) + target_values.shape[1:])
            for k, i in enumerate(rows):
                if strict:  # both factors are format values: one float64 product, then one rounding
                    state[:, k] = fmt.mul(keys[target, i], target_values, f"{p} state")
                else:  # theory: k and v are exact sums with more bits than the format; the exact model stores
                    # round(k v), the executor round(fl64(k v)): the two agree only where fl64 is exact
                    product = exact_matmul(target_values[..., None], np.array([[keys[target, i]]]), f"{p} state")
                    state[:, k] = fmt.round_array(product[..., 0], f"{p} state")
            if strict:  # the read-out sum over i in index order
                read = np.zeros(target_values.shape)
                for k, i in enumerate(rows):
                    term = fmt.mul(query[i], state[:, k], f"{p} read-out")
                    read = term if k == 0 else fmt.add(read, term, f"{p} read-out")
            else:
                read = exact_matmul(np.swapaxes(state, 1, 2), query[rows], f"{p} read-out")
            head = (strict_matmul(read, w["W_O"], fmt, f"{p} head output") if strict
                    else exact_matmul(read, w["W_O"], f"{p} head output"))
            head = fmt.round_array(head, f"{p} head output")
            lo = head if lo is None else np.minimum(lo, head)
            hi = head if hi is None else np.maximum(hi, head)
        records = [{"query": case.tolist(), "target": int(t)} for case, t in zip(cases, targets)]
        return targets, lo, hi, records

    # -- readout --------------------------------------------------------------------------------------------
    def _readout(self, states, answers) -> dict:
        W_U, b_U = self.w["unembed.W_U"], self.w["unembed.b_U"]
        read = W_U.any(axis=1)
        logits = affine(states[:, read], W_U[read], b_U, self.fmt, self.strict, "a logit")
        rows = np.arange(states.shape[0])
        right = logits[rows, answers]
        others = logits.copy()
        others[rows, answers] = -np.inf
        best_other = others.max(axis=1)
        require((right > best_other).all(), "the readout's answer logit does not beat every other logit for some "
                                             "final state")
        if not np.isfinite(best_other).any():  # a single answer column: no other logit to beat
            worst = None
        else:
            gaps = right - best_other  # rounded; the exact least gap is among those within a relative 2^-40 of it
            near = np.flatnonzero(gaps <= gaps.min() * (1 + 2.0 ** -40))
            worst = min(Fraction(float(right[i])) - Fraction(float(best_other[i])) for i in near)
        require(sorted(set(answers.tolist())) == list(range(self.task.value_vocab)),
                "the final states do not cover every answer")
        return {"directions": [self.labels[d] for d in np.flatnonzero(read)], "final_states": int(states.shape[0]),
                "worst_margin": None if worst is None else number(worst)}
