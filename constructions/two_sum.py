"""One layer of full softmax attention for 2-Sum (conventions §1.2, §4.3), one head, the bit y_i read at every position.

y_i = 1 iff some j != i (causal variant: j < i) has x_i + x_j = t (mod M). Angle codes are the usual suggestion
theta(x) = 2 pi x / M; we use the ±1 binary codes of constructions/residual.py instead, their exact analogue:
<code(a), code(u)> is largest, = b_M, exactly when u = a, and at most b_M - 2 otherwise, just as cos(theta(a) -
theta(u)) peaks at u = a. Unlike cos/sin, every weight and every attention score is then a small integer, so the
argument below holds for the weights as stored, and the scale is O(log n + log log M), not M^2 log n.

Residual directions (b_M = code width of M, b_n = code width of n):

    val[k]       ±1 code of the token x_i                              (token table)
    target[k]    ±1 code of a_i = (t - x_i) mod M, the partner x_i needs (token table: the modular arithmetic
                 happens in the lookup, a function of the token id)
    pos[k]       ±1 code c(i) of the position i                        (position table)
    mix_val[k]   attention output sum_j p_ij code(x_j)
    mix_pos[k]   attention output sum_j p_ij c(j)
    verdict      the readout quantity V_i, written by the MLP; y_i = 1 iff V_i > 0

The argument. Position i scores key j by lambda <code(a_i), code(x_j)>: every match (x_j = a_i) scores exactly
lambda b_M, every non-match at least CODE_GAP lambda = 2 lambda less. Let A be the matches among the keys i sees
(every j in the bidirectional variant, j <= i in the causal one; i itself included) and eps the attention mass off
A. Every coordinate of code(x_j) - code(a_i) is 0 or -2 code(a_i)_k, the same sign for every j (likewise for
c(j) - c(i)), so in exact arithmetic the two sums the MLP forms are expectations under the attention pattern p:

    D_i = || mix_val - code(a_i) ||_1 = 2 E_p[hamming(x_j, a_i)],   P_i = || mix_pos - c(i) ||_1 = 2 E_p[hamming(j, i)]

The MLP writes V_i = P_i - mu D_i - 1/2 with mu = b_n + 1 (`mismatch_weight`; two ReLUs per coordinate:
relu(z) + relu(-z) = |z|). The offset 1/2 (VERDICT_OFFSET) sits midway between P_i - mu D_i without a partner
(at most 0 once no mass falls off the matches) and with one (at least 1).
  (a) A empty (no match at all, not even i itself): every j has hamming >= 1, so D_i >= 2, and P_i <= 2 b_n;
      V_i <= 2 b_n - 2 mu - 1/2 = -5/2.                                                                y_i = 0
  (b) A = {i} (i is its own only match): mass >= 1 - eps on j = i, so P_i <= 2 b_n eps; V_i <= 2 b_n eps - 1/2.
                                                                                                       y_i = 0
  (c) A holds some j != i: all matches score the same, so the matches other than i hold at least half of the
      mass 1 - eps on A (all of it if i is no match, k/(k+1) if i and k >= 1 others are); each differs from
      i in at least one position bit, so P_i >= 1 - eps; D_i <= 2 b_M eps;
      V_i >= 1/2 - eps (1 + 2 mu b_M) >= 1/2 - 2 mu (b_M + 1) eps.                                   y_i = 1
The margin 1/4 (MARGIN) is chosen; case (c) then fixes eps <= (1/2 - 1/4) / (2 mu (b_M + 1)) = 1 / (8 (b_n + 1)
(b_M + 1)) (`off_match_mass_bound`), which leaves V_i <= 2 b_n eps - 1/2 <= -3/8 in (b); so |V_i| >= 1/4 on every
input. eps in turn fixes the attention scale lambda (`attention_scale`). In the causal variant position 0 sees
only itself, so it is case (a) or (b): y_0 = 0.

Float64 (the claimed format): see `float64_error_bound`; for every n, M this construction accepts, the computed
V_i is within 2^-16 of the exact one, far inside the margin of 1/4.

Budget: one layer, H = 1, d_head = b_M + b_n, d_model = 3 b_M + 2 b_n + 1, d_mlp = 2 (b_M + b_n), where
b_M = ceil(log2 M), b_n = ceil(log2 n): H d = O(log n + log M).
"""

from __future__ import annotations

import math

import numpy as np

from constructions.residual import CODE_GAP, Head, Route, Score, Space, code_width, pm1_codes, table_bytes
from witness.errors import ParameterError
from witness.ir import MLP, Embedding, Layer, Meta, Network, Readout
from witness.mixers import Attention
from witness.tasks import TwoSum

NAME = "two_sum"

#: The largest n and M accepted: the position and token tables are materialised, and the float64 error bound
#: stated in the module docstring (below 2^-16) is for this range.
MAX_SIZE = 2**24

# -- the linked constants (module docstring, cases a-c) ------------------------------------------------------------
#: The readout margin in exact arithmetic: |V_i| >= MARGIN on every input. Chosen; `off_match_mass_bound` buys it.
MARGIN = 0.25

#: V_i = P_i - mu D_i - VERDICT_OFFSET: midway between no partner (at most 0 with no mass off the matches) and a
#: partner (at least 1).
VERDICT_OFFSET = 0.5

UNIT_ROUNDOFF = 2.0**-53


def mismatch_weight(b_n: int) -> int:
    """mu, the weight of the value mismatch D_i in V_i: b_n + 1.

    Without any match (case (a)) D_i >= 2 must outweigh P_i <= 2 b_n: 2 mu - 2 b_n = 2 puts V_i at -5/2, far below
    -MARGIN. With a match (case (c)) every unit of D_i costs mu, which `off_match_mass_bound` pays for.
    """
    return b_n + 1


def off_match_mass_bound(b_n: int, b_M: int) -> float:
    """eps: the attention mass off the matches that case (c) can afford, (1 - VERDICT_OFFSET - MARGIN) /
    (2 mu (b_M + 1)) = 1 / (8 (b_n + 1)(b_M + 1)).

    Case (c) has V_i >= (1 - VERDICT_OFFSET) - 2 mu (b_M + 1) eps, which is MARGIN at this eps; case (b) then has
    V_i <= 2 b_n eps - VERDICT_OFFSET <= 1/8 - 1/2.
    """
    return (1 - VERDICT_OFFSET - MARGIN) / (2 * mismatch_weight(b_n) * (b_M + 1))


def attention_scale(n: int, b_n: int, b_M: int) -> int:
    """lambda: the smallest integer with (n - 1) exp(-CODE_GAP lambda) <= off_match_mass_bound(b_n, b_M).

    When i has a match, that match has weight exp(0) = 1 after the max is subtracted, and each of the at most
    n - 1 other keys scores at least CODE_GAP lambda lower (distinct codes, `constructions.residual.CODE_GAP`), so
    the mass off the matches is at most (n - 1) e^{-CODE_GAP lambda}. An integer keeps every score an exact
    integer in every format.
    """
    return max(1, math.ceil(math.log((n - 1) / off_match_mass_bound(b_n, b_M)) / CODE_GAP))


def float64_error_bound(n: int, b_n: int, b_M: int, mu: int) -> float:
    """A bound on |computed V_i - exact V_i| when the network runs in float64 (round to nearest, u = 2^-53), for
    the mismatch weight `mu`.

    Exact steps: the embedding (disjoint supports), q and k (±lambda, ±1 entries), the integer scores and the max
    subtraction, W_O (a 0/1 selection), the residual additions (disjoint supports) and the readout (it selects
    `verdict`). Rounded steps, with gamma_k = k u / (1 - k u):
      * exp (numpy's is within 4 ulp, 8u relative), the sum of n positive terms, the division: each weight has
        relative error at most gamma_{n+12};
      * mix = p v with |v| = 1: |error| <= gamma_n (1 + gamma_{n+12}) + gamma_{n+12} <= gamma_{2n+13};
      * each hidden unit relu(+-(mix_k - code_k)) adds one rounding of a number below 3: error <= gamma_{2n+16};
      * V = sum of 2w hidden units (w = b_M + b_n) with weights 1 or -mu, each unit <= 3, then - 1/2: the
        propagated error is at most W gamma_{2n+16} with W = 2 b_n + 2 mu b_M + 1, the summation's own at
        most gamma_{2w+1} 3 W.
    Total: W (gamma_{2n+16} + 3 gamma_{2w+1}), summation order free (any BLAS order obeys these bounds).
    """
    width = b_M + b_n

    def gamma(k: int) -> float:
        return k * UNIT_ROUNDOFF / (1 - k * UNIT_ROUNDOFF)

    weight = 2 * b_n + 2 * mu * b_M + 1
    return weight * (gamma(2 * n + 16) + 3 * gamma(2 * width + 1))


def supported_task(n: int, M: int, t: int, causal: bool = False) -> TwoSum:
    """The task, refused (ParameterError) beyond the sizes this construction is stated for."""
    task = TwoSum(n, M, t, causal)
    for name, value in (("n", task.n), ("M", task.M)):
        if value > MAX_SIZE:
            raise ParameterError(f"the two_sum construction needs {name} <= 2^24 = {MAX_SIZE} (its tables are "
                                 f"materialised, and its float64 error bound is stated for that range), got {value}")
    return task


def residual_space(task: TwoSum) -> Space:
    """The residual directions of the module docstring, in this order (the basis the network files store)."""
    b_M, b_n = code_width(task.M), code_width(task.n)
    return Space.of(("val", b_M), ("target", b_M), ("pos", b_n), ("mix_val", b_M), ("mix_pos", b_n), "verdict")


def value_space(task: TwoSum) -> Space:
    """The head's value directions: the token code and the position code c(j), side by side."""
    return Space.of(("val", code_width(task.M)), ("pos", code_width(task.n)))


def value_routes(residual: Space, head: Head) -> list[Route]:
    """mix_val = sum_j p_ij code(x_j) and mix_pos = sum_j p_ij c(j)."""
    return [Route(residual["val"], head.ov["val"], residual["mix_val"]),
            Route(residual["pos"], head.ov["pos"], residual["mix_pos"])]


def embedding_tables(task: TwoSum, residual: Space) -> tuple[np.ndarray, np.ndarray]:
    """W_E [d_vocab, d_model] (val and target codes) and W_pos [n_ctx, d_model] (position codes), float64."""
    tokens = np.arange(task.M)
    W_E = np.zeros((task.M, residual.width))  # [d_vocab, d_model]
    W_E[:, residual["val"].indices] = pm1_codes(tokens, residual["val"].width)
    W_E[:, residual["target"].indices] = pm1_codes((task.t - tokens) % task.M, residual["target"].width)
    W_pos = np.zeros((task.n, residual.width))  # [n_ctx, d_model]
    W_pos[:, residual["pos"].indices] = pm1_codes(np.arange(task.n), residual["pos"].width)
    return W_E, W_pos


def verdict_mlp(task: TwoSum, residual: Space) -> MLP:
    """V_i = P_i - mu D_i - VERDICT_OFFSET into `verdict`, each |z| as relu(z) + relu(-z): units `+X` and `-X`
    for the compared direction X."""
    mu = mismatch_weight(code_width(task.n))
    compared = [(residual["mix_val"], residual["target"], -mu), (residual["mix_pos"], residual["pos"], 1)]
    signs = (("+", 1.0), ("-", -1.0))
    hidden = Space.of(*(symbol + label for mixed, _, _ in compared for label in mixed.labels for symbol, _ in signs))
    verdict = residual["verdict"].index
    W_in = np.zeros((residual.width, hidden.width))  # [d_model, d_mlp]
    W_out = np.zeros((hidden.width, residual.width))  # [d_mlp, d_model]
    for mixed, reference, weight in compared:
        for m, r, label in zip(mixed.indices, reference.indices, mixed.labels):
            for symbol, sign in signs:
                unit = hidden[symbol + label].index
                W_in[m, unit], W_in[r, unit] = sign, -sign
                W_out[unit, verdict] = weight
    b_out = np.zeros(residual.width)
    b_out[verdict] = -VERDICT_OFFSET
    return MLP(W_in, np.zeros(hidden.width), W_out, b_out)


def verdict_readout(residual: Space) -> Readout:
    """logit_0 = 0, logit_1 = V_i at every position; |V_i| >= MARGIN keeps the argmax unique."""
    W_U = np.zeros((residual.width, 2))  # [d_model, d_vocab_out]
    W_U[residual["verdict"].index, 1] = 1.0
    return Readout(W_U, np.zeros(2), read="all")


def notes(task: TwoSum) -> dict:
    """The constants the argument uses, for the network's meta (the keys are the stored format's: "beta" is mu)."""
    b_M, b_n = code_width(task.M), code_width(task.n)
    return {"lambda": attention_scale(task.n, b_n, b_M), "beta": mismatch_weight(b_n),
            "off_match_mass_bound": off_match_mass_bound(b_n, b_M), "margin": MARGIN,
            "float64_error_bound": float64_error_bound(task.n, b_n, b_M, mismatch_weight(b_n))}


def memory_bytes(n: int, M: int, t: int, causal: bool = False) -> int:
    """What `build` allocates: the token and position tables of width d_model."""
    task = supported_task(n, M, t, causal)
    return table_bytes(task.M + task.n + 2, residual_space(task).width)


def build(n: int, M: int, t: int, causal: bool = False) -> Network:
    """The one-layer network; its readout at position i is y_i (output vocabulary {0, 1})."""
    task = supported_task(n, M, t, causal)
    residual = residual_space(task)
    head = Head(qk=Space.of(("match", code_width(task.M))), ov=value_space(task))
    # score(i, j) = lambda <code(a_i), code(x_j)> = lambda (b_M - 2 hamming(a_i, x_j)): every non-match scores at
    # least CODE_GAP lambda below every match, and `attention_scale` makes the mass off the matches at most eps,
    # which cases (b) and (c) of the module docstring need.
    lam = attention_scale(task.n, code_width(task.n), code_width(task.M))
    arrays = head.dense(residual, [Score(residual["target"], residual["val"], head.qk["match"], lam)],
                        value_routes(residual, head))
    attention = Attention.zeros_bias(**arrays, causal=task.causal)
    meta = Meta(task=task.name, params=task.params(), construction=NAME, claimed_format="fp64", notes=notes(task))
    return Network(Embedding(*embedding_tables(task, residual)), (Layer(attention, verdict_mlp(task, residual)),),
                   verdict_readout(residual), residual.basis(), meta)


build.memory_bytes = memory_bytes
