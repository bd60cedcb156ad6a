"""Options generated from schemas (cli/options.py): a task registered in `witness.tasks.RECORDS` is accepted by every
command generic over tasks without the command line naming it, with its own options; a construction's options come
from its builder's signature wherever a command takes a construction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from cli.main import build_parser, main
from cli.options import task_from_args
from witness.tasks import RECORDS
from witness.tasks.record import Parameter, TaskRecord

TRAIN_SHAPE = ["--arch", "full", "--layers", "1", "--H", "1", "--d-head", "2", "--d-model", "4", "-o", "x.npz"]


@dataclass(frozen=True)
class Palette:
    """A task the command line has never heard of, with one parameter of every kind."""

    name: ClassVar[str] = "palette"
    width: int
    sizes: tuple[int, ...] = ()
    mode: str = "plain"
    mirrored: bool = False


PALETTE = TaskRecord(
    name="palette", task=Palette, summary="a task registered by this test only",
    parameters=(Parameter("width", "int", "how wide"), Parameter("sizes", "ints", "the sizes", default=()),
                Parameter("mode", "choice", "how", default="plain", choices=("plain", "fancy")),
                Parameter("mirrored", "flag", "mirror it", default=False)),
    tasks_strategy=lambda **bounds: None, tokens_strategy=lambda task, max_batch: None)


@pytest.fixture
def palette(monkeypatch):
    monkeypatch.setitem(RECORDS, PALETTE.name, PALETTE)


def parsed(argv: list[str]):
    args, rest = build_parser().parse_known_args(argv)
    assert rest == [], rest
    return args


def test_a_newly_registered_task_is_trained_with_its_own_options(palette):
    args = parsed(["train", "palette", "--width", "3", "--sizes", "1", "2", "--mode", "fancy", "--mirrored",
                   *TRAIN_SHAPE])
    assert task_from_args(args) == Palette(width=3, sizes=[1, 2], mode="fancy", mirrored=True)
    assert task_from_args(parsed(["train", "palette", "--width", "3", *TRAIN_SHAPE])) == Palette(width=3, sizes=[])


@pytest.mark.parametrize("options, says", [([], "--width"), (["--width", "3", "--mode", "odd"], "--mode"),
                                           (["--width", "3", "--L", "2"], "--L")])
def test_a_new_tasks_mistakes_are_one_line_and_exit_2(palette, capsys, options, says):
    assert main(["train", "palette", *options, *TRAIN_SHAPE]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("witness: error: ") and says in err, err


def test_every_registered_task_is_a_train_task_with_its_records_options():
    parser = build_parser()
    train = parser._subparsers._group_actions[0].choices["train"]
    tasks = train._subparsers._group_actions[0].choices
    assert list(tasks) == list(RECORDS)
    for name, record in RECORDS.items():
        options = {option for action in tasks[name]._actions for option in action.option_strings}
        assert {f"--{parameter.name}" for parameter in record.parameters} <= options, name


def test_each_task_spells_its_own_options(capsys):
    """composition's --n is a list, 2-Sum's one length: each is parsed as its task defines it."""
    composition = parsed(["train", "composition", "--L", "3", "--m", "4", "--n", "2", "4", *TRAIN_SHAPE])
    assert task_from_args(composition).n == (2, 4)
    two_sum = parsed(["train", "two_sum", "--n", "8", "--M", "4", *TRAIN_SHAPE])
    assert (task_from_args(two_sum).n, task_from_args(two_sum).t) == (8, 0)  # t: the record's default
    assert main(["train", "two_sum", "--n", "8", "4", "--M", "4", *TRAIN_SHAPE]) == 2
    assert "unrecognised arguments: 4" in capsys.readouterr().err


@pytest.mark.parametrize("arch, says", [(["--arch", "sparse", "--block", "2", "--k", "1"], "every position"),
                                        (["--arch", "full"], "takes layers"),
                                        (["--arch", "hybrid", "--layers", "1"], "full_layers")])
def test_architectures_that_do_not_fit_are_refused(capsys, tmp_path, arch, says):
    pytest.importorskip("torch")
    argv = ["train", "composition", "--L", "1", "--m", "3", *arch, "--H", "1", "--d-head", "2", "--d-model", "4",
            "-o", str(tmp_path / "x.npz")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err
    assert list(tmp_path.iterdir()) == []


def test_min_precision_takes_any_construction_with_its_builders_options(capsys):
    assert main(["min-precision", "two_sum_sparse", "--n", "4", "--M", "4", "--t", "0", "--block", "2", "--k", "1",
                 "--family", "float", "--semantics", "theory", "--max-bits", "8"]) in (0, 3)
    capsys.readouterr()
    assert main(["min-precision", "two_sum", "--n", "4", "--M", "4", "--family", "float", "--semantics",
                 "theory"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "min-precision two_sum: " in err and "--t" in err, err


def test_min_precision_parses_a_constructions_options_in_one_pass(capsys):
    """The construction's parser is made once it is named: the whole line parses at once (`--m` is the seed range, not
    an abbreviation of --method or --max-bits), and nothing is left over."""
    args = parsed(["min-precision", "composition_hybrid", "--L", "2", "--m", "4", "--n", "4", "--family", "float",
                   "--semantics", "strict", "--method", "exhaustive"])
    assert (args.construction, args.construction_options) == ("composition_hybrid", {"L": 2, "m": 4, "n": [4]})
    assert (args.family, args.method, args.max_bits) == ("float", "exhaustive", 64)
    assert main(["min-precision", "composition", "--L", "1", "--m", "4", "--family", "float", "--semantics",
                 "strict", "--json"]) == 0
    assert '"p": 7' in capsys.readouterr().out
