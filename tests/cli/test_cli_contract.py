"""The command line's contract (docs/conventions.md §7), driven by Hypothesis-generated argument lists: every
command exits 0, 1, 2 or 3, never with a traceback or an internal error, and on exit 2 says what is wrong in one
line on stderr (with --json, also one JSON object on stdout)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import witness
from cli.main import main

SIZES = st.sampled_from(["-1", "0", "1", "2", "3", "4", "1000000000000", "x", "2^70"])
FORMATS = st.sampled_from(["fp16", "bf16", "fp32", "float:3,4", "float:1,2", "fixed:4,4", "fixed:2,2", "float:0,0",
                           "fixed:60,60", "int8", ""])
SEMANTICS = st.sampled_from(["strict", "theory", "mixed", "exact", "fuzzy"])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli")
    witness.compile("composition", L=1, m=3).save(folder / "net.npz")
    witness.compile("two_sum", n=4, M=4, t=1).save(folder / "pairs.npz")
    (folder / "text.npz").write_text("not weights\n")
    (folder / "cert.json").write_text("{}")
    (folder / "empty").mkdir()
    return folder


def file_argument(folder):
    return st.sampled_from(["net.npz", "pairs.npz", "text.npz", "missing.npz", "empty", "cert.json"]).map(
        lambda name: str(folder / name))


def argument_lists(folder):
    path = file_argument(folder)

    def option(flag, values):
        return st.one_of(st.just([]), values.map(lambda v: [flag, v]))

    def command(name, *parts):
        return st.tuples(*parts).map(lambda pieces: [name] + [word for piece in pieces for word in piece])

    composition = (option("--L", SIZES), option("--m", SIZES), option("--n", SIZES))
    return st.one_of(
        command("compile", st.sampled_from([["composition"], ["two_sum"], ["nonsense"], []]), *composition,
                option("--M", SIZES), option("--t", SIZES), st.just(["-o", str(folder / "out.npz")])),
        command("run", path.map(lambda p: [p]), option("--tokens", st.sampled_from(["0,1,2,0,0", "1,2", "a", "9" * 30])),
                option("--random", st.sampled_from(["1", "3", "0", "-2"])), option("--seed", SIZES),
                option("--format", FORMATS), option("--semantics", SEMANTICS)),
        command("inspect", path.map(lambda p: [p]), option("--format", FORMATS)),
        command("verify", path.map(lambda p: [p]), st.sampled_from([["--exhaustive"], ["--samples", "3"],
                                                                    ["--hypothesis", "--max-examples", "3"], []]),
                option("--format", FORMATS), option("--semantics", SEMANTICS)),
        command("certify", st.one_of(path.map(lambda p: [p]), st.just(["composition"])), *composition,
                option("--format", FORMATS), option("--semantics", SEMANTICS)),
        command("check-certificate", path.map(lambda p: [p]), st.one_of(st.just([]), path.map(lambda p: [p]))),
        command("min-precision", st.sampled_from([["composition"], ["two_sum"], ["bogus"]]), *composition,
                st.sampled_from([["--family", "float"], ["--family", "fixed"], ["--family", "x"], []]),
                st.sampled_from([["--semantics", "theory"], ["--semantics", "strict"], []]),
                st.just(["--max-bits", "9"])),
        command("bounds", option("--L", SIZES), option("--Hdp", SIZES), option("--n", SIZES),
                st.sampled_from([[], ["--construction", "composition", "--m", "4", "--format", "fp16"]])),
        command("search", st.sampled_from([["hybrid"], ["full"], ["sparse"], ["nope"]]), *composition,
                st.sampled_from([["--H", "1", "--d-head", "2", "--d-model", "4"], ["--H", "0", "--d-head", "2",
                                                                                  "--d-model", "4"],
                                 ["--H", "1", "--d-head", "2", "--d-model", "1000000000000"]]),
                st.sampled_from([["--full-layers", "0", "--linear-per-gap", "1", "--mixer", "linear"],
                                 ["--layers", "1"], ["--block", "2", "--k", "1"], []]),
                st.just(["--samples", "8", "--format", "fp16"])),
        command("train", st.sampled_from([["composition"], ["two_sum"], ["bogus"]]), *composition,
                option("--M", SIZES), st.sampled_from([["--arch", "full", "--layers", "2"], ["--arch", "sparse"],
                                                       ["--arch", "hybrid", "--full-layers", "0",
                                                        "--linear-per-gap", "1", "--mixer", "gla"],
                                                       ["--arch", "full", "--block", "2", "--k", "1"]]),
                st.just(["--H", "1", "--d-head", "2", "--d-model", "4"]),
                st.sampled_from([["--steps", "1"], ["--steps", "0"], ["--steps", "2", "--lr", "-1"],
                                 ["--steps", "2", "--hop-weight", "1"]]),
                st.sampled_from([["-o", str(folder / "trained.npz")], ["-o", str(folder / "empty")]])),
        command("capacity", option("--sizes", SIZES), option("--L", SIZES), st.sampled_from([[], ["--mixers", "x"]]),
                st.just(["--steps", "1", "--seeds", "1", "--eval-inputs", "8", "--out", str(folder / "cap")])),
        command("separation", st.sampled_from([["--L", "0"], ["--L", "4"], ["--L", "x"]]),
                st.just(["--out", str(folder / "sep")])),
        st.lists(st.sampled_from(["--json", "frobnicate", "-x", "compile", "--L"]), max_size=3),
    ).flatmap(lambda argv: st.booleans().map(lambda json_flag: argv + (["--json"] if json_flag else [])))


@pytest.mark.parametrize("chunk", range(3))
def test_every_argument_list_meets_the_contract(files, chunk, capsys):
    @settings(max_examples=40, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(argument_lists(files), st.integers(0, 2))
    def run(argv, shard):
        if shard != chunk:
            return
        code = main(argv)
        out, err = capsys.readouterr()
        assert code in (0, 1, 2, 3), (argv, code, err)
        assert "Traceback" not in err and "internal error" not in err, (argv, err)
        if code == 2:
            assert err.count("\n") == 1 and err.startswith("witness: error: "), (argv, err)
            if "--json" in argv:
                assert json.loads(out.strip().splitlines()[-1])["exit"] == 2, (argv, out)
        elif "--json" in argv:
            json.loads(out)  # exactly one JSON object

    run()


def test_a_closed_pipe_is_one_line_not_a_traceback(files):
    command = f"{sys.executable} -m cli.main inspect {files / 'net.npz'} | head -c 10 > /dev/null"
    done = subprocess.run(["bash", "-c", f"set -o pipefail; {command}; echo $? >&2"], capture_output=True, text=True,
                          timeout=120)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


# The commands a new user reported as tracebacks, hangs or silent wrong answers (issue 13), each run in a child
# process with 4 GiB of address space and the machine's available memory pinned to 1 GiB (less than the 1.3 GB of
# int8 tables the 4,000,000-token composition needs), so that a size guard that lets the work through fails by
# refusal text instead of exhausting the test machine.
REPORTED = [
    (["compile", "composition", "--L", "1", "--m", "1000000000", "-o", "{folder}/big.npz"], "needs about"),
    (["compile", "composition", "--L", "1", "--m", "4000000", "-o", "{folder}/big.npz"], "needs about"),
    (["search", "hybrid", "--L", "1", "--m", "4", "--H", "1", "--d-head", "2", "--d-model", "1000000000",
      "--full-layers", "0", "--linear-per-gap", "1", "--mixer", "linear", "--samples", "4"], "needs about"),
    (["run", "{net}", "--random", "10", "--seed", "-1"], "--seed"),
    (["hierarchy", "--quick", "--out", "{net}"], "not a folder"),
    (["min-precision", "composition", "--L", "3", "--m", "64", "--n", "64", "64", "--method", "exhaustive",
      "--family", "float", "--semantics", "strict"], "inputs"),
    (["bounds", "--L", "1000000000000", "--Hdp", "3"], "smaller L"),
    (["bounds", "--L", "256", "--Hdp", "3"], "smaller L"),
]

PINNED = ("import sys, witness.resources as r; r.available_bytes = lambda: 2**30; from cli.main import main; "
          "sys.exit(main(sys.argv[1:]))")


@pytest.mark.parametrize("argv, names", REPORTED, ids=[" ".join(argv[:3]) for argv, _ in REPORTED])
def test_reported_commands_end_in_one_line_and_exit_2(files, argv, names):
    argv = [word.format(net=files / "net.npz", folder=files) for word in argv]
    done = subprocess.run(["bash", "-c", 'ulimit -v 4194304; exec "$@"', "bash", sys.executable, "-c", PINNED, *argv],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, (argv, done.returncode, done.stderr[-2000:])
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("witness: error: "), done.stderr[-2000:]
    assert names in done.stderr, done.stderr


def test_certify_refuses_a_strict_proof_beyond_the_machine_before_starting(tmp_path):
    # 5,002 tokens: the strict proof holds about 48 n^2 = 1.1 GiB, more than 75% of the pinned 1 GiB
    network = tmp_path / "long.npz"
    subprocess.run([sys.executable, "-m", "cli.main", "compile", "composition", "--L", "1", "--m", "5000", "-o",
                    str(network)], check=True, capture_output=True, timeout=120)
    argv = ["certify", str(network), "--format", "fp32", "--semantics", "strict"]
    done = subprocess.run([sys.executable, "-c", PINNED, *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.count("\n") == 1 and "certifying a 5002-token prompt under strict" in done.stderr
