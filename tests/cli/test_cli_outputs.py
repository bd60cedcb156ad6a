"""Bad output paths and endless counts are refused before any work (docs/conventions.md §7): exit 2 and one line
on stderr naming the option and the path (or the count). "Before any work" is checked by what did not happen: no
output file appears, and the function that does the work is replaced by one that fails the test if it is called.
Unwritable places are under /proc, which refuses new files even to root."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import witness
from cli.common import CliError, check_output_file, check_output_folder
from cli.main import main


@pytest.fixture(scope="module")
def net(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("outputs") / "net.npz"
    witness.compile("composition", L=1, m=3).save(path)
    return path


def must_not_run(*args, **kwargs):
    raise AssertionError("the work ran before the output path was checked")


def refused(capsys, argv: list[str], *names: str) -> str:
    """Run `witness ARGV`: exit 2, exactly one line on stderr, naming every one of `names`."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, (argv, code, err)
    assert err.count("\n") == 1 and err.startswith("witness: error: "), err
    assert "internal error" not in err, err
    for name in names:
        assert name in err, (name, err)
    return err


def test_compile_to_a_folder_is_called_a_folder(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr("cli.networks.compile", must_not_run)
    err = refused(capsys, ["compile", "composition", "--L", "1", "--m", "4", "-o", str(tmp_path)], "-o",
                  str(tmp_path), "is a folder")
    assert list(tmp_path.iterdir()) == [], err


@pytest.mark.parametrize("where, says", [("missing/x.npz", "does not exist"), ("file/x.npz", "is not a folder"),
                                         ("/proc/witness-nope.npz", "/proc")])
def test_compile_to_a_place_it_cannot_write(capsys, tmp_path, monkeypatch, where, says):
    (tmp_path / "file").write_text("a file, not a folder")
    monkeypatch.setattr("cli.networks.compile", must_not_run)
    path = where if where.startswith("/") else str(tmp_path / where)
    refused(capsys, ["compile", "composition", "--L", "1", "--m", "4", "-o", path], "-o", path, says)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


@pytest.mark.parametrize("out", ["{folder}", "/proc/witness-nope.json", "{folder}/missing/c.json"])
def test_certify_checks_its_out_before_proving(capsys, tmp_path, monkeypatch, net, out):
    monkeypatch.setattr("verify.certify.certify", must_not_run)
    out = out.format(folder=tmp_path)
    refused(capsys, ["certify", str(net), "--out", out], "--out", out)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("option", ["--plot", "--graph"])
def test_inspect_images_to_a_folder_or_an_unknown_suffix(capsys, tmp_path, monkeypatch, net, option):
    monkeypatch.setattr("cli.networks.load", must_not_run)
    refused(capsys, ["inspect", str(net), option, str(tmp_path)], option, str(tmp_path), "is a folder")
    refused(capsys, ["inspect", str(net), option, "/proc/witness-nope.png"], option, "/proc/witness-nope.png")
    pytest.importorskip("matplotlib")
    text = str(tmp_path / "picture.txt")
    refused(capsys, ["inspect", str(net), option, text], option, text, ".png")
    assert list(tmp_path.iterdir()) == []


def test_train_checks_its_output_before_training(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr("cli.training.task_from_args", must_not_run)
    base = ["train", "composition", "--L", "1", "--m", "3", "--arch", "full", "--layers", "1", "--H", "1",
            "--d-head", "2", "--d-model", "8", "--steps", "1", "-o"]
    refused(capsys, base + [str(tmp_path)], "-o", str(tmp_path), "is a folder")
    refused(capsys, base + ["/proc/witness-nope.npz"], "-o", "/proc/witness-nope.npz")


def test_search_checks_save_network_before_searching(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr("verify.search.sparse.search_sparse", must_not_run)
    refused(capsys, ["search", "sparse", "--n", "4", "--M", "4", "--block", "2", "--k", "1", "--H", "1", "--d-head",
                     "2", "--d-model", "8", "--save-network", str(tmp_path)], "--save-network", str(tmp_path),
            "is a folder")


@pytest.mark.parametrize("out, says", [("/proc/witness-nope", "/proc"), ("/proc/witness-nope/deep/x", "/proc"),
                                       ("{folder}/file", "not a folder"), ("{folder}/file/sub", "not a folder")])
def test_separation_checks_its_folder_before_computing(capsys, tmp_path, monkeypatch, out, says):
    monkeypatch.setattr("experiments.separation.separation", must_not_run)
    (tmp_path / "file").write_text("a file")
    out = out.format(folder=tmp_path)
    refused(capsys, ["separation", "--L", "1", "--out", out], "--out", out, says)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


@pytest.mark.parametrize("out, says", [("/proc/witness-nope/x", "/proc"), ("{folder}/file", "not a folder")])
def test_capacity_checks_its_folder_before_training(capsys, tmp_path, monkeypatch, out, says):
    pytest.importorskip("torch")
    monkeypatch.setattr("experiments.capacity.capacity", must_not_run)
    (tmp_path / "file").write_text("a file")
    out = out.format(folder=tmp_path)
    refused(capsys, ["capacity", "--sizes", "8", "--out", out], "--out", out, says)


def test_check_certificate_names_a_folder_as_a_folder(capsys, tmp_path, net):
    certificate = tmp_path / "cert.json"
    assert main(["certify", str(net), "--out", str(certificate)]) == 0
    capsys.readouterr()
    refused(capsys, ["check-certificate", str(certificate), str(tmp_path)], str(tmp_path), "is a folder",
            "weights file")
    refused(capsys, ["check-certificate", str(tmp_path), str(net)], str(tmp_path), "is a folder", "certificate")
    refused(capsys, ["check-certificate", str(tmp_path / "missing.json")], "missing.json", "no such file")


@pytest.mark.parametrize("argv, option", [(["run", "{net}", "--random", "10000000000000"], "--random"),
                                          (["verify", "{net}", "--samples", "10000000000000"], "--samples"),
                                          (["verify", "{net}", "--hypothesis", "--max-examples", "10000000000000"],
                                           "--max-examples")])
def test_counts_that_would_run_for_years_are_refused_with_the_estimate(capsys, monkeypatch, net, argv, option):
    """10^13 inputs: years even at a million inputs a second; the line gives the estimate and how many fit."""
    monkeypatch.setattr("verify.check.sampled", must_not_run)
    monkeypatch.setattr("verify.check.hypothesis_search", must_not_run)
    err = refused(capsys, [word.format(net=net) for word in argv], f"{option} 10000000000000", "inputs/s",
                  "give a smaller count")
    assert " years " in err or " days " in err, err


def test_a_count_that_fits_still_runs(capsys, net):
    assert main(["run", str(net), "--random", "200000"]) == 0
    assert capsys.readouterr().out.startswith("200000/200000")


def test_exact_integers_beyond_pythons_default_digit_limit_are_printed(capsys):
    """str() of an int above 4,300 digits raises by default; `bounds` prints the construction's m = 2^20000 whole."""
    assert main(["bounds", "--L", "1", "--construction", "composition", "--m", "2^20000", "--format", "fp16",
                 "--json"]) == 0
    out = capsys.readouterr().out
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        assert str(2 ** 20000) in out
    finally:
        sys.set_int_max_str_digits(limit)
    assert sys.get_int_max_str_digits() == limit  # main() put the limit back


def test_the_helpers(tmp_path):
    check_output_folder(tmp_path, "--out")  # an existing, writable folder
    check_output_folder(tmp_path / "new" / "deeper", "--out")  # created by the command, not by the check
    assert list(tmp_path.iterdir()) == []
    check_output_file(tmp_path / "x.npz", "-o")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "file").write_text("x")
    check_output_file(tmp_path / "file", "-o")  # an existing file is replaced
    for check, path, says in [(check_output_folder, tmp_path / "file", "not a folder"),
                              (check_output_folder, Path("/proc/witness-nope"), "cannot create"),
                              (check_output_file, tmp_path, "is a folder"),
                              (check_output_file, tmp_path / "no" / "x.npz", "does not exist"),
                              (check_output_file, Path("/proc/witness-nope.npz"), "cannot write"),
                              (check_output_file, Path("bad\0name"), "cannot use this path")]:
        with pytest.raises(CliError, match=says):
            check(path, "--opt")


# Argument mistakes that reached the command line's "internal error" branch (a traceback's one-line stand-in).
INTERNAL_BEFORE = [
    (["train", "composition", "--L", "1", "--m", "3", "--arch", "full", "--layers", "1", "--H", "1", "--d-head", "2",
      "--d-model", "8", "--steps", "1", "--seed", "99999999999999999999999", "-o", "{folder}/t.npz"], "below 2^64"),
    (["train", "composition", "--L", "1", "--m", "3", "--arch", "full", "--layers", "1", "--H", "1", "--d-head", "2",
      "--d-model", "8", "--steps", "1", "--seed", "-1", "-o", "{folder}/t.npz"], "seed must be >= 0"),
    (["search", "full", "--H", "1", "--d-head", "1", "--d-model", "4", "--L", "1", "--m", "2", "--layers", "1",
      "--weights", "trained", "--seed", "99999999999999999999999"], "below 2^64"),
    (["capacity", "--sizes", "8", "--seeds", "99999999999999999999", "--out", "{folder}/c"], "--seeds"),
    (["capacity", "--sizes", "8", "--workers", "100000", "--out", "{folder}/c"], "--workers"),
]


@pytest.mark.parametrize("argv, says", INTERNAL_BEFORE, ids=[" ".join(argv[:2] + argv[-4:-2]) for argv, _ in
                                                               INTERNAL_BEFORE])
def test_argument_mistakes_that_were_internal_errors(capsys, tmp_path, argv, says):
    pytest.importorskip("torch")
    refused(capsys, [word.format(folder=tmp_path) for word in argv], says)
    assert list(tmp_path.iterdir()) == []
