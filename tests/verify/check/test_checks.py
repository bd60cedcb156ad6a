"""verify.check.checks: the exhaustive (in this process and chunked on a sweep), sampled and Hypothesis checks, and
`witness verify`.

Expected answers come from tests/oracles/reference_tasks.py (a literal reading of conventions §1.1), never from the
task code the checks use; every output a test compares with comes from a fresh executor run.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import witness
from cli.main import main
from lab.sweep import Engine
from tests.oracles.reference_tasks import all_composition_inputs, composition_alphabets, composition_answer_from_tokens
from verify import check
from verify.result import Status
from witness.arith import FLOAT64, arithmetic, parse_format
from witness.errors import ParameterError
from witness.execute import run, unique_argmax


@pytest.fixture(scope="module")
def small():
    return witness.compile("composition", L=2, m=2, n=[2])


def broken(network, name="blocks.1.attn.W_Q", index=(0, 0, 0), value=0.0):
    """The network with one weight set to `value` (by default the block indicator of layer 1's query)."""
    array = np.array(network.state_dict()[name], dtype=np.float64)  # the stored dtype may be narrower
    array[index] = value
    return network.with_arrays({name: array})


def replays(network, counterexample, arith) -> bool:
    """The counterexample's expected answer is the reference answer and the network, re-run, does not give it."""
    params = network.meta.params
    tokens = np.array(counterexample.tokens)
    reference = composition_answer_from_tokens(params["m"], tuple(params["n"]), tokens)
    if counterexample.expected != reference:
        return False
    try:
        output = int(run(network, tokens, arith).predictions[0, 0])
    except witness.OverflowInFormat:
        return str(counterexample.output).startswith("overflow")
    return output == counterexample.output and output != reference


def reference_failing(network, inputs, arith) -> tuple[list[bool], list[bool]]:
    """Per input, run on its own: whether it fails (a wrong answer or an overflow), and whether it overflows."""
    params = network.meta.params
    failing, overflowing = [], []
    for tokens in inputs:
        try:
            output = int(run(network, np.asarray(tokens), arith).predictions[0, 0])
        except witness.OverflowInFormat:
            failing.append(True)
            overflowing.append(True)
            continue
        failing.append(output != composition_answer_from_tokens(params["m"], tuple(params["n"]), tokens))
        overflowing.append(False)
    return failing, overflowing


#: fixed:4,4 holds [-16, 15.9375]; the composition construction at L = 1, m = 3 verifies in it.
FIXED_4_4 = arithmetic("fixed:4,4", "strict")


def overflowing_on_token_2():
    """L = 1, m = 3 with token 2's embedding given 15 on the `one` direction, which the position table sets to 1
    everywhere: the embedding sum 16 overflows fixed:4,4 exactly on inputs containing token 2."""
    network = witness.compile("composition", L=1, m=3)
    W_E = np.array(network.state_dict()["embed.W_E"], dtype=np.float64)
    W_E[2, network.basis.labels.index("one")] = 15.0
    return network.with_arrays({"embed.W_E": W_E})


#: Noise of this scale from this seed leaves the L = 1, m = 4 construction wrong on exactly one input.
WRONG_ONCE_SEED, WRONG_ONCE_SCALE = 22, 0.05


@pytest.fixture(scope="module")
def wrong_once():
    """The L = 1, m = 4 construction with seeded noise that leaves it wrong on exactly one of its 1024 inputs (the
    seed found by a plain loop over seeds; the fixture counts again), and that input."""
    construction = witness.compile("composition", L=1, m=4)
    rng = np.random.default_rng(WRONG_ONCE_SEED)
    network = construction.with_arrays({name: np.asarray(array) + WRONG_ONCE_SCALE * rng.standard_normal(
        np.shape(array)) for name, array in construction.state_dict().items()})
    inputs = [list(tokens) for tokens in all_composition_inputs(4, ())]
    failing, _ = reference_failing(network, inputs, FLOAT64)
    assert sum(failing) == 1
    return network, inputs[failing.index(True)]


# -- exhaustive --------------------------------------------------------------------------------------------------
def test_exhaustive_verifies_the_construction_and_counts_every_input(small):
    result = check.exhaustive(small)
    assert result.status is Status.VERIFIED
    assert (result.checked, result.failures, result.kept) == (4096, 0, ())


def test_exhaustive_failure_count_matches_a_plain_loop(small):
    network = broken(small)
    result = check.exhaustive(network)
    alphabets = composition_alphabets(2, (2,), "paper")
    batch = np.array(np.meshgrid(*alphabets, indexing="ij")).reshape(len(alphabets), -1).T
    answers = np.array([composition_answer_from_tokens(2, (2,), row) for row in batch])
    wrong = int((np.array(network.run(batch)) != answers).sum())
    assert wrong > 0
    assert result.status is Status.FALSIFIED
    assert (result.checked, result.failures) == (4096, wrong)
    assert replays(network, result.counterexample, FLOAT64)
    assert set(result.counterexample.trace) == {f"blocks.{l}.hook_{where}" for l in range(3)
                                                for where in ("resid_mid", "resid_post")}


def test_one_wrong_input_is_found_by_exhaustive_and_never_verified_by_a_sample(wrong_once):
    network, wrong = wrong_once
    result = check.exhaustive(network, max_failures=3)
    assert (result.status, result.checked, result.failures) == (Status.FALSIFIED, 1024, 1)
    assert result.counterexample.tokens == wrong and [failure.tokens for failure in result.kept] == [wrong]
    assert replays(network, result.counterexample, FLOAT64)
    missed = []
    for seed in range(20):  # 20 of 1024 inputs: most seeds miss the one wrong input, and must not say verified
        sampled = check.sampled(network, 20, seed)
        assert sampled.status is not Status.VERIFIED and sampled.checked == 20
        if sampled.status is Status.UNKNOWN:
            missed.append(seed)
            assert (sampled.failures, sampled.counterexample) == (0, None)
    assert missed
    assert check.hypothesis_search(network, max_examples=20, seed=0).status is not Status.VERIFIED


def test_a_stream_that_loses_an_input_cannot_verify(small):
    """Verified means as many inputs ran as the family has: the enumeration with its last input dropped is
    unknown, however right every input it holds is answered."""
    batches = list(small.task.enumerate_tokens(check.batch_size(small)))
    batches[-1] = batches[-1][:-1]
    result = check.check_batches(small, batches, FLOAT64, "exhaustive", family_size=small.task.count())
    assert (result.status, result.checked, result.failures) == (Status.UNKNOWN, 4095, 0)


def test_an_overflowing_input_is_a_failure_that_ends_the_check(small):
    # Enumeration runs the last position fastest, so inputs 0 and 1 ([0,0,0,0,3], [0,0,0,1,3]) pass and input 2
    # ([0,0,0,2,3]) overflows.
    result = check.exhaustive(overflowing_on_token_2(), FIXED_4_4)
    assert (result.status, result.checked, result.failures) == (Status.FALSIFIED, 3, 1)
    assert result.counterexample.tokens == [0, 0, 0, 2, 3]
    assert result.counterexample.output.startswith("overflow: fixed:4,4 overflow in add")
    assert "stopped_by_overflow" in result.detail
    # weights that do not fit fail on the very first input
    result = check.exhaustive(small, arithmetic("fixed:1,3", "strict"))
    assert (result.status, result.checked, result.failures) == (Status.FALSIFIED, 1, 1)
    assert result.counterexample.output.startswith("overflow: fixed:1,3 overflow in weights")


def test_a_verdict_stops_at_the_first_overflow_and_a_search_runs_past_it():
    network = overflowing_on_token_2()
    inputs = [list(tokens) for tokens in all_composition_inputs(3, ())]  # the enumeration order
    failing, overflowing = reference_failing(network, inputs, FIXED_4_4)
    stop = overflowing.index(True)
    assert 0 < stop and sum(failing[stop + 1:]) > 0 and not all(failing)
    verdict = check.exhaustive(network, FIXED_4_4)
    assert (verdict.status, verdict.checked, verdict.failures) == (Status.FALSIFIED, stop + 1, sum(failing[:stop + 1]))
    searched = check.exhaustive(network, FIXED_4_4, stop_at_overflow=False, max_failures=4)
    assert (searched.status, searched.checked, searched.failures) == (Status.FALSIFIED, len(inputs), sum(failing))
    assert "stopped_by_overflow" not in searched.detail
    kept = [tokens for tokens, bad in zip(inputs, failing) if bad][:4]
    assert [failure.tokens for failure in searched.kept] == kept
    # an overflowing input answers nothing: the confirmed failure says so with output None
    assert all((failure.output is None) == (2 in failure.tokens) for failure in searched.kept)


def test_a_check_that_keeps_no_failure_still_counts_every_one(small):
    result = check.exhaustive(broken(small), stop_at_overflow=False)
    assert result.kept == () and result.failures == check.exhaustive(broken(small)).failures > 0
    for engine in (None, Engine()):
        with pytest.raises(ParameterError, match="max_failures"):
            check.exhaustive(small, max_failures=-1, engine=engine)


def test_exhaustive_refuses_a_family_over_its_limit(small):
    with pytest.raises(ParameterError):
        check.exhaustive(small, limit=100)
    with pytest.raises(ParameterError):
        check.exhaustive(small, limit=100, engine=Engine())


# -- exhaustive in chunks on a sweep -----------------------------------------------------------------------------
def without_chunks(result) -> str:
    """The Result as JSON text without the chunk count (text, so that NaNs in a trace compare equal)."""
    out = result.as_dict()
    out["detail"] = {k: v for k, v in out["detail"].items() if k != "chunks"}
    return json.dumps(out, sort_keys=True)


def without_answer_zero(network):
    """The network with answer 0's readout column removed: exactly the inputs whose answer is 0 go wrong."""
    W_U = network.state_dict()["unembed.W_U"].copy()
    W_U[:, 0] = 0.0
    return network.with_arrays({"unembed.W_U": W_U})


@pytest.mark.parametrize("fmt, breaking", [("fp16", False), ("fp16", True), ("float:2,2", False),
                                           ("fixed:2,2", False)])
def test_chunked_on_two_workers_equals_the_serial_check(fmt, breaking):
    # fp16: verified; broken: some wrong answers; float:2,2: every answer wrong; fixed:2,2: a run overflows and
    # ends the check.
    network = witness.compile("composition", L=1, m=4)
    network = without_answer_zero(network) if breaking else network
    arith = arithmetic(parse_format(fmt), "strict")
    serial = check.exhaustive(network, arith, max_failures=2)
    chunked = check.exhaustive(network, arith, engine=Engine(workers=2), chunks=3, max_failures=2)
    assert without_chunks(chunked) == without_chunks(serial)
    if fmt == "fp16" and not breaking:
        assert chunked.status.value == "verified" and chunked.checked == 4**4 * 4


def test_chunked_counts_every_wrong_input_like_a_plain_loop():
    network = without_answer_zero(witness.compile("composition", L=1, m=3))
    arith = arithmetic(parse_format("fp16"), "strict")
    result = check.exhaustive(network, arith, engine=Engine(), chunks=5)  # in-process
    wrong = sum(int(run(network, np.array([tokens]), arith).predictions[0][0])
                != composition_answer_from_tokens(3, (), tokens) for tokens in all_composition_inputs(3, ()))
    assert result.checked == 3**3 * 3 and 0 < result.failures == wrong < result.checked
    assert result.status.value == "falsified" and result.detail["chunks"] == 5


def test_chunked_finds_the_one_wrong_input_and_runs_past_overflows_when_asked(wrong_once):
    network, wrong = wrong_once
    result = check.exhaustive(network, engine=Engine(), chunks=7, max_failures=1)
    assert (result.status, result.failures, result.counterexample.tokens) == (Status.FALSIFIED, 1, wrong)
    searched = check.exhaustive(overflowing_on_token_2(), FIXED_4_4, engine=Engine(), chunks=4, stop_at_overflow=False)
    serial = check.exhaustive(overflowing_on_token_2(), FIXED_4_4, stop_at_overflow=False)
    assert (searched.checked, searched.failures) == (serial.checked, serial.failures) == (81, serial.failures)


def test_an_overflow_in_a_later_chunk_ends_the_check_there_as_in_the_serial_check():
    # One input per chunk: inputs 0 and 1 pass, input 2 overflows, and the 78 chunks after it are discarded.
    network, arith = overflowing_on_token_2(), FIXED_4_4
    serial = check.exhaustive(network, arith)
    chunked = check.exhaustive(network, arith, engine=Engine(), chunks=81)  # in-process
    assert chunked.detail["chunks"] == 81 and (chunked.checked, chunked.failures) == (3, 1)
    assert (chunked.status, chunked.counterexample) == (serial.status, serial.counterexample)
    # the message locates the overflowing value in the batch that ran it: a chunk's batch, not the serial one
    for result in (chunked, serial):
        assert result.detail["stopped_by_overflow"].startswith("fixed:4,4 overflow in add at index (")


def test_bad_chunks_are_refused():
    network = witness.compile("composition", L=1, m=2)
    fp16 = arithmetic(parse_format("fp16"), "strict")
    with pytest.raises(ParameterError, match="chunks"):
        check.exhaustive(network, fp16, engine=Engine(), chunks=0)
    with pytest.raises(ParameterError, match="chunks go with an engine"):
        check.exhaustive(network, fp16, chunks=4)


# -- sampled and Hypothesis --------------------------------------------------------------------------------------
def test_sampled_and_hypothesis_never_say_verified(small):
    assert check.sampled(small, 300, seed=1).status is Status.UNKNOWN
    result = check.hypothesis_search(small, max_examples=40, seed=1)
    assert result.status is Status.UNKNOWN
    assert (result.checked, result.failures) == (40, 0)


def test_a_sampled_run_counts_and_keeps_what_a_plain_loop_finds(small):
    network = broken(small)
    inputs = network.task.random_tokens(np.random.default_rng(5), 300)  # one batch: the run's own draw
    failing, _ = reference_failing(network, inputs, FLOAT64)
    wrong = [[int(t) for t in tokens] for tokens, bad in zip(inputs, failing) if bad]
    assert 0 < len(wrong) < 300
    verdict = check.sampled(network, 300, seed=5)
    kept = check.sampled(network, 300, seed=5, max_failures=300)
    assert (verdict.status, verdict.checked, verdict.failures, verdict.detail) == (Status.FALSIFIED, 300, len(wrong),
                                                                                   {"seed": 5})
    assert verdict.counterexample.tokens == wrong[0] and verdict.kept == ()
    assert [failure.tokens for failure in kept.kept] == wrong
    assert (kept.checked, kept.failures, kept.counterexample) == (verdict.checked, verdict.failures,
                                                                  verdict.counterexample)


@pytest.mark.parametrize("count, seed", [(0, 1), (10, -1), (2.5, 1)])
def test_sampling_refuses_a_bad_count_or_seed(small, count, seed):
    with pytest.raises(ParameterError, match="count" if seed == 1 else "seed"):
        check.sampled(small, count, seed)


def test_hypothesis_search_finds_a_replayable_minimal_failure(small):
    network = broken(small)
    result = check.hypothesis_search(network, max_examples=200, seed=3, max_failures=1)
    assert result.status is Status.FALSIFIED and result.method == "hypothesis"
    assert replays(network, result.counterexample, FLOAT64)
    assert [failure.tokens for failure in result.kept] == [result.counterexample.tokens]
    # Shrunk: lowering any single token to the smallest id its position allows makes the failure go away.
    tokens = np.array(result.counterexample.tokens)
    for position, alphabet in enumerate(composition_alphabets(2, (2,), "paper")):
        if tokens[position] != alphabet.start:
            lowered = tokens.copy()
            lowered[position] = alphabet.start
            assert network.run(lowered) == composition_answer_from_tokens(2, (2,), lowered)


def test_hypothesis_search_is_reproducible_from_its_seed(small):
    network = broken(small, value=0.5)
    first, second = (check.hypothesis_search(network, max_examples=100, seed=7) for _ in range(2))
    assert first.as_dict() == second.as_dict() and first.kept == ()


def test_hypothesis_search_rejects_a_nonpositive_budget(small):
    with pytest.raises(ParameterError, match="max_examples"):
        check.hypothesis_search(small, max_examples=0)


def test_nan_logits_are_a_failure_not_an_accidental_argmax():
    logits = np.array([[np.nan, 1.0, 0.0], [0.0, 2.0, 1.0], [1.0, 1.0, 0.0]])
    assert unique_argmax(logits).tolist() == [-1, 1, -1]


# -- witness verify ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def saved(tmp_path_factory, small):
    folder = tmp_path_factory.mktemp("verify")
    good, bad = folder / "good.npz", folder / "bad.npz"
    small.save(good)
    broken(small).save(bad)
    return good, bad


def cli_json(capsys, argv: list[str]) -> tuple[int, dict]:
    code = main(argv + ["--json"])
    out, err = capsys.readouterr()
    assert err == ""
    return code, json.loads(out)


def test_cli_verify_exhaustive(capsys, saved):
    good, bad = saved
    code, payload = cli_json(capsys, ["verify", str(good), "--format", "fp16", "--semantics", "strict",
                                      "--exhaustive"])
    assert code == 0
    assert {k: payload[k] for k in ("status", "format", "semantics", "p", "method", "checked", "failures")} == {
        "status": "verified", "format": "fp16", "semantics": "strict", "p": 16, "method": "exhaustive",
        "checked": 4096, "failures": 0}
    assert payload["counterexample"] is None and payload["detail"] == {}

    code, payload = cli_json(capsys, ["verify", str(bad), "--format", "float:3,4", "--semantics", "theory",
                                      "--exhaustive"])
    assert code == 1 and payload["status"] == "falsified" and payload["p"] == 8
    assert set(payload["detail"]) == {"rests_on"}
    counterexample = payload["counterexample"]
    assert set(counterexample) == {"tokens", "expected", "output", "trace"}
    assert counterexample["expected"] == composition_answer_from_tokens(2, (2,), counterexample["tokens"])
    assert counterexample["output"] != counterexample["expected"]
    assert "blocks.2.hook_resid_post" in counterexample["trace"]


def test_cli_verify_samples_and_hypothesis(capsys, saved):
    good, bad = saved
    code, payload = cli_json(capsys, ["verify", str(good), "--format", "bf16", "--semantics", "theory",
                                      "--samples", "50", "--seed", "3"])
    assert (code, payload["status"], payload["method"], payload["checked"]) == (0, "unknown", "sampled", 50)
    assert payload["detail"]["seed"] == 3
    code, payload = cli_json(capsys, ["verify", str(bad), "--format", "fp16", "--semantics", "strict",
                                      "--hypothesis", "--max-examples", "60", "--seed", "2"])
    assert (code, payload["status"], payload["method"]) == (1, "falsified", "hypothesis")
    assert payload["detail"] == {"seed": 2, "max_examples": 60}
    assert payload["counterexample"]["expected"] == composition_answer_from_tokens(
        2, (2,), payload["counterexample"]["tokens"])


def test_cli_verify_text_names_the_counterexample(capsys, saved):
    _, bad = saved
    assert main(["verify", str(bad), "--format", "fp16", "--semantics", "theory", "--exhaustive"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("falsified") and "counterexample: tokens" in out


@pytest.mark.parametrize("argv, message", [
    (["--format", "fp16", "--semantics", "strict"], "one of the arguments"),
    (["--format", "fp16", "--semantics", "strict", "--exhaustive", "--samples", "3"], "not allowed with"),
    (["--format", "fp9", "--semantics", "strict", "--exhaustive"], "format"),
    (["--format", "fp16", "--semantics", "lax", "--exhaustive"], "semantics"),
    (["--format", "fp16", "--semantics", "strict", "--samples", "0"], "--samples"),
    (["--format", "fp16", "--semantics", "strict", "--exhaustive", "--max-examples", "5"], "--max-examples"),
])
def test_cli_verify_bad_input_is_one_line_and_exit_2(capsys, saved, argv, message):
    good, _ = saved
    assert main(["verify", str(good)] + argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and message in err
