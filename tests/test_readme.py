"""The README's command lines work as written: every `witness ...` line of its bash blocks, in order, in one
folder (later lines use the files earlier ones write). Lines that name placeholders (DIR, HOST, FILE, A, B, an
elided token list) and the long-running ones listed in LONG are parsed by the real argument parser (every flag
must exist and take its value); all others run and must not exit with 2 (bad input)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from witness.cli import build_parser, main

README = Path(__file__).resolve().parents[1] / "README.md"
PLACEHOLDERS = re.compile(r"\bDIR\b|HOST|my\.json|\.\.\.|--tokens [AB]\b")
#: Commands that take minutes (training, the full hierarchy, searches, L = 2 separation, 2^384-input certificates):
#: parsed here; their results are in the committed docs (docs/hierarchy, docs/training.md, ...).
LONG = ("witness hierarchy", "witness train", "witness capacity", "witness separation --L 2",
        "witness check-certificate sep2", "witness search", "witness certify ts64", "witness certify rich",
        "witness check-certificate ts.json", "witness check-certificate rich.json", "witness min-precision two_sum",
        "witness certify composition --L 3", "witness check-certificate big.json",
        "witness min-precision composition_hybrid", "witness run net.npz --tokens 13,10")


def readme_commands() -> list[str]:
    commands, block = [], None
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            block = [] if line.strip() == "```bash" and block is None else None
            continue
        if block is None:
            continue
        if commands and commands[-1].endswith("\\"):
            commands[-1] = commands[-1][:-1] + " " + line.strip()
        elif line.startswith(("witness ", ".venv/bin/witness ")):
            commands.append(line)
    return [re.sub(r"\s+#.*$", "", command).strip() for command in commands]


def test_the_readme_has_command_lines():
    assert len(readme_commands()) > 40


def test_every_readme_command_line_parses_or_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for command in readme_commands():
        argv = shlex.split(command)[1:]
        if PLACEHOLDERS.search(command) or command.startswith(LONG):
            args, extra = build_parser().parse_known_args(argv)
            assert args.command and (not extra or args.command == "compile"), command
            continue
        code = main(argv)
        assert code != 2, command
