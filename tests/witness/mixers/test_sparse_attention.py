"""(B,k)-block-sparse and sliding-window attention: IR, executor (every format and semantics), MPFR reference,
files, torch bridge and budget.

The float64 checks compare with a plain per-query loop written here; the `strict` checks compare bit for bit with
the scalar MPFR reference (tests.oracles.mpfr_reference)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings

from tests.oracles.strict_agreement import assert_strict_matches_reference
from lab import strategies as ws
from witness.arith import arithmetic, parse_format
from witness.errors import OverflowInFormat, ParameterError
from witness.execute import run
from witness.io import load
from witness.ir import Basis, Embedding, Layer, Meta, Network, Readout
from witness.mixers import Attention, BlockSparseAttention, SlidingWindowAttention
from witness.mixers.block_sparse import select_blocks
from tests.oracles.mpfr_reference import reference_run

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# See tests/test_reference_forward.py: both sides are float64 with different summation orders.
RELATIVE_TOLERANCE = 1e-9


# -- a plain per-query loop, independent of witness.execute ------------------------------------------------------
def visible_keys(mixer, q: np.ndarray, k: np.ndarray, i: int) -> list[int]:
    """The keys query i attends to, for one head (q, k: [n, d_head])."""
    n = len(q)
    if isinstance(mixer, SlidingWindowAttention):
        return [j for j in range(n) if (0 <= i - j < mixer.window if mixer.causal else abs(i - j) < mixer.window)]
    B = mixer.block
    starts = list(range(0, n, B))
    summaries = [k[s:s + B].mean(axis=0) for s in starts]
    own = i // B
    others = [b for b in range(len(starts)) if (b < own if mixer.causal else b != own)]
    others.sort(key=lambda b: (-float(q[i] @ summaries[b]), b))
    kept = {own, *others[:mixer.k]}
    return [j for j in range(n) if j // B in kept and (j <= i or not mixer.causal)]


def loop_forward(network: Network, tokens: np.ndarray) -> tuple[np.ndarray, list]:
    """Logits [n_read, d_vocab_out] for one sequence, and per layer and head the visible key lists."""
    n = len(tokens)
    x = network.embedding.W_E[tokens] + network.embedding.W_pos[:n]
    seen = []
    for layer in network.layers:
        a = layer.mixer
        out = np.tile(a.b_O, (n, 1))
        heads = []
        for h in range(a.n_heads):
            q, k, v = (x @ W[h] + b[h] for W, b in ((a.W_Q, a.b_Q), (a.W_K, a.b_K), (a.W_V, a.b_V)))
            rows = []
            for i in range(n):
                keys = visible_keys(a, q, k, i)
                scores = np.array([q[i] @ k[j] for j in keys])
                weights = np.exp(scores - scores.max())
                weights /= weights.sum()
                out[i] += (weights @ v[keys]) @ a.W_O[h]
                rows.append(keys)
            heads.append(rows)
        seen.append(heads)
        x = x + out
        if layer.mlp is not None:
            m = layer.mlp
            x = x + np.maximum(x @ m.W_in + m.b_in, 0.0) @ m.W_out + m.b_out
    return x[list(network.read_positions(n))] @ network.readout.W_U + network.readout.b_U, seen


@SETTINGS
@given(ws.sparse_networks(max_layers=1, max_ctx=9, block_sizes=(1, 2, 4)))
def test_float64_executor_matches_a_plain_per_query_loop(net_and_tokens):
    """One sparse layer on dyadic weights (multiples of 1/16) and power-of-two blocks: keys, block means and block
    scores are exact in float64 on both sides, so the kept blocks must agree exactly; logits to float64 rounding."""
    network, tokens = net_and_tokens
    outputs = run(network, tokens, trace=True)
    for row, sequence in enumerate(tokens):
        logits, seen = loop_forward(network, sequence)
        scale = max(1.0, float(np.abs(logits).max()))
        assert np.abs(outputs.logits[row] - logits).max() <= RELATIVE_TOLERANCE * scale
        for l, heads in enumerate(seen):
            pattern = outputs.trace[f"blocks.{l}.attn.hook_pattern"][row]
            for h, rows in enumerate(heads):
                for i, keys in enumerate(rows):
                    assert set(np.flatnonzero(pattern[h, i])) <= set(keys)  # exp may underflow to 0, never more
                    assert pattern[h, i, [j for j in range(len(sequence)) if j not in keys]].sum() == 0


# -- strict: bit for bit against MPFR --------------------------------------------------------------------------
@pytest.mark.parametrize("spec", ["float:3,4", "float:5,5", "fp16", "bf16", "fp32", "fixed:4,4", "fixed:6,8"])
@SETTINGS
@given(net_and_tokens=ws.sparse_networks(max_ctx=8))
def test_strict_matches_mpfr_reference_on_sparse_networks(spec, net_and_tokens):
    event(assert_strict_matches_reference(*net_and_tokens, parse_format(spec)))


@pytest.mark.parametrize("spec", ["float:3,4", "fixed:10,6"])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(net_and_tokens=ws.sparse_networks(max_ctx=8, scale=16.0))
def test_strict_matches_mpfr_reference_where_sparse_values_overflow(spec, net_and_tokens):
    event(assert_strict_matches_reference(*net_and_tokens, parse_format(spec)))


# -- the selection rule by hand ---------------------------------------------------------------------------------
def test_select_blocks_by_hand():
    # 3 queries' scores for 4 blocks of size 1 (query i's own block is i).
    scores = np.array([[9.0, 5.0, 5.0, 7.0],       # own 0; candidates 1, 2, 3: 3 (7) then 1 (5, lower index of a tie)
                       [1.0, 9.0, np.nan, 1.0],    # own 1; 0 and 3 tie at 1, NaN last: 0 then 3
                       [-np.inf, 2.0, 0.0, -0.0]])  # own 2; candidates 0 (-inf), 1, 3: 1 then 3 (-0.0 > -inf)
    chosen = select_blocks(scores, 1, 2, causal=False)
    assert chosen.tolist() == [[True, True, False, True], [True, True, False, True], [False, True, True, True]]
    # causal: only blocks before the own one; query 1 has one candidate, query 0 none; k larger keeps them all
    chosen = select_blocks(scores, 1, 5, causal=True)
    assert chosen.tolist() == [[True, False, False, False], [True, True, False, False], [True, True, True, False]]
    # k = 0: the own block only; size 2: queries 0, 1 own block 0 and query 2 block 1
    assert select_blocks(scores[:, :2], 2, 0, causal=False).tolist() == [[True, False], [True, False], [False, True]]


def one_head_network(mixer_class, n: int, **options) -> Network:
    """d_model 2 (token value, 1); key = value, query = 1, v = value: each query's block scores are the block
    means of the values, and the output is the attention-weighted value."""
    W = np.array([[[1.0], [0.0]]])  # [1, d_model, 1]: the value coordinate
    W_Q = np.array([[[0.0], [1.0]]])  # the constant coordinate
    mixer = mixer_class(W_Q=W_Q, W_K=W, W_V=W, W_O=np.array([[[1.0, 0.0]]]), b_Q=np.zeros((1, 1)),
                        b_K=np.zeros((1, 1)), b_V=np.zeros((1, 1)), b_O=np.zeros(2), **options)
    W_E = np.stack([np.arange(8.0), np.ones(8)], axis=1)
    return Network(Embedding(W_E, np.zeros((n, 2))), (Layer(mixer),), Readout(np.eye(2), np.zeros(2), read="all"),
                   Basis(("value", "one")), Meta())


def test_block_sparse_pattern_by_hand():
    # values 0 0 | 4 4 | 2 6 | 1 1, B = 2, k = 1: block means 0, 4, 4, 1; blocks 1 and 2 tie at 4.
    network = one_head_network(BlockSparseAttention, 8, block=2, k=1, causal=False)
    trace = run(network, [0, 0, 4, 4, 2, 6, 1, 1], trace=True).trace
    assert trace["blocks.0.attn.hook_block_summary"][0, 0, :, 0].tolist() == [0.0, 4.0, 4.0, 1.0]
    kept = trace["blocks.0.attn.hook_selected_blocks"][0, 0]
    # queries in block 0 and 3 keep block 1 (tie to the lower index); queries in blocks 1 and 2 keep each other
    expected = [[0, 1], [0, 1], [1, 2], [1, 2], [1, 2], [1, 2], [1, 3], [1, 3]]
    assert [list(np.flatnonzero(row)) for row in kept] == expected
    pattern = trace["blocks.0.attn.hook_pattern"][0, 0]
    assert [list(np.flatnonzero(row)) for row in pattern] == [
        [2 * b + e for b in blocks for e in range(2)] for blocks in expected]
    # causal: query 5 (block 2) may only pick block 0 or 1 and sees 4, 5 of its own block; query 4 only 4
    trace = run(one_head_network(BlockSparseAttention, 8, block=2, k=1, causal=True),
                [0, 0, 4, 4, 2, 6, 1, 1], trace=True).trace
    pattern = trace["blocks.0.attn.hook_pattern"][0, 0]
    assert list(np.flatnonzero(pattern[5])) == [2, 3, 4, 5] and list(np.flatnonzero(pattern[4])) == [2, 3, 4]
    assert list(np.flatnonzero(pattern[1])) == [0, 1]


def test_sliding_window_pattern_by_hand():
    trace = run(one_head_network(SlidingWindowAttention, 6, window=2, causal=True), [1] * 6, trace=True).trace
    assert [list(np.flatnonzero(r)) for r in trace["blocks.0.attn.hook_pattern"][0, 0]] == [
        [0], [0, 1], [1, 2], [2, 3], [3, 4], [4, 5]]
    trace = run(one_head_network(SlidingWindowAttention, 6, window=2, causal=False), [1] * 6, trace=True).trace
    assert [list(np.flatnonzero(r)) for r in trace["blocks.0.attn.hook_pattern"][0, 0]] == [
        [0, 1], [0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 5], [4, 5]]


@pytest.mark.parametrize("semantics", ["strict", "theory", "mixed"])
@pytest.mark.parametrize("spec", ["fp16", "fixed:6,8"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(net_and_tokens=ws.networks(max_ctx=8))
def test_sparse_kinds_that_see_everything_are_full_attention_bit_for_bit(semantics, spec, net_and_tokens):
    """A window as long as the context, or k at least the number of other blocks, keeps every key: the output is
    full attention's, bit for bit, in every semantics (the masks differ only in how they were computed)."""
    network, tokens = net_and_tokens
    arith = arithmetic(spec, semantics)

    def swapped(make):
        layers = tuple(Layer(make(layer.mixer), layer.mlp) for layer in network.layers)
        return Network(network.embedding, layers, network.readout, network.basis, network.meta)

    def logits(net):
        try:
            return run(net, tokens, arith).logits
        except OverflowInFormat:
            return "overflow"

    full = logits(network)
    n = network.n_ctx
    for make in (lambda a: SlidingWindowAttention(**a.arrays(), window=n, causal=a.causal),
                 lambda a: BlockSparseAttention(**a.arrays(), block=2, k=n, causal=a.causal)):
        other = logits(swapped(make))
        assert (isinstance(full, str) and other == full) or np.array_equal(other, full, equal_nan=True)


def test_block_scores_of_queries_nothing_reads_are_not_computed():
    # d_model 1: position 0 holds 4, position 1 holds 0; q = k = x, v = 0, one key per block. Query 0's block score
    # against its neighbour, 4 * 0, fits fixed:3,2 ([-8, 7.75]) but its own, 4 * 4 = 16, does not. The readout reads
    # position 1 only, so an untraced run (and the MPFR reference) never scores query 0's blocks: no overflow, as for
    # full attention; a traced run scores every query and overflows.
    one, zero = np.ones((1, 1, 1)), np.zeros((1, 1, 1))
    sparse = BlockSparseAttention(**Attention.zeros_bias(one, one, zero, zero).arrays(), block=1, k=1, causal=False)
    network = Network(Embedding(np.zeros((1, 1)), np.array([[4.0], [0.0]])), (Layer(sparse, None),),
                      Readout(np.array([[1.0, -1.0]]), np.array([0.0, 0.25])), Basis(("x[0]",)), Meta())
    arith = arithmetic("fixed:3,2", "strict")
    assert run(network, [0, 0], arith).predictions.tolist() == [[1]]
    assert reference_run(network, [0, 0], parse_format("fixed:3,2")).predictions.tolist() == [1]
    with pytest.raises(OverflowInFormat, match="matmul"):
        run(network, [0, 0], arith, trace=True)


# -- IR validation, files, budget, torch ---------------------------------------------------------------------
@pytest.mark.parametrize("options", [dict(block=0, k=1), dict(block=2, k=-1), dict(block=True, k=1),
                                     dict(block=2.0, k=1), dict(block=2**24 + 1, k=1), dict(window=0),
                                     dict(window=np.int64(-3)), dict(window="4"), dict(window=2**24 + 1)])
def test_sparse_options_are_validated(options):
    arrays = Attention.zeros_bias(np.zeros((1, 2, 1)), np.zeros((1, 2, 1)), np.zeros((1, 2, 1)),
                                  np.zeros((1, 1, 2))).arrays()
    mixer_class = SlidingWindowAttention if "window" in options else BlockSparseAttention
    with pytest.raises(ParameterError):
        mixer_class(**arrays, **options)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ws.sparse_networks(max_ctx=8))
def test_sparse_networks_round_trip_through_files(tmp_path_factory, net_and_tokens):
    network, tokens = net_and_tokens
    path = tmp_path_factory.mktemp("sparse") / "net.npz"
    network.save(path)
    back = load(path)
    assert back.structure() == network.structure()
    assert all(type(a.mixer) is type(b.mixer) for a, b in zip(back.layers, network.layers))
    for name, array in network.state_dict().items():
        assert np.array_equal(back.state_dict()[name], array)
    assert np.array_equal(run(back, tokens).logits, run(network, tokens).logits, equal_nan=True)


def test_budget_counts_sparse_heads_like_full_ones():
    network = one_head_network(BlockSparseAttention, 8, block=2, k=1)
    budget = network.budget(16)
    assert (budget.H, budget.d_head, budget.d_model, budget.Hdp) == (1, 1, 2, 1 * 2 * 16)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ws.sparse_networks(max_ctx=8))
def test_torch_round_trip_is_bit_for_bit(net_and_tokens):
    wt = pytest.importorskip("lab.torch")
    network, _ = net_and_tokens
    back = wt.from_module(wt.to_module(network))
    assert back.structure() == network.structure()
    for name, array in network.state_dict().items():
        assert np.array_equal(back.state_dict()[name], array)


@SETTINGS
@given(ws.sparse_networks(max_layers=1, max_ctx=9, block_sizes=(1, 2, 4)))
def test_torch_module_computes_what_the_executor_computes(net_and_tokens):
    """Dyadic weights, one layer: the kept blocks agree exactly, logits to float64 rounding (BLAS order)."""
    torch = pytest.importorskip("torch")
    import lab.torch as wt

    network, tokens = net_and_tokens
    with torch.no_grad():
        module_logits = wt.to_module(network).read_logits(torch.as_tensor(tokens)).numpy()
    expected = run(network, tokens).logits
    reference = np.stack([loop_forward(network, row)[0] for row in tokens])
    scale = max(1.0, float(np.abs(reference).max()))
    assert np.abs(module_logits - reference).max() <= RELATIVE_TOLERANCE * scale
    assert np.abs(expected - reference).max() <= RELATIVE_TOLERANCE * scale


def test_transformer_lens_export_refuses_sparse_attention():
    wt = pytest.importorskip("lab.torch")
    with pytest.raises(ParameterError, match="softmax attention only"):
        wt.transformer_lens_config(one_head_network(SlidingWindowAttention, 4, window=2))


@pytest.mark.parametrize("mixer, options", [("block_sparse", (("block", 2), ("k", 1))),
                                            ("sliding_window", (("window", 3),))])
def test_the_trainer_trains_sparse_mixers(mixer, options):
    """A few steps on 2-Sum: the trained network keeps its sparse kind and options, and the reported accuracy is
    the executor's on the reported inputs (here every input of the family)."""
    pytest.importorskip("torch")
    from witness.tasks import TwoSum
    from lab.train import Architecture, LayerSpec, train

    task = TwoSum(4, 3, 1, causal=False)
    spec = LayerSpec(causal=False, d_mlp=8, mixer=mixer, options=options)
    network, report = train(Architecture(H=1, d_head=4, d_model=8, layers=(spec,), read="all"), task, steps=30,
                            seed=0, eval_every=10)
    mixer_block = network.layers[0].mixer
    assert mixer_block.kind == mixer and all(getattr(mixer_block, name) == value for name, value in options)
    tokens = np.concatenate(list(task.enumerate_tokens(1000)))
    correct = (run(network, tokens).predictions == task.answers(tokens).reshape(len(tokens), -1)).all(axis=1)
    assert report.exhaustive and report.eval_inputs == len(tokens) and report.accuracy == correct.mean()
