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
lambda b_M, every non-match at least 2 lambda less. Let A be the matches among the keys i sees (every j in the
bidirectional variant, j <= i in the causal one; i itself included) and eps the attention mass off A. Every
coordinate of code(x_j) - code(a_i) is 0 or -2 code(a_i)_k, the same sign for every j (likewise for c(j) - c(i)),
so in exact arithmetic the two sums the MLP forms are expectations under the attention pattern p:

    D_i = || mix_val - code(a_i) ||_1 = 2 E_p[hamming(x_j, a_i)],   P_i = || mix_pos - c(i) ||_1 = 2 E_p[hamming(j, i)]

The MLP writes V_i = P_i - beta D_i - 1/2 with beta = b_n + 1 (two ReLUs per coordinate: relu(z) + relu(-z) = |z|).
  (a) A empty (no match at all, not even i itself): every j has hamming >= 1, so D_i >= 2, and P_i <= 2 b_n;
      V_i <= 2 b_n - 2 beta - 1/2 = -5/2.                                                              y_i = 0
  (b) A = {i} (i is its own only match): mass >= 1 - eps on j = i, so P_i <= 2 b_n eps; V_i <= 2 b_n eps - 1/2.
                                                                                                       y_i = 0
  (c) A holds some j != i: all matches score the same, so the matches other than i hold at least half of the
      mass 1 - eps on A (all of it if i is no match, k/(k+1) if i and k >= 1 others are); each differs from
      i in at least one position bit, so P_i >= 1 - eps; D_i <= 2 b_M eps;
      V_i >= 1/2 - eps (1 + 2 beta b_M).                                                               y_i = 1
With eps <= 1 / (8 (b_n + 1)(b_M + 1)) this gives V_i <= -3/8 in (a), (b) and V_i >= 1/4 in (c): a margin of 1/4
(see `attention_scale`). In the causal variant position 0 sees only itself, so it is case (a) or (b): y_0 = 0.

Float64 (the claimed format): see `float64_error_bound`; for every n, M this construction accepts, the computed
V_i is within 2^-16 of the exact one, far inside the margin of 1/4.

Budget: one layer, H = 1, d_head = b_M + b_n, d_model = 3 b_M + 2 b_n + 1, d_mlp = 2 (b_M + b_n), where
b_M = ceil(log2 M), b_n = ceil(log2 n): H d = O(log n + log M).
"""

from __future__ import annotations

import math

import numpy as np

from constructions.residual import ResidualLayout, code_width, pm1_codes, table_bytes
from witness.errors import ParameterError
from witness.ir import MLP, Embedding, Layer, Meta, Network, Readout
from witness.mixers import Attention
from witness.tasks import TwoSum

NAME = "two_sum"

#: The largest n and M accepted: the position and token tables are materialised, and the float64 error bound
#: stated in the module docstring (below 2^-16) is for this range.
MAX_SIZE = 2**24

#: The readout margin in exact arithmetic: |V_i| >= 1/4 on every input (module docstring, cases a-c).
MARGIN = 0.25

UNIT_ROUNDOFF = 2.0**-53


def off_match_mass_bound(b_n: int, b_M: int) -> float:
    """eps: the attention mass the argument lets fall off the matches, 1 / (8 (b_n + 1)(b_M + 1))."""
    return 1 / (8 * (b_n + 1) * (b_M + 1))


def attention_scale(n: int, b_n: int, b_M: int) -> int:
    """lambda: the smallest integer with (n - 1) exp(-2 lambda) <= off_match_mass_bound(b_n, b_M).

    When i has a match, that match has weight exp(0) = 1 after the max is subtracted, and each of the at most
    n - 1 other keys scores at least 2 lambda lower, so the mass off the matches is at most (n - 1) e^{-2 lambda}.
    An integer keeps every score an exact integer in every format.
    """
    return max(1, math.ceil(math.log((n - 1) / off_match_mass_bound(b_n, b_M)) / 2))


def float64_error_bound(n: int, b_n: int, b_M: int, beta: int) -> float:
    """A bound on |computed V_i - exact V_i| when the network runs in float64 (round to nearest, u = 2^-53).

    Exact steps: the embedding (disjoint supports), q and k (±lambda, ±1 entries), the integer scores and the max
    subtraction, W_O (a 0/1 selection), the residual additions (disjoint supports) and the readout (it selects
    `verdict`). Rounded steps, with gamma_k = k u / (1 - k u):
      * exp (numpy's is within 4 ulp, 8u relative), the sum of n positive terms, the division: each weight has
        relative error at most gamma_{n+12};
      * mix = p v with |v| = 1: |error| <= gamma_n (1 + gamma_{n+12}) + gamma_{n+12} <= gamma_{2n+13};
      * each hidden unit relu(+-(mix_k - code_k)) adds one rounding of a number below 3: error <= gamma_{2n+16};
      * V = sum of 2w hidden units (w = b_M + b_n) with weights 1 or -beta, each unit <= 3, then - 1/2: the
        propagated error is at most W gamma_{2n+16} with W = 2 b_n + 2 beta b_M + 1, the summation's own at
        most gamma_{2w+1} 3 W.
    Total: W (gamma_{2n+16} + 3 gamma_{2w+1}), summation order free (any BLAS order obeys these bounds).
    """
    width = b_M + b_n

    def gamma(k: int) -> float:
        return k * UNIT_ROUNDOFF / (1 - k * UNIT_ROUNDOFF)

    weight = 2 * b_n + 2 * beta * b_M + 1
    return weight * (gamma(2 * n + 16) + 3 * gamma(2 * width + 1))


def supported_task(n: int, M: int, t: int, causal: bool = False) -> TwoSum:
    """The task, refused (ParameterError) beyond the sizes this construction is stated for."""
    task = TwoSum(n, M, t, causal)
    for name, value in (("n", task.n), ("M", task.M)):
        if value > MAX_SIZE:
            raise ParameterError(f"the two_sum construction needs {name} <= 2^24 = {MAX_SIZE} (its tables are "
                                 f"materialised, and its float64 error bound is stated for that range), got {value}")
    return task


def memory_bytes(n: int, M: int, t: int, causal: bool = False) -> int:
    """What `build` allocates: the token and position tables of width d_model = 3 b_M + 2 b_n + 1."""
    task = supported_task(n, M, t, causal)
    return table_bytes(task.M + task.n + 2, 3 * code_width(task.M) + 2 * code_width(task.n) + 1)


def build(n: int, M: int, t: int, causal: bool = False) -> Network:
    """The one-layer network; its readout at position i is y_i (output vocabulary {0, 1})."""
    task = supported_task(n, M, t, causal)
    b_M = code_width(task.M)
    b_n = code_width(task.n)

    res = ResidualLayout()
    val = res.group("val", b_M)
    target = res.group("target", b_M)
    pos = res.group("pos", b_n)
    mix_val = res.group("mix_val", b_M)
    mix_pos = res.group("mix_pos", b_n)
    verdict = res.scalar("verdict")
    d_model = res.width

    # -- embedding ---------------------------------------------------------------------------------------
    tokens = np.arange(task.M)
    W_E = np.zeros((task.M, d_model))  # [d_vocab, d_model]
    W_E[:, val] = pm1_codes(tokens, b_M)
    W_E[:, target] = pm1_codes((task.t - tokens) % task.M, b_M)
    W_pos = np.zeros((task.n, d_model))  # [n_ctx, d_model]
    W_pos[:, pos] = pm1_codes(np.arange(task.n), b_n)

    # -- attention: one head ---------------------------------------------------------------------------------
    # Head dimensions 0..b_M-1 score the match and carry code(x_j); b_M..b_M+b_n-1 carry the position code c(j).
    d_head = b_M + b_n
    head_val, head_pos = np.arange(b_M), b_M + np.arange(b_n)
    # lambda: score(i, j) = lambda <code(a_i), code(x_j)> = lambda (b_M - 2 hamming(a_i, x_j)), so every
    # non-match scores at least 2 lambda below every match; `attention_scale` makes the mass off the matches at
    # most eps = 1 / (8 (b_n + 1)(b_M + 1)), which cases (b) and (c) of the module docstring need.
    lam = attention_scale(task.n, b_n, b_M)
    W_Q = np.zeros((1, d_model, d_head))  # [H, d_model, d_head]
    W_K = np.zeros((1, d_model, d_head))
    W_V = np.zeros((1, d_model, d_head))
    W_O = np.zeros((1, d_head, d_model))  # [H, d_head, d_model]
    W_Q[0, target, head_val] = lam
    W_K[0, val, head_val] = 1.0
    W_V[0, val, head_val] = 1.0
    W_V[0, pos, head_pos] = 1.0
    W_O[0, head_val, mix_val] = 1.0
    W_O[0, head_pos, mix_pos] = 1.0
    attention = Attention.zeros_bias(W_Q, W_K, W_V, W_O, causal=task.causal)

    # -- MLP: V_i = P_i - beta D_i - 1/2, each |z| as relu(z) + relu(-z) -----------------------------------
    # beta = b_n + 1: with no match at all, D_i >= 2 outweighs P_i <= 2 b_n by 2 (case (a)); with a match,
    # D_i <= 2 b_M eps costs at most 2 beta b_M eps, which eps keeps below 1/4 (case (c)).
    beta = b_n + 1
    pairs = [(mix_val[k], target[k], -float(beta)) for k in range(b_M)]
    pairs += [(mix_pos[k], pos[k], 1.0) for k in range(b_n)]
    W_in = np.zeros((d_model, 2 * len(pairs)))  # [d_model, d_mlp]
    W_out = np.zeros((2 * len(pairs), d_model))  # [d_mlp, d_model]
    for unit, (mixed, reference, weight) in enumerate(pairs):
        for sign, column in ((1.0, 2 * unit), (-1.0, 2 * unit + 1)):
            W_in[mixed, column], W_in[reference, column] = sign, -sign
            W_out[column, verdict] = weight
    b_out = np.zeros(d_model)
    b_out[verdict] = -0.5
    mlp = MLP(W_in, np.zeros(W_in.shape[1]), W_out, b_out)

    # -- readout: logit_0 = 0, logit_1 = V_i; |V_i| >= 1/4 keeps the argmax unique ---------------------------
    W_U = np.zeros((d_model, 2))  # [d_model, d_vocab_out]
    W_U[verdict, 1] = 1.0
    readout = Readout(W_U, np.zeros(2), read="all")

    eps = off_match_mass_bound(b_n, b_M)
    meta = Meta(
        task=task.name,
        params=task.params(),
        construction=NAME,
        claimed_format="fp64",
        notes={"lambda": lam, "beta": beta, "off_match_mass_bound": eps, "margin": MARGIN,
               "float64_error_bound": float64_error_bound(task.n, b_n, b_M, beta)},
    )
    return Network(Embedding(W_E, W_pos), (Layer(attention, mlp),), readout, res.basis(), meta)


build.memory_bytes = memory_bytes
