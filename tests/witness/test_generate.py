"""witness.generate: greedy generation, one full executor run per step under the given format and semantics; a tie
stops an input's generation and says at which step; the context must hold the longest step's input."""

import numpy as np
import pytest

import witness
from tests.oracles.reference_tasks import composition_chain, parse_composition_tokens
from witness.arith import arithmetic
from witness.errors import InputError, ParameterError
from witness.execute import run
from witness.generate import NOT_GENERATED, ContextTooShort, answer_ids, generate, generated_count
from witness.ir import Basis, Embedding, Layer, Network, Readout
from witness.mixers import Attention


def chains(task, batch) -> np.ndarray:
    """i_1 .. i_L of every input, read off the tokens by the literal reference (not the task code)."""
    rows = []
    for tokens in batch:
        z0, tables, w = parse_composition_tokens(task.m, task.n, tokens, task.layout)
        rows.append(composition_chain(task.m, task.n, z0, tables, w)[1:])
    return np.array(rows)


@pytest.fixture(scope="module")
def cot():
    return witness.compile("composition_cot", L=3, m=3, n=[2, 2])


def tie_network(n_ctx: int = 4) -> Network:
    """Three tokens, no position table and an attention layer that adds nothing, so the logits depend on the last
    token alone: after 0 comes 1; after 1, tokens 0 and 2 tie; after 2 comes 2."""
    W_E = np.eye(3)
    zero = np.zeros((1, 3, 1))
    W_U = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    return Network(Embedding(W_E, np.zeros((n_ctx, 3))),
                   (Layer(Attention.zeros_bias(zero, zero, zero, np.zeros((1, 1, 3)), causal=True), None),),
                   Readout(W_U, np.zeros(3), read="last"), Basis(("t0", "t1", "t2")))


def test_a_tie_stops_that_input_and_says_at_which_step():
    generation = generate(tie_network(), np.array([[0], [2]]), 3)
    assert generation.tokens.tolist() == [[1, NOT_GENERATED, NOT_GENERATED], [2, 2, 2]]
    assert generation.stopped_by_tie.tolist() == [1, NOT_GENERATED]
    assert generation.generated(0) == [1] and generation.generated(1) == [2, 2, 2]


def test_a_tie_at_the_first_step_generates_nothing():
    generation = generate(tie_network(), [1, 0, 1], 1)
    assert generation.tokens.tolist() == [[NOT_GENERATED]] and generation.stopped_by_tie.tolist() == [0]
    assert generation.generated(0) == []


def test_each_step_is_one_full_run_of_the_executor(cot):
    """Step s's token is the executor's prediction on the prompt and the s tokens generated before it."""
    arith = arithmetic("fp16", "strict")
    tokens = cot.task.random_tokens(5, 20)
    generated = generate(cot, tokens, cot.task.L, arith).tokens
    for step in range(cot.task.L):
        transcript = np.concatenate([tokens, generated[:, :step]], axis=1)
        assert np.array_equal(run(cot, transcript, arith).predictions[:, 0], generated[:, step])


@pytest.mark.parametrize("fmt, semantics", [("fp16", "strict"), ("fp16", "theory"), ("fp16", "mixed"),
                                            ("bf16", "strict"), ("fp32", "strict")])
def test_generation_under_every_semantics_gives_the_chain(cot, fmt, semantics):
    tokens = cot.task.random_tokens(1, 200)
    generation = generate(cot, tokens, cot.task.L, arithmetic(fmt, semantics))
    assert np.array_equal(generation.tokens, chains(cot.task, tokens))
    assert (generation.stopped_by_tie == NOT_GENERATED).all()


def test_the_context_must_hold_the_prompt_and_all_but_the_last_generated_token(cot):
    prompt = cot.task.random_tokens(2, 1)
    assert cot.n_ctx == cot.task.prompt_length + cot.task.L - 1
    generate(cot, prompt, cot.task.L)  # the last step runs exactly n_ctx tokens
    with pytest.raises(ContextTooShort, match=f"up to {cot.n_ctx + 1} tokens; the network's context holds "
                                              f"{cot.n_ctx}"):
        generate(cot, prompt, cot.task.L + 1)
    assert issubclass(ContextTooShort, InputError)  # the CLI's one-line error, exit 2


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_a_count_below_one_is_refused(k):
    with pytest.raises(ParameterError, match="k must be"):
        generate(tie_network(), [0], k)


def test_answer_ids_generate_only_for_a_task_that_asks_for_it(cot):
    composition = witness.compile("composition", L=2, m=2, n=[2])
    tokens = composition.task.random_tokens(0, 30)
    assert generated_count(composition) == 0 and generated_count(tie_network()) == 0
    assert np.array_equal(answer_ids(composition, tokens), run(composition, tokens).predictions)
    assert generated_count(cot) == cot.task.L
    tokens = cot.task.random_tokens(0, 30)
    assert np.array_equal(answer_ids(cot, tokens), generate(cot, tokens, cot.task.L).tokens)


def test_the_torch_bridge_generates_the_same_tokens_and_stops_at_the_same_tie(cot):
    torch = pytest.importorskip("torch")
    from lab.torch import to_module

    tokens = cot.task.random_tokens(3, 100)
    assert np.array_equal(to_module(cot).generate(torch.as_tensor(tokens), cot.task.L).numpy(),
                          generate(cot, tokens, cot.task.L).tokens)
    assert np.array_equal(to_module(tie_network()).generate(torch.as_tensor([[0], [2]]), 3).numpy(),
                          generate(tie_network(), [[0], [2]], 3).tokens)
