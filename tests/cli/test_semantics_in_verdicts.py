"""Every verdict carries its semantics with what it means (docs/formats.md#semantics): the text names it as
"theory: exact inside blocks, ...", the JSON has `semantics_meaning` beside `semantics`. A `verified` under theory
is about exact arithmetic inside blocks; printed without that, it reads as a claim about hardware."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import witness
from cli.main import main
from witness.arith.semantics import MEANINGS, SEMANTICS, semantics_text


@pytest.fixture(scope="module")
def net(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("verdicts") / "net.npz"
    witness.compile("composition", L=1, m=3).save(path)
    return path


def test_every_semantics_has_one_meaning_and_they_differ():
    assert set(MEANINGS) == set(SEMANTICS)
    assert len(set(MEANINGS.values())) == len(SEMANTICS)
    assert semantics_text("theory").startswith("theory: exact inside blocks")


def said(capsys, argv: list[str], semantics: str, code: int = 0) -> None:
    """`witness ARGV` names `semantics` with its meaning, and no other semantics, in its text and its JSON."""
    assert main(argv) == code
    text = capsys.readouterr().out
    assert semantics_text(semantics) in text, text
    assert not [other for other in MEANINGS.values() if other != MEANINGS[semantics] and other in text], text
    assert main([*argv, "--json"]) == code
    payload = json.loads(capsys.readouterr().out)
    assert (payload["semantics"], payload["semantics_meaning"]) == (semantics, MEANINGS[semantics])


@pytest.mark.parametrize("semantics", SEMANTICS)
def test_verify_and_run_say_their_semantics(capsys, net, semantics):
    said(capsys, ["verify", str(net), "--format", "fp16", "--semantics", semantics, "--exhaustive"], semantics)
    said(capsys, ["run", str(net), "--random", "5", "--format", "fp16", "--semantics", semantics], semantics)


@pytest.mark.parametrize("semantics", ["strict", "theory"])
def test_certify_and_check_certificate_say_their_semantics(capsys, net, tmp_path, semantics):
    certificate = tmp_path / "cert.json"
    said(capsys, ["certify", str(net), "--format", "fp16", "--semantics", semantics, "--out", str(certificate)],
         semantics)
    said(capsys, ["check-certificate", str(certificate), str(net)], semantics)


def test_an_unknown_certify_says_its_semantics(capsys, net):
    said(capsys, ["certify", str(net), "--format", "float:1,2", "--semantics", "theory"], "theory", code=3)


def test_min_precision_says_its_semantics(capsys):
    said(capsys, ["min-precision", "composition", "--L", "1", "--m", "3", "--family", "float", "--semantics",
                  "strict", "--method", "exhaustive", "--max-bits", "6"], "strict")


def test_search_says_its_semantics(capsys):
    pytest.importorskip("torch")
    said(capsys, ["search", "full", "--H", "1", "--d-head", "2", "--d-model", "4", "--L", "1", "--m", "2",
                  "--layers", "1", "--semantics", "mixed", "--samples", "20", "--quiet"], "mixed", code=1)


def test_a_theory_run_says_what_it_rests_on(capsys, net):
    """Running under theory uses float64 inside each block in place of exact arithmetic: the run says so, in text
    and JSON, as `verify` does; strict runs are what they say and carry no such line."""
    assert main(["run", str(net), "--random", "5", "--format", "fp16", "--semantics", "theory", "--json"]) == 0
    assert "float64" in json.loads(capsys.readouterr().out)["rests_on"]
    assert main(["run", str(net), "--random", "5", "--format", "fp16", "--semantics", "theory"]) == 0
    assert "rests on: float64" in capsys.readouterr().out
    assert main(["run", str(net), "--random", "5", "--format", "fp16", "--semantics", "strict", "--json"]) == 0
    assert "rests_on" not in json.loads(capsys.readouterr().out)
