"""`--format` and `--semantics` on `witness run` and `--format` on `witness inspect`."""

import json

import pytest

import witness
from cli.main import main


@pytest.fixture(scope="module")
def network_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "composition.npz"
    witness.compile("composition", L=2, m=2, n=[2]).save(path)
    return str(path)


def single_json(capsys):
    return json.loads(capsys.readouterr().out)


def test_run_random_under_a_format_and_semantics(network_file, capsys):
    assert main(["run", network_file, "--random", "40", "--format", "fp16", "--semantics", "strict", "--json"]) == 0
    payload = single_json(capsys)
    assert (payload["correct"], payload["total"]) == (40, 40)
    assert (payload["format"], payload["semantics"], payload["p"]) == ("fp16", "strict", 16)
    assert main(["run", network_file, "--random", "5", "--format", "float:3,4", "--semantics", "theory"]) == 0
    assert capsys.readouterr().out.startswith("5/5 random inputs correct (seed 0, float:3,4 theory: exact inside blocks")


def test_run_defaults_to_the_claimed_format_under_strict(network_file, capsys):
    assert main(["run", network_file, "--random", "3", "--json"]) == 0
    payload = single_json(capsys)
    assert (payload["format"], payload["semantics"], payload["p"]) == ("fp64", "strict", 64)


def test_run_tokens_under_a_format(network_file, capsys):
    # L = 2, m = 2, n = (2,): [z_2 table (4)] [z_1 table (2)] [z_0] [w]; z_1 = identity, z_0 = 1, w_1 = 1:
    # i_1 = z_1(1) = 1, i_2 = z_2(1 * 2 + 1) = z_2(3) = 0.
    tokens = "3,2,1,0,0,1,1,5"
    assert main(["run", network_file, "--tokens", tokens, "--format", "float:3,4", "--json"]) == 0
    assert single_json(capsys) == {"output": 0}


def test_inspect_reports_p_of_the_format(network_file, capsys):
    assert main(["inspect", network_file, "--format", "bf16", "--json"]) == 0
    payload = single_json(capsys)
    assert (payload["format"], payload["p"]) == ("bf16", 16)
    assert payload["Hdp"] == payload["H"] * payload["d"] * 16
    assert main(["inspect", network_file, "--json"]) == 0
    assert single_json(capsys)["p"] == 64


@pytest.mark.parametrize("options", [["--format", "fp8"], ["--semantics", "fast"], ["--format", "exact"],
                                     ["--format", "fp64", "--semantics", "mixed"], ["--format", "float:30,8"]])
def test_bad_arithmetic_options_are_one_line_and_exit_2(network_file, capsys, options):
    assert main(["run", network_file, "--random", "3", *options]) == 2
    err = capsys.readouterr().err
    assert err.startswith("witness: error: ") and err.count("\n") == 1


def test_fixed_overflow_is_reported_not_a_traceback(network_file, capsys):
    assert main(["run", network_file, "--tokens", "3,2,1,0,0,1,1,5", "--format", "fixed:1,4"]) == 2
    assert "fixed:1,4 overflow in" in capsys.readouterr().err
