"""The run-based checkers (exhaustive, sampled, Hypothesis search), the min-precision search and `witness verify` /
`witness min-precision`.

Expected answers come from tests/reference_tasks.py (a literal reading of conventions §1.1), never from the task code the
checkers use; expected precisions come from running the checkers on every split by hand.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import witness
from tests.oracles.reference_tasks import all_composition_inputs, composition_alphabets, composition_answer_from_tokens
from verify import check, precision
from verify.search import probes
from verify.result import Result, Status
from witness.arith.formats import Fixed, Float, parse_format
from witness.arith.semantics import arithmetic
from cli.main import main
from witness.errors import ParameterError
from witness.execute import run, unique_argmax
from lab.sweep import Engine


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


# -- the checkers on float64 ------------------------------------------------------------------------------------
def test_exhaustive_verifies_the_construction_and_counts_every_input(small):
    result = check.exhaustive(small)
    assert result.status is Status.VERIFIED
    assert (result.checked, result.failures) == (4096, 0)


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
    assert replays(network, result.counterexample, check.FLOAT64)
    assert set(result.counterexample.trace) == {f"blocks.{l}.hook_{where}" for l in range(3)
                                                for where in ("resid_mid", "resid_post")}


def test_sampled_and_hypothesis_never_say_verified(small):
    assert check.sampled(small, 300, seed=1).status is Status.UNKNOWN
    result = check.hypothesis_search(small, max_examples=40, seed=1)
    assert result.status is Status.UNKNOWN
    assert (result.checked, result.failures) == (40, 0)


def test_hypothesis_search_finds_a_replayable_minimal_failure(small):
    network = broken(small)
    result = check.hypothesis_search(network, max_examples=200, seed=3)
    assert result.status is Status.FALSIFIED and result.method == "hypothesis"
    assert replays(network, result.counterexample, check.FLOAT64)
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
    assert first.as_dict() == second.as_dict()


def test_hypothesis_search_rejects_a_nonpositive_budget(small):
    with pytest.raises(ParameterError, match="max_examples"):
        check.hypothesis_search(small, max_examples=0)


def test_nan_logits_are_a_failure_not_an_accidental_argmax():
    logits = np.array([[np.nan, 1.0, 0.0], [0.0, 2.0, 1.0], [1.0, 1.0, 0.0]])
    assert unique_argmax(logits).tolist() == [-1, 1, -1]


# -- the min-precision search on checkers whose answer is known in advance ---------------------------------------
def threshold_checker(needed: dict[int, int | None]):
    """Verifies Float(M, E) iff M >= needed[E] (None: never). A stand-in for a real checker, monotone in M."""
    def checker(fmt, semantics) -> Result:
        need = needed.get(fmt.exponent)
        ok = need is not None and fmt.mantissa >= need
        return Result(Status.VERIFIED if ok else Status.FALSIFIED, "synthetic", {}, 1, 0 if ok else 1)
    return checker


def brute_force_minimum(needed: dict[int, int | None]) -> tuple[int, int] | None:
    """(exponent, mantissa) with the smallest p = 1 + E + M among all verified splits, fewest exponent bits first."""
    splits = [(1 + E + M, E, M) for E in range(2, 12) for M in range(1, 53)
              if needed.get(E) is not None and M >= needed[E]]
    return min(splits)[1:] if splits else None


@pytest.mark.parametrize("needed", [
    {2: 40, 3: 10, 4: 8, 5: 7},  # p = 13 is reached by (4, 8) and (5, 7): the tie goes to fewer exponent bits
    {E: max(1, 20 - 3 * E) for E in range(2, 12)},
    {6: 1},
    {},
])
def test_min_precision_agrees_with_brute_force_on_monotone_checkers(needed):
    result = precision.min_precision(threshold_checker(needed), "float", "theory")
    expected = brute_force_minimum(needed)
    if expected is None:
        assert result.status is Status.UNKNOWN and result.p is None
        return
    E, M = expected
    assert result.status is Status.VERIFIED
    assert (result.split, result.p, result.format) == ({"exponent": E, "mantissa": M}, 1 + E + M, Float(M, E).name)
    assert {trial.format for trial in result.below} == {Float(1 + E + M - 2 - e, e).name for e in range(2, 12)
                                                        if 1 <= 1 + E + M - 2 - e <= 52}
    assert all(trial.status != "verified" and trial.p == result.p - 1 for trial in result.below)
    assert result.unrunnable == ()


def test_min_precision_skips_and_lists_the_formats_a_semantics_cannot_run():
    # strict runs float formats with exponent <= 9 and mantissa <= 24 only (witness.arith.semantics)
    result = precision.min_precision(threshold_checker({2: 40, 3: 10, 4: 8, 5: 7}), "float", "strict")
    assert (result.p, result.format) == (13, "float:8,4")
    assert result.unrunnable == ("float:1,10",)
    assert all(parse_format(trial.format).mantissa <= 24 for trial in result.trials)


def test_min_precision_checks_every_split_one_bit_below_instead_of_trusting_monotonicity():
    # Exponent 2 is not monotone in the mantissa: M = 7 verifies, 8..29 do not, 30.. do. Bisection on exponent 2
    # lands on 30; exponent 3 then gives p = 11; the scan of every 10-bit split finds (7, 2).
    def checker(fmt, semantics) -> Result:
        ok = (fmt.exponent == 2 and (fmt.mantissa == 7 or fmt.mantissa >= 30)) or (fmt.exponent == 3
                                                                                   and fmt.mantissa >= 7)
        return Result(Status.VERIFIED if ok else Status.UNKNOWN, "synthetic", {}, 0, 0)

    result = precision.min_precision(checker, "float", "strict")
    assert (result.p, result.split) == (10, {"exponent": 2, "mantissa": 7})
    assert len(result.below) == 6 and all(trial.status == "unknown" for trial in result.below)


def test_min_precision_fixed_splits_integer_and_fraction():
    def checker(fmt, semantics) -> Result:
        if fmt.integer < 3:
            raise witness.OverflowInFormat(f"{fmt.name} overflow in add at index (0,)")
        ok = fmt.fraction >= 4
        return Result(Status.VERIFIED if ok else Status.FALSIFIED, "synthetic", {}, 1, 0 if ok else 1)

    result = precision.min_precision(checker, "fixed", "theory")
    assert (result.p, result.split, result.format) == (8, {"integer": 3, "fraction": 4}, "fixed:3,4")
    assert [trial.format for trial in result.below] == [f"fixed:{i},{6 - i}" for i in range(7)]
    assert [trial.note.startswith("overflow") for trial in result.below] == [True] * 3 + [False] * 4
    assert result.as_dict()["integer"] == 3 and result.as_dict()["status"] == "verified"


def test_a_min_precision_table_has_a_row_per_case_in_order_wherever_it_ran():
    needs = [{2: 40, 3: 10, 4: 8, 5: 7}, {}, {6: 1}]
    cases = [precision.Case(threshold_checker(needed), "float", "theory") for needed in needs]
    here, on_a_sweep = precision.table(cases), precision.table(cases, Engine())
    expected = [brute_force_minimum(needed) for needed in needs]
    assert [row.result.p for row in here] == [None if split is None else 1 + sum(split) for split in expected]
    assert [row.result for row in on_a_sweep] == [row.result for row in here]
    assert all(row.seconds >= 0 for row in here)
    assert [precision.cell(row.result) for row in here] + [precision.cell(None)] == \
        ["13 (float:8,4)", "unknown", "8 (float:1,6)", ""]


def test_slope_is_the_least_squares_growth_of_p():
    assert precision.slope([(1, 3), (2, 5), (3, 7)]) == pytest.approx(2.0)  # an exact line: p = 2 log2 n + 1
    assert precision.slope([(4, 9)]) is None


# -- witness verify / witness min-precision ---------------------------------------------------------------------
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
    assert payload["counterexample"] is None

    code, payload = cli_json(capsys, ["verify", str(bad), "--format", "float:3,4", "--semantics", "theory",
                                      "--exhaustive"])
    assert code == 1 and payload["status"] == "falsified" and payload["p"] == 8
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
    code, payload = cli_json(capsys, ["verify", str(bad), "--format", "fp16", "--semantics", "strict",
                                      "--hypothesis", "--max-examples", "60", "--seed", "2"])
    assert (code, payload["status"], payload["method"]) == (1, "falsified", "hypothesis")
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


def test_cli_min_precision_exhaustive_matches_a_hand_search(capsys):
    code, payload = cli_json(capsys, ["min-precision", "composition", "--L", "1", "--m", "3", "--family", "fixed",
                                      "--semantics", "strict", "--method", "exhaustive"])
    assert code == 0 and payload["status"] == "verified"
    # By hand: every fixed split of p bits, for p = 2, 3, ...; the first p with a verified split is p*.
    network = witness.compile("composition", L=1, m=3)
    first = None
    for p in range(2, 12):
        verified = [i for i in range(p) if check.exhaustive(
            network, arithmetic(Fixed(i, p - 1 - i), "strict")).status is Status.VERIFIED]
        if verified:
            first = (p, verified[0])
            break
    assert (payload["p"], payload["integer"], payload["fraction"]) == (first[0], first[1], first[0] - 1 - first[1])
    assert [entry["format"] for entry in payload["below"]] == [f"fixed:{i},{first[0] - 2 - i}"
                                                              for i in range(first[0] - 1)]
    assert all(entry["status"] == "falsified" for entry in payload["below"])


def test_cli_min_precision_bad_input(capsys):
    assert main(["min-precision", "composition", "--L", "1", "--m", "3", "--family", "posit",
                 "--semantics", "strict"]) == 2
    assert "family" in capsys.readouterr().err
    assert main(["min-precision", "two_sum", "--L", "1", "--m", "3", "--family", "float",
                 "--semantics", "strict"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the smallest formats overflow to inf/NaN, as they should
@pytest.mark.parametrize("family, semantics", [("float", "strict"), ("fixed", "strict"), ("float", "theory")])
def test_min_precision_by_certify_is_sound_against_exhaustive(family, semantics):
    network = witness.compile("composition", L=1, m=3)
    found = precision.min_precision(precision.network_checker(network, "certify"), family, semantics, max_bits=24)
    assert found.status is Status.VERIFIED
    fmt = parse_format(found.format)
    assert check.exhaustive(network, arithmetic(fmt, semantics)).status is Status.VERIFIED
    by_exhaustive = precision.min_precision(precision.network_checker(network, "exhaustive"), family, semantics,
                                            max_bits=24)
    assert by_exhaustive.p <= found.p  # certify may need more bits than the truth, never fewer


#: fixed:4,4 holds [-16, 15.9375]; the composition construction at L = 1, m = 3 verifies in it.
FIXED_4_4 = arithmetic("fixed:4,4", "strict")


def overflowing_on_token_2():
    """L = 1, m = 3 with token 2's embedding given 15 on the `one` direction, which the position table sets to 1
    everywhere: the embedding sum 16 overflows fixed:4,4 exactly on inputs containing token 2."""
    network = witness.compile("composition", L=1, m=3)
    W_E = np.array(network.state_dict()["embed.W_E"], dtype=np.float64)
    W_E[2, network.basis.labels.index("one")] = 15.0
    return network.with_arrays({"embed.W_E": W_E})


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


# -- one run, two readings: the verdict and the search record --------------------------------------------------
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


def test_the_verdict_and_the_search_record_of_a_sampled_run_count_the_same_inputs(small):
    network = broken(small)
    inputs = network.task.random_tokens(np.random.default_rng(5), 300)  # one batch: the run's own draw
    failing, _ = reference_failing(network, inputs, check.FLOAT64)
    wrong = [[int(t) for t in tokens] for tokens, bad in zip(inputs, failing) if bad]
    assert 0 < len(wrong) < 300
    verdict = check.sampled(network, 300, seed=5)
    probe = probes.sampled(network, check.FLOAT64, count=300, seed=5, max_failures=300)
    assert (verdict.status, verdict.checked, verdict.failures) == (Status.FALSIFIED, 300, len(wrong))
    assert (probe.searched["inputs"], probe.searched["failing"], probe.searched["seed"]) == (300, len(wrong), 5)
    assert verdict.counterexample.tokens == wrong[0]
    assert [failure.tokens for failure in probe.failures] == wrong


def test_a_verdict_stops_at_the_first_overflow_and_a_search_runs_past_it():
    network = overflowing_on_token_2()
    inputs = [list(tokens) for tokens in all_composition_inputs(3, ())]  # the enumeration order
    failing, overflowing = reference_failing(network, inputs, FIXED_4_4)
    stop = overflowing.index(True)
    assert 0 < stop and sum(failing[stop + 1:]) > 0 and not all(failing)
    verdict = check.exhaustive(network, FIXED_4_4)
    assert (verdict.status, verdict.checked, verdict.failures) == (Status.FALSIFIED, stop + 1, sum(failing[:stop + 1]))
    probe = probes.exhaustive(network, FIXED_4_4, max_failures=4)
    assert (probe.searched["inputs"], probe.searched["failing"]) == (len(inputs), sum(failing))
    kept = [tokens for tokens, bad in zip(inputs, failing) if bad][:4]
    assert [failure.tokens for failure in probe.failures] == kept
    # an overflowing input answers nothing: the confirmed failure says so with output None
    assert all((failure.output is None) == (2 in failure.tokens) for failure in probe.failures)


def test_a_probe_that_keeps_no_failure_still_counts_every_one(small):
    probe = probes.exhaustive(broken(small), check.FLOAT64, max_failures=0)
    assert probe.failures == () and probe.searched["failing"] == check.exhaustive(broken(small)).failures > 0
    with pytest.raises(ParameterError, match="max_failures"):
        probes.exhaustive(small, check.FLOAT64, max_failures=-1)


@pytest.mark.parametrize("count, seed", [(0, 1), (10, -1), (2.5, 1)])
def test_sampling_refuses_a_bad_count_or_seed(small, count, seed):
    with pytest.raises(ParameterError, match="count" if seed == 1 else "seed"):
        check.sampled(small, count, seed)


@pytest.mark.parametrize("kwargs, message", [({"family": "posit"}, "family"), ({"semantics": "lax"}, "semantics"),
                                             ({"max_bits": 1}, "max_bits")])
def test_min_precision_rejects_bad_arguments(kwargs, message):
    arguments = {"family": "float", "semantics": "strict", "max_bits": 64, **kwargs}
    with pytest.raises(ParameterError, match=message):
        precision.min_precision(threshold_checker({}), **arguments)


def test_cli_min_precision_by_certify_is_confirmed_by_exhaustive(capsys):
    code, payload = cli_json(capsys, ["min-precision", "composition", "--L", "2", "--m", "2", "--n", "2",
                                      "--family", "float", "--semantics", "theory"])
    assert (code, payload["status"], payload["method"]) == (0, "verified", "certify")
    assert payload["p"] == 1 + payload["mantissa"] + payload["exponent"]
    network = witness.compile("composition", L=2, m=2, n=[2])
    arith = arithmetic(Float(payload["mantissa"], payload["exponent"]), "theory")
    assert check.exhaustive(network, arith).status is Status.VERIFIED
    assert payload["below"] and all(entry["status"] != "verified" for entry in payload["below"])


def test_a_counterexample_whose_traced_run_overflows_comes_from_the_plain_run():
    # composition L = 1, m = 2 (4 tokens), d_model 1: position 0 holds 4 and an MLP doubles it, 8, outside fixed:3,2
    # ([-8, 7.75]); the readout reads the last position, which holds 0. The plain run never computes position 0's
    # MLP (docs/conventions.md §3) and answers; the traced run computes it and overflows.
    from witness.ir import MLP, Basis, Embedding, Layer, Meta, Network, Readout
    from witness.mixers import Attention
    from witness.tasks import Composition

    task = Composition(L=1, m=2)
    zero = np.zeros((1, 1, 1))
    positions = np.zeros((task.prompt_length, 1))
    positions[0] = 4.0
    network = Network(Embedding(np.zeros((task.vocab_size, 1)), positions),
                      (Layer(Attention.zeros_bias(zero, zero, zero, zero),
                             MLP(np.array([[2.0]]), np.zeros(1), np.array([[1.0]]), np.zeros(1))),),
                      Readout(np.array([[1.0, -1.0]]), np.array([0.0, 0.25])), Basis(("x[0]",)),
                      Meta(task="composition", params=task.params()))
    arith = arithmetic("fixed:3,2", "strict")
    tokens = task.random_tokens(np.random.default_rng(0), 1)[0]
    with pytest.raises(witness.errors.OverflowInFormat):
        run(network, tokens, arith, trace=True)
    found = check.counterexample_for(network, tokens, arith)
    assert found.output == 1 and found.trace == {}
    assert found.expected == int(task.answers(tokens).reshape(-1)[0])
