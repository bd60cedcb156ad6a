"""certify: a sound proof that a network answers every input of its composition family, with a certificate.

The argument is an induction over layers at the read position (the last one), driven by what the weights read
and write (`verify.dataflow`), never by the construction's name:

1. Every residual entry at every position stays finite and in range, for every input: an interval per
   direction is pushed through every block (`_residual_bounds`). So directions a block does not read contribute
   exact zeros to its dot products.
2. Each attention layer has one head whose keys read only position-only directions and whose values read only
   token-only directions. The read position's residual vector before layer l is one of finitely many exact
   vectors (the *states*); each distinct query it produces is a *case*. Per case the scores are fixed, so the
   target (the best key) and every other key's score are enclosed with rounding-aware arithmetic; the target
   must be the position the task reads at this step. The off-target keys get at most a mass R, their values
   range over every token allowed there, and the fetched vector is enclosed around the target's value.
   A linear-attention layer (`verify.linear`) takes step 2's place when each of its key coordinates is nonzero
   at one position only and each case's query reads the keys of one position, the one the task reads: its
   read-out is then enclosed per token of that position, with no off-target mass at all.
3. The MLP is evaluated exactly, as affine forms over every format value of that enclosure (`bounds.Affine`), and
   must give one exact vector per target token: the next states.
4. After the last layer, the readout's logit for the task's answer must beat every other logit (worst margin > 0).

It answers `verified` only when every step holds; any failed assumption gives `unknown` with the reason.
`strict` follows the executor's operation order (`witness.execute`); `theory` is exact inside a block and rounds
every stored vector.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from verify.enclosure import Affine, Rounding, Unknown, down, exp_upper, up
from verify.certificate import network_identity, new_certificate
from verify.certify_two_sum import certify_two_sum
from verify.certify_two_sum_sparse import certify_two_sum_sparse
from verify import linear as linear_read
from verify.dataflow import Dataflow, dataflow
from verify.result import Result, Status
from witness.arith.formats import Fixed
from witness.ir import Attention, BlockSparseAttention, LinearAttention, Network
from witness.tasks import Composition, TwoSum

#: Score matrices are formed for at most this many (case x key) entries at a time.
CHUNK_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class _Chain:
    """What the composition task reads at each step, for a batch of task states (rest of the query code, index)."""

    task: Composition

    @property
    def steps(self) -> int:
        return self.task.L + 1

    def initial(self, last_tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.task.segments[-1].name != "w":
            raise Unknown("the read position does not hold the query token in this layout")
        return last_tokens - self.task.value_vocab, np.zeros_like(last_tokens)

    def position(self, step: int, rest: np.ndarray, index: np.ndarray) -> np.ndarray:
        if step == 0:
            return np.full_like(rest, self.task.segment("z0").start)
        start = self.task.segment(f"z{step}").start
        if step == 1:
            return start + index
        return start + (rest % self.task.n[step - 2]) * self.task.domain_sizes[step - 2] + index

    def advance(self, step: int, rest: np.ndarray) -> np.ndarray:
        return rest // self.task.n[step - 2] if step >= 2 else rest

    def common_alphabet(self, positions: np.ndarray) -> np.ndarray | None:
        """The tokens allowed at every one of `positions`, when they all allow the same ones; else None."""
        starts = np.array([segment.start for segment in self.task.segments])
        segments = {int(i) for i in np.searchsorted(starts, positions, side="right") - 1}
        alphabets = {tuple(self.alphabet(self.task.segments[i].start)) for i in segments}
        return np.array(alphabets.pop(), dtype=np.int64) if len(alphabets) == 1 else None

    def alphabet(self, position: int) -> np.ndarray:
        for segment in self.task.segments:
            if segment.start <= position < segment.stop:
                if segment.name == "w":
                    return self.task.value_vocab + np.arange(self.task.query_count)
                if segment.name == "z0":
                    return np.arange(self.task.m)
                return np.arange(self.task.domain_sizes[int(segment.name[1:]) - 1])
        raise Unknown(f"position {position} is outside the prompt")


def _arith_parts(arith) -> tuple[object, str]:
    fmt = getattr(arith, "format", None)
    if fmt is None:
        raise Unknown(f"certify needs a rounded arithmetic (witness.arith.arithmetic), got {arith.describe()}")
    return fmt, arith.semantics


def certify(network: Network, arith) -> Result:
    """`verified` with a certificate when every input of the network's task is proven answered; else `unknown`.
    Dispatches by task: 2-Sum networks go to `verify.certify_two_sum` (block-sparse ones through
    `verify.certify_two_sum_sparse`), composition networks are proven here."""
    if network.meta.task == TwoSum.name:
        if any(isinstance(layer.mixer, BlockSparseAttention) for layer in network.layers):
            return certify_two_sum_sparse(network, arith)
        return certify_two_sum(network, arith)
    try:
        fmt, semantics = _arith_parts(arith)
        rounding = Rounding(fmt, semantics)
        certificate = new_certificate(fmt.name, semantics, network_identity(network))
        task = _composition_task(network)
        _Certifier(network, rounding, task, certificate).run()
    except Unknown as reason:
        return Result(Status.UNKNOWN, "certify", arith.describe(), 0, 0, None, {"reason": str(reason)})
    return verified_result(task, arith.describe(), certificate)


#: Input counts with more bits than this are reported by their base-2 logarithm only.
COUNT_BITS_LIMIT = 10**5


def verified_result(task: Composition, described: dict, certificate: dict) -> Result:
    """A `verified` Result; `checked` is the exact input count when it fits in COUNT_BITS_LIMIT bits (N^N for a
    table of N = 2^64 entries has 2^70 bits), else 0 with the count's log2 in the detail."""
    log2_count = (math.log2(task.m) + sum(size * math.log2(size) for size in task.domain_sizes)
                  + sum(math.log2(n_l) for n_l in task.n))
    certificate["inputs_log2"] = log2_count
    checked = task.count() if log2_count <= COUNT_BITS_LIMIT else 0
    return Result(Status.VERIFIED, "certify", described, checked, 0, None,
                  {"certificate": certificate, "inputs_log2": log2_count})


def _composition_task(network: Network) -> Composition:
    task = network.task
    if not isinstance(task, Composition):
        raise Unknown(f"certify proves composition networks; this network claims task {network.meta.task!r}")
    if network.readout.read != "last":
        raise Unknown("the readout must read the last position")
    if network.n_ctx < task.prompt_length:
        raise Unknown("the network's context is shorter than the task's prompt")
    if network.d_vocab < task.vocab_size or network.d_vocab_out < task.value_vocab:
        raise Unknown("the network's vocabulary does not cover the task's tokens and answers")
    return task


class _Certifier:
    def __init__(self, network: Network, rounding: Rounding, task: Composition, certificate: dict):
        self.rounding = rounding
        self.task = task
        self.chain = _Chain(task)
        self.length = task.prompt_length
        self.certificate = certificate
        self.flow: Dataflow = dataflow(network)
        self.weights = {name: rounding.round(array, f"weight {name}")
                        for name, array in network.state_dict().items()}
        self.weights["pos_embed.W_pos"] = self.weights["pos_embed.W_pos"][: self.length]
        self.network = network
        self._cache: dict = {}

    def run(self) -> None:
        if len(self.network.layers) != self.chain.steps:
            raise Unknown(f"the task reads {self.chain.steps} table entries but the network has "
                          f"{len(self.network.layers)} attention layers")
        for l, layer in enumerate(self.network.layers):  # the bounds and the cases below assume softmax attention
            if type(layer.mixer) not in (Attention, LinearAttention):
                raise Unknown(f"blocks.{l}.attn is a {layer.mixer.kind} layer; certify handles softmax and linear "
                              "attention")
        self.certificate["bounds"] = _residual_bounds(self.network, self.weights, self.rounding, self.length)
        states, rest, index = self._initial_states()
        for step in range(self.chain.steps):
            states, rest, index = self._layer(step, states, rest, index)
        self._readout(states, index)

    # -- step 0: the read position's own embedding ---------------------------------------------------------
    def _embedding(self, tokens: np.ndarray, position: int) -> np.ndarray:
        W_E, W_pos = self.weights["embed.W_E"], self.weights["pos_embed.W_pos"]
        a, b = W_E[tokens], np.broadcast_to(W_pos[position], (tokens.size, W_E.shape[1]))
        lo, hi = self.rounding.add(a, a, b, b, "the embedding")
        lo, hi = self.rounding.store(lo, hi, "the embedding")
        if not np.array_equal(lo, hi):
            raise Unknown("the read position's embedding is not exact in the format")
        return lo

    def _initial_states(self):
        last = self.length - 1
        tokens = self.chain.alphabet(last)
        rest, index = self.chain.initial(tokens)
        states = self._embedding(tokens, last)
        return _unique_states(states, sorted(self.flow.live_before(0)), rest, index)

    # -- one layer -----------------------------------------------------------------------------------------
    def _layer(self, step: int, states: np.ndarray, rest: np.ndarray, index: np.ndarray):
        layer = self.network.layers[step]
        flow = self.flow.layers[step]
        prefix = f"blocks.{step}.attn"
        if layer.mixer.n_heads != 1:
            raise Unknown(f"{prefix} has {layer.mixer.n_heads} heads; certify handles one head per layer")
        if not flow.key <= self.flow.position_only:
            raise Unknown(f"{prefix}'s keys read directions that depend on more than the position")
        if not flow.value <= self.flow.token_only:
            raise Unknown(f"{prefix}'s values read directions that depend on more than the token")
        live_before = self.flow.live_before(step)
        written = sorted(flow.writes & live_before)
        if written and np.any(states[:, written] != 0):
            raise Unknown(f"layer {step} writes directions that are not empty before it at the read position")
        if not flow.mlp_reads <= flow.attn_writes:
            raise Unknown(f"blocks.{step}.mlp reads directions that its attention layer does not write")

        query_dirs = sorted(flow.query)
        cases, case_of = np.unique(states[:, query_dirs], axis=0, return_inverse=True)
        case_of = case_of.reshape(-1)
        if isinstance(layer.mixer, LinearAttention):
            read = linear_read.read_cases(self.rounding, self.weights, prefix, layer.mixer, cases, query_dirs,
                                          self._position_embedding(), sorted(flow.key))
            targets = read.targets
        else:
            targets, gaps, masses, p_low, noise = self._attention_cases(step, cases, query_dirs)
        wanted = self.chain.position(step, rest, index)
        wrong = np.flatnonzero(targets[case_of] != wanted)
        if wrong.size:
            s = wrong[0]
            raise Unknown(f"{prefix} attends to position {int(targets[case_of[s]])} where the task reads position "
                          f"{int(wanted[s])}")
        tokens = self.chain.common_alphabet(np.unique(targets))
        if tokens is None:
            raise Unknown(f"{prefix}'s targets hold tokens of different ranges")

        if isinstance(layer.mixer, LinearAttention):
            fetched_lo, fetched_hi = read.fetch(self.rounding, *self._value_vectors(step, tokens))
            record = {"mixer": layer.mixer.kind, **read.record(cases)}
        else:
            fetched_lo, fetched_hi = self._fetch(step, tokens, float(p_low.min()), noise.max(axis=0))
            record = {"cases": [{"query": case.tolist(), "target": int(t), "score_gap": float(g),
                                 "off_target_mass": float(r)} for case, t, g, r in zip(cases, targets, gaps, masses)],
                      "worst_score_gap": float(gaps.min()),
                      "worst_off_target_mass": float(masses.max()),
                      "target_weight_at_least": float(p_low.min())}
        after = sorted(self.flow.live_before(step + 1) if step + 1 < self.chain.steps else self.flow.readout)
        outputs, fetch_record = self._block_outputs(step, tokens, fetched_lo, fetched_hi, after)

        self.certificate["layers"].append({
            "layer": step,
            "query_directions": [self.flow.labels[d] for d in query_dirs],
            **record,
            "fetch": fetch_record,
        })

        # Next states: the layer's live outputs depend on the fetched token alone, the rest on the old state.
        keep = [d for d in after if d not in flow.writes]
        new_rest = self.chain.advance(step, rest) if step >= 1 else rest
        base = np.concatenate([states[:, keep], new_rest[:, None].astype(np.float64)], axis=1)
        base, base_rows = np.unique(base, axis=0, return_index=True)
        count = base.shape[0] * tokens.size
        next_states = np.zeros((count, states.shape[1]))
        next_states[:, keep] = np.repeat(base[:, :-1], tokens.size, axis=0)
        written_after = [d for d in after if d in flow.writes]
        next_states[:, written_after] = np.tile(outputs[:, [after.index(d) for d in written_after]],
                                                (base.shape[0], 1))
        next_rest = np.repeat(new_rest[base_rows], tokens.size)
        next_index = np.tile(tokens, base.shape[0])
        return next_states, next_rest, next_index

    def _attention_cases(self, step: int, cases: np.ndarray, query_dirs: list[int]):
        """Per case: the target, the worst score gap, a bound R on the off-target mass, a lower bound on the
        target's pattern weight, and per value dimension the bound on what the other keys add to the fetch."""
        r = self.rounding
        w = self.weights
        prefix = f"blocks.{step}.attn"
        flow = self.flow.layers[step]
        W_Q, b_Q = w[f"{prefix}.W_Q"][0], w[f"{prefix}.b_Q"][0]
        W_K, b_K = w[f"{prefix}.W_K"][0], w[f"{prefix}.b_K"][0]
        q_lo, q_hi = r.point_dot(cases, W_Q[query_dirs], rounded=r.strict)
        q_lo, q_hi = r.add_bias(q_lo, q_hi, b_Q, "a query")
        key_dirs = sorted(flow.key)
        positions = self._position_embedding()[:, key_dirs]
        k_lo, k_hi = r.point_dot(positions, W_K[key_dirs], rounded=r.strict)
        k_lo, k_hi = r.add_bias(k_lo, k_hi, b_K, "a key")
        if not np.array_equal(k_lo, k_hi):
            raise Unknown(f"{prefix}'s keys are not exact in the format")
        keys = k_lo.T  # [d_head, n]
        v_max = self._value_magnitudes(step)  # [n, d_head]

        q_mid = (q_lo + q_hi) / 2
        q_radius = np.maximum(q_hi - q_mid, q_mid - q_lo)
        q_radius = np.where(q_radius > 0, up(q_radius), 0.0)
        targets, gaps, masses, p_low, noise = [], [], [], [], []
        chunk = max(1, CHUNK_ELEMENTS // self.length)
        for start in range(0, cases.shape[0], chunk):
            rows = slice(start, start + chunk)
            s_lo, s_hi = r.point_dot(q_mid[rows], keys, rounded=r.strict, A_radius=q_radius[rows])
            target = np.argmax(s_lo, axis=1)
            picked = np.arange(target.size)
            best = s_lo[picked, target]
            others = s_hi.copy()
            others[picked, target] = -np.inf
            gap = best - others.max(axis=1)
            if not (gap > 0).all():
                raise Unknown(f"{prefix}: the best key does not beat every other key for some query")
            # e_j <= exp(s_j - s_target) (rounded up under strict); the target's own numerator is exactly 1.
            offset = up(others - best[:, None])
            offset[picked, target] = 0.0
            if r.strict:
                offset = r.round(up(offset), "a score difference")
            with np.errstate(under="ignore"):
                numerators = exp_upper(offset)
            if r.strict:
                numerators = r.round(numerators, "an exp")
            numerators[picked, target] = 0.0
            mass = up(numerators.sum(axis=1) * (1 + self.length * 2.0 ** -52))
            spread = up(numerators @ v_max * (1 + self.length * 2.0 ** -52))  # sum_j e_j |v_j|
            if r.strict:
                # Ordered sums: a step that adds a term t errs by at most min(|t|, u * |partial sum| + eta) -- the
                # running sum is itself a candidate, and rounding to nearest errs by at most half an ulp -- so
                # tiny off-target terms cost at most themselves. Fixed-point sums are exact.
                if isinstance(r.format, Fixed):
                    denominator, spread = up(1 + mass), up(spread + self.length * r.eta)
                else:
                    widen = 1 + self.length * 2.0 ** -52
                    step = up(r.unit * up(1 + 2 * mass) * (1 + r.unit) + r.eta)
                    denominator = up(1 + mass + up(np.minimum(numerators, step[:, None]).sum(axis=1) * widen) + step)
                    terms = up(spread * (1 + r.unit) + self.length * r.eta)  # sum_j |t_j| per value coordinate
                    largest = up(numerators * v_max.max(axis=1) * (1 + r.unit) + r.eta)  # |t_j|, any coordinate
                    partial = up(v_max.max() * (1 + r.unit) + r.eta + 2 * terms.max(axis=1))
                    step = up(r.unit * partial * (1 + r.unit) + r.eta)
                    error = up(np.minimum(largest, step[:, None]).sum(axis=1) * widen + step)
                    spread = up(terms + error[:, None])
                weight = r.round(down(1 / denominator), "the target's weight")
            else:
                weight = down(1 / up(1 + mass))
            targets.append(target)
            gaps.append(gap)
            masses.append(mass)
            p_low.append(weight)
            noise.append(spread)
        return (np.concatenate(targets), np.concatenate(gaps), np.concatenate(masses), np.concatenate(p_low),
                np.concatenate(noise))

    def _position_embedding(self) -> np.ndarray:
        """Every position's embedding on position-only directions (the token table is zero there)."""
        W_pos = self.weights["pos_embed.W_pos"]
        return self.rounding.round(W_pos, "the position embedding")

    def _value_vectors(self, step: int, tokens: np.ndarray):
        r = self.rounding
        prefix = f"blocks.{step}.attn"
        value_dirs = sorted(self.flow.layers[step].value)
        embedded = r.round(self.weights["embed.W_E"][tokens][:, value_dirs], "a token embedding")
        lo, hi = r.point_dot(embedded, self.weights[f"{prefix}.W_V"][0][value_dirs], rounded=r.strict)
        return r.add_bias(lo, hi, self.weights[f"{prefix}.b_V"][0], "a value")

    def _value_magnitudes(self, step: int) -> np.ndarray:
        """Per position, the largest |value| over every token the task allows there."""
        v_lo, v_hi = self._value_vectors(step, np.arange(self.network.d_vocab))
        largest = np.maximum(np.abs(v_lo), np.abs(v_hi))
        result = np.empty((self.length, largest.shape[1]))
        for segment in self.task.segments:
            allowed = self.chain.alphabet(segment.start)
            result[segment.start:segment.stop] = largest[allowed].max(axis=0)
        return result

    def _fetch(self, step: int, tokens: np.ndarray, weight: float, noise: np.ndarray):
        """Enclosure of the head's mixed vector when the target holds each token: weight*value +- noise."""
        r = self.rounding
        v_lo, v_hi = self._value_vectors(step, tokens)
        lo = np.minimum(weight * v_lo, v_lo)
        hi = np.maximum(weight * v_hi, v_hi)
        if r.strict:  # the target's term is itself a rounded product
            lo, hi = r.round(down(lo), "the target's term"), r.round(up(hi), "the target's term")
        lo, hi = down(down(lo) - noise), up(up(hi) + noise)
        return r.store(lo, hi, "the fetched vector") if r.strict else (lo, hi)

    def _block_outputs(self, step: int, tokens: np.ndarray, mixed_lo, mixed_hi, after: list[int]):
        """The read position's values after layer `step` on the directions in `after` it writes, per token."""
        r = self.rounding
        w = self.weights
        prefix = f"blocks.{step}"
        flow = self.flow.layers[step]
        head_lo, head_hi = r.matmul(mixed_lo, mixed_hi, w[f"{prefix}.attn.W_O"][0], "a head output")
        head_lo, head_hi = r.store(head_lo, head_hi, "a head output")
        attn_lo, attn_hi = r.add_bias(head_lo, head_hi, w[f"{prefix}.attn.b_O"], "the attention output")
        attn_lo, attn_hi = r.store(attn_lo, attn_hi, "the attention output")
        # The residual is zero on the written directions (checked), so resid_mid = store(0 + attn) = attn there.
        mlp = self.network.layers[step].mlp
        outputs = np.zeros((tokens.size, len(after)))
        record = []
        for column, d in enumerate(after):
            if d not in flow.writes:
                continue
            # Tokens whose fetched intervals agree on what d depends on share one evaluation.
            relevant = sorted(self._mlp_inputs(step, mlp, d) | {d})
            box = np.concatenate([attn_lo[:, relevant], attn_hi[:, relevant]], axis=1)
            distinct, rows, inverse = np.unique(box, axis=0, return_index=True, return_inverse=True)
            values = [float(self._post_mlp(step, mlp, d, attn_lo[row], attn_hi[row])) for row in rows]
            outputs[:, column] = np.array(values)[inverse.reshape(-1)]
            record.append({"direction": self.flow.labels[d],
                           "fetched": [[float(attn_lo[row, d]), float(attn_hi[row, d])] for row in
                                       range(min(tokens.size, 2))] if d in flow.attn_writes else None})
        fetched_dirs = sorted(flow.mlp_reads)
        summary = {"mlp_inputs": [self.flow.labels[d] for d in fetched_dirs],
                   "smallest_magnitude": float(np.minimum(np.abs(attn_lo[:, fetched_dirs]),
                                                          np.abs(attn_hi[:, fetched_dirs])).min(initial=np.inf)),
                   "straddles_zero": bool(np.any((attn_lo[:, fetched_dirs] <= 0) & (attn_hi[:, fetched_dirs] >= 0))),
                   "outputs": record}
        return outputs, summary

    def _mlp_inputs(self, step: int, mlp, d: int) -> set[int]:
        """Directions feeding the hidden units that write d."""
        if mlp is None:
            return set()
        W_in, W_out = self.weights[f"blocks.{step}.mlp.W_in"], self.weights[f"blocks.{step}.mlp.W_out"]
        return {int(i) for i in np.flatnonzero((W_in[:, np.flatnonzero(W_out[:, d])] != 0).any(axis=1))}

    def _post_mlp(self, step: int, mlp, d: int, mid_lo: np.ndarray, mid_hi: np.ndarray) -> Fraction:
        """The exact value of direction d after the MLP's residual add, for every resid_mid in the box."""
        flow = self.flow.layers[step]
        if mlp is None:
            if mid_lo[d] != mid_hi[d]:
                raise Unknown(f"blocks.{step}: direction {self.flow.labels[d]} is not exact after the layer")
            return Fraction(mid_lo[d])
        return _mlp_exact_output(self.rounding, self.weights, step, d, mid_lo, mid_hi, flow, self.flow.labels,
                                 self._cache)

    # -- readout ------------------------------------------------------------------------------------------
    def _readout(self, states: np.ndarray, answers: np.ndarray) -> None:
        r = self.rounding
        W_U, b_U = self.weights["unembed.W_U"], self.weights["unembed.b_U"]
        read = sorted(self.flow.readout)
        if answers.max(initial=0) >= W_U.shape[1]:
            raise Unknown("an answer has no logit")
        margins = np.empty(states.shape[0])
        chunk = max(1, CHUNK_ELEMENTS // W_U.shape[1])
        for start in range(0, states.shape[0], chunk):
            rows = slice(start, start + chunk)
            lo, hi = r.point_dot(states[rows][:, read], W_U[read], rounded=True)
            lo, hi = r.add_bias(lo, hi, b_U, "a logit")
            picked = np.arange(lo.shape[0])
            right = lo[picked, answers[rows]]
            hi[picked, answers[rows]] = -np.inf
            margins[rows] = right - hi.max(axis=1)
        if not (margins > 0).all():
            raise Unknown("the readout's margin is not provably positive for every answer")
        self.certificate["readout"] = {"directions": [self.flow.labels[d] for d in read],
                                       "cases": [{"state": s[read].tolist(), "answer": int(a), "margin": float(m)}
                                                 for s, a, m in zip(states, answers, margins)],
                                       "worst_margin": float(margins.min())}


def _unique_states(states: np.ndarray, live: list[int], rest: np.ndarray, index: np.ndarray):
    """Merge states that agree on every live direction and on the task's future."""
    keys = np.concatenate([states[:, live], rest[:, None], index[:, None]], axis=1)
    _, rows = np.unique(keys, axis=0, return_index=True)
    return states[rows], rest[rows], index[rows]


def _mlp_exact_output(rounding: Rounding, weights: dict, step: int, d: int, mid_lo, mid_hi, flow, labels,
                      cache: dict) -> Fraction:
    """resid_post[d] = store(resid_mid[d] + store(relu(resid_mid W_in + b_in) W_out + b_out)[d]), proven to be one
    exact value for every format value of resid_mid in [mid_lo, mid_hi]: the MLP is evaluated as affine forms on
    each segment of format values, split where a ReLU changes sign."""
    prefix = f"blocks.{step}.mlp"
    W_in, b_in = weights[f"{prefix}.W_in"], weights[f"{prefix}.b_in"]
    W_out, b_out = weights[f"{prefix}.W_out"], weights[f"{prefix}.b_out"]
    units = np.flatnonzero(W_out[:, d])
    inputs = sorted({int(i) for h in units for i in np.flatnonzero(W_in[:, h])})
    varying = [i for i in inputs if mid_lo[i] != mid_hi[i]]
    if mid_lo[d] != mid_hi[d] and d not in varying:
        varying.append(d)
    if len(varying) > 1:
        raise Unknown(f"{prefix}: direction {labels[d]} depends on more than one fetched coordinate")
    key = (step, d, tuple((i, float(mid_lo[i]), float(mid_hi[i])) for i in sorted(set(inputs) | {d})))
    if key in cache:
        return cache[key]
    if varying:
        f = varying[0]
        segments = rounding.format_values(float(mid_lo[f]), float(mid_hi[f]))
    else:
        f, segments = None, [(Fraction(1), 0, 0)]
    if not segments:
        raise Unknown(f"{prefix}: empty input interval")

    def value_of(i: int, quantum: Fraction) -> Affine:
        if i == f:
            return Affine(quantum, Fraction(0))
        return Affine(Fraction(0), Fraction(float(mid_lo[i])))

    def evaluate(quantum: Fraction, k0: int, k1: int) -> list[Fraction]:
        strict = rounding.strict
        hidden = []
        for h in units:
            pre = None
            for i in np.flatnonzero(W_in[:, h]):
                term = value_of(int(i), quantum).times(Fraction(float(W_in[i, h])))
                term = rounding.round_affine(term, k0, k1) if strict else term
                pre = term if pre is None else pre + term
                pre = rounding.round_affine(pre, k0, k1) if strict else pre
            pre = (pre or Affine(Fraction(0), Fraction(0))) + Affine(Fraction(0), Fraction(float(b_in[h])))
            # Rounding is monotone with round(0) = 0, so the sign of the exact sum decides the ReLU; only where it
            # passes the unit on must the rounded sum be exact.
            low, high = pre.at(k0), pre.at(k1)
            if min(low, high) < 0 < max(low, high):
                root = math.floor(-pre.b / pre.a)
                return evaluate(quantum, k0, root) + evaluate(quantum, root + 1, k1)
            if max(low, high) <= 0:
                hidden.append(Affine(Fraction(0), Fraction(0)))
            else:
                hidden.append(rounding.round_affine(pre, k0, k1) if strict else pre)
        out = None
        for h, unit in zip(units, hidden):
            term = unit.times(Fraction(float(W_out[h, d])))
            term = rounding.round_affine(term, k0, k1) if strict else term
            out = term if out is None else out + term
            out = rounding.round_affine(out, k0, k1) if strict else out
        out = (out or Affine(Fraction(0), Fraction(0))) + Affine(Fraction(0), Fraction(float(b_out[d])))
        out = rounding.round_affine(out, k0, k1)  # strict: the bias add; both: the store
        total = rounding.round_affine(value_of(d, quantum) + out, k0, k1)
        if total.a != 0:
            raise Unknown(f"{prefix}: direction {labels[d]} still depends on the fetched value after the MLP")
        return [total.b]

    results = {value for quantum, k0, k1 in segments for value in evaluate(quantum, k0, k1)}
    if len(results) != 1:
        raise Unknown(f"{prefix}: direction {labels[d]} takes {len(results)} values over the fetched interval")
    cache[key] = results.pop()
    return cache[key]


def _residual_bounds(network, weights: dict, rounding: Rounding, length: int) -> dict:
    """An interval per residual direction holding its value at every position after every block, for every input;
    Unknown when some value may leave the format's range (an overflow is then possible somewhere).

    Plain interval arithmetic, except in two places where it would lose everything to dependence: a softmax
    output is a convex combination of values (under `theory`; under `strict` its ordered rounded sum is bounded
    by `_long_sum`), and an MLP output direction fed by a single input direction is a piecewise-linear function of
    that input, residual connection included, whose exact range is its extreme over the kinks and the ends.
    """
    r = rounding
    unit = r.unit if r.strict else 0.0  # steps inside a block; stores are rounded by `stored`
    eta = r.eta if r.strict else 0.0

    def error(magnitude, count: int):
        """How far `count` rounded steps on values of size <= magnitude (plus float64 evaluation) may stray."""
        return up(magnitude * ((1 + unit) ** (count + 1) - 1 + (count + 2) * 2.0 ** -52) * 1.01
                  + 2 * (count + 1) * eta)

    def affine(lo, hi, W, b, count: int):
        """[lo, hi] @ W + b, every input independently anywhere in its interval."""
        mid, radius = (lo + hi) / 2, up((hi - lo) / 2)
        centre = mid @ W + b
        spread = up(radius @ np.abs(W))
        slack = error(np.abs(mid) @ np.abs(W) + spread + np.abs(b), count)
        return down(centre - spread - slack), up(centre + spread + slack)

    def inside(lo, hi, what: str):
        if r.strict and not (np.all(np.abs(lo) <= r.limit) and np.all(np.abs(hi) <= r.limit)):
            raise Unknown(f"{what} may overflow {r.format.name}")
        return lo, hi

    def stored(lo, hi, what: str):
        return r.round(down(lo), what), r.round(up(hi), what)

    W_E, W_pos = weights["embed.W_E"], weights["pos_embed.W_pos"]
    # Where a linear layer's keys are one exact vector per position (`verify.parametric` passes the layers alone).
    has_linear = any(isinstance(layer.mixer, LinearAttention) for layer in network.layers)
    position_only = dataflow(network).position_only if has_linear else frozenset()
    lo, hi = stored(down(W_E.min(axis=0) + W_pos.min(axis=0)), up(W_E.max(axis=0) + W_pos.max(axis=0)),
                    "the embedding")
    after = []
    for l, layer in enumerate(network.layers):
        p = f"blocks.{l}"
        w = {k: weights[f"{p}.attn.{k}"] for k in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")}
        d_model = lo.size
        linear = isinstance(layer.mixer, LinearAttention)
        mixed = []  # a linear layer's read-out bound per head
        for h in range(w["W_Q"].shape[0]):
            q_lo, q_hi = inside(*affine(lo, hi, w["W_Q"][h], w["b_Q"][h], d_model), f"{p} queries")
            k_lo, k_hi = inside(*affine(lo, hi, w["W_K"][h], w["b_K"][h], d_model), f"{p} keys")
            if linear:
                v_lo, v_hi = inside(*affine(lo, hi, w["W_V"][h], w["b_V"][h], d_model), f"{p} values")
                key_dirs = sorted(int(d) for d in np.flatnonzero(w["W_K"][h].any(axis=1)))
                keys = (linear_read.position_keys(r, weights, f"{p}.attn", h, layer.mixer, W_pos, key_dirs)
                        if set(key_dirs) <= position_only else None)
                mixed.append(linear_read.mixed_bounds(r, f"{p}.attn", layer.mixer, q_lo, q_hi, v_lo, v_hi, keys,
                                                      k_lo, k_hi, length, error, inside, _long_sum))
                continue
            products = np.stack([q_lo * k_lo, q_lo * k_hi, q_hi * k_lo, q_hi * k_hi])
            slack = error(np.abs(products).max(axis=0).sum(), q_lo.size)
            s_lo, s_hi = down(products.min(axis=0).sum() - slack), up(products.max(axis=0).sum() + slack)
            inside(np.array([s_lo, s_hi]), np.array([s_lo, s_hi]), f"{p} scores")
            spread = up(s_hi - s_lo)  # |score - max score| never exceeds it
            inside(np.array([spread]), np.array([spread]), f"{p} score differences")
        heads_lo, heads_hi = np.zeros(d_model), np.zeros(d_model)
        for h in range(w["W_V"].shape[0]):
            v_lo, v_hi = inside(*affine(lo, hi, w["W_V"][h], w["b_V"][h], d_model), f"{p} values")
            if linear:
                v_lo, v_hi = mixed[h]
            elif r.strict:
                _long_sum(r, np.ones(1), length, f"{p} softmax denominators")
                size = _long_sum(r, r.round(up(np.maximum(np.abs(v_lo), np.abs(v_hi))), f"{p} values"), length,
                                 f"{p} mixed values")
                v_lo, v_hi = -size, size
            head_lo, head_hi = stored(*affine(v_lo, v_hi, w["W_O"][h], 0.0, v_lo.size), f"{p} head outputs")
            heads_lo, heads_hi = down(heads_lo + head_lo), up(heads_hi + head_hi)
        attn_lo, attn_hi = stored(*affine(heads_lo, heads_hi, np.eye(d_model), w["b_O"], w["W_V"].shape[0]),
                                  f"{p} attention output")
        written = w["W_O"].any(axis=(0, 1)) | (w["b_O"] != 0)  # elsewhere the block adds an exact zero
        lo = np.where(written, down(lo + attn_lo - error(np.abs(lo) + np.abs(attn_lo), 1)), lo)
        hi = np.where(written, up(hi + attn_hi + error(np.abs(hi) + np.abs(attn_hi), 1)), hi)
        lo, hi = stored(lo, hi, f"{p} residual stream")
        if layer.mlp is not None:
            lo, hi = _mlp_bounds(weights, p, lo, hi, error, stored, inside, r)
        after.append(float(np.maximum(np.abs(lo), np.abs(hi)).max()))
    logits = affine(lo, hi, weights["unembed.W_U"], weights["unembed.b_U"], lo.size)
    inside(*logits, "the logits")
    return {"largest_residual_entry_after_layer": after}


def _mlp_bounds(weights: dict, p: str, lo, hi, error, stored, inside, rounding: Rounding):
    """Residual bounds after an MLP block (see `_residual_bounds`)."""
    W_in, b_in = weights[f"{p}.mlp.W_in"], weights[f"{p}.mlp.b_in"]
    W_out, b_out = weights[f"{p}.mlp.W_out"], weights[f"{p}.mlp.b_out"]
    d_model, d_mlp = W_in.shape
    mid, radius = (lo + hi) / 2, up((hi - lo) / 2)
    pre_lo = down(mid @ W_in - radius @ np.abs(W_in) + b_in)
    pre_hi = up(mid @ W_in + radius @ np.abs(W_in) + b_in)
    hidden_size = np.maximum(np.abs(pre_lo), np.abs(pre_hi))
    hidden_size = up(hidden_size + error(np.abs(mid) @ np.abs(W_in) + radius @ np.abs(W_in) + np.abs(b_in), d_model))
    inside(-hidden_size, hidden_size, f"{p} MLP hidden units")
    hidden_lo, hidden_hi = np.maximum(pre_lo, 0.0), np.minimum(np.maximum(pre_hi, 0.0), hidden_size)
    new_lo, new_hi = lo.copy(), hi.copy()
    for d in np.flatnonzero(W_out.any(axis=0) | (b_out != 0)):
        units = np.flatnonzero(W_out[:, d])
        inputs = np.flatnonzero(W_in[:, units].any(axis=1))
        magnitude = np.abs(W_out[units, d]) @ hidden_size[units] + abs(b_out[d])
        stored_output = up(rounding.unit * magnitude + rounding.eta)  # the MLP output is stored before the add
        if inputs.size == 1 and all(np.flatnonzero(W_in[:, h]).size == 1 for h in units):
            f = int(inputs[0])
            # Exact range of x_f [d == f] + sum_h W_out[h, d] relu(W_in[f, h] x_f + b_in[h]) + b_out[d], plus x_d
            # when d is not f: piecewise linear in x_f, so extreme at the ends or at a kink.
            kinks = [-b_in[h] / W_in[f, h] for h in units]
            points = np.array([lo[f], hi[f]] + [x for x in kinks if lo[f] < x < hi[f]])
            values = (points if d == f else 0.0) + np.maximum(np.outer(points, W_in[f, units]) + b_in[units],
                                                              0.0) @ W_out[units, d] + b_out[d]
            slack = up(error(magnitude + np.abs(points).max(), 2 * units.size + 6) + stored_output)
            out_lo, out_hi = down(values.min() - slack), up(values.max() + slack)
            if d != f:
                out_lo, out_hi = down(out_lo + lo[d]), up(out_hi + hi[d])
        else:
            positive, negative = np.maximum(W_out[units, d], 0), np.minimum(W_out[units, d], 0)
            mlp_lo = hidden_lo[units] @ positive + hidden_hi[units] @ negative
            mlp_hi = hidden_hi[units] @ positive + hidden_lo[units] @ negative
            slack = up(error(magnitude, units.size + 1) + stored_output)
            out_lo = down(lo[d] + mlp_lo + b_out[d] - slack)
            out_hi = up(hi[d] + mlp_hi + b_out[d] + slack)
        new_lo[d], new_hi[d] = out_lo, out_hi
    inside(new_lo, new_hi, f"{p} MLP output")
    return stored(new_lo, new_hi, f"{p} residual stream")


def _long_sum(rounding: Rounding, term: np.ndarray, count: int, what: str) -> np.ndarray:
    """A bound on |an ordered rounded sum of `count` terms| when each |term| <= `term` (elementwise): fold
    round(bound + term) -- rounding is monotone -- until it stops growing, after which it never grows again."""
    if count * rounding.unit <= 2.0 ** -6:  # short enough for the relative bound (1 + u)^count <= 1 + 2 count u
        bound = up(count * term * (1 + 2 * count * rounding.unit) + 2 * count * rounding.eta)
        return rounding.round(bound, what)
    bound = np.zeros_like(term)
    for _ in range(count):
        grown = rounding.round(up(bound + term), what)
        if np.array_equal(grown, bound):
            break
        bound = grown
    return bound
