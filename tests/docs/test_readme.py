"""Every command line of README.md and docs/*.md works as written (scripts/run_docs_commands.py finds them).

Per page, in a fresh folder and in the page's order: the quick `witness` lines run in this process and must exit
with the status their comment says (`exit N`, else 0) and print what it says (`prints ...`); the quick python
blocks run. The long lines (scripts/run_docs_commands.py's LONG, each with its cost) are parsed by the real
argument parser, or, for scripts, checked to exist with the options they are given; install lines are checked
against pyproject.toml and constraints.txt. `.venv/bin/python scripts/run_docs_commands.py --long` runs the long
ones too."""

from __future__ import annotations

import sys

import pytest
from tests import REPO

ROOT = REPO
sys.path.insert(0, str(ROOT / "scripts"))  # the two scripts import each other as a script's neighbours do
import docs_commands as docs  # noqa: E402
import run_docs_commands as runner  # noqa: E402

PAGES = docs.pages()


def test_the_readme_and_the_pages_have_command_lines():
    every = docs.all_commands()
    readme = docs.commands(ROOT / "README.md")
    assert sum(command.kind == "witness" for command in readme) >= 10
    assert sum(command.long is None and command.kind == "witness" for command in every) > 80
    assert any(command.text == "bash scripts/main.sh" for command in readme)
    assert any(command.text == "bash scripts/test.sh" for command in readme)


@pytest.mark.parametrize("page", PAGES, ids=[docs.relative(page) for page in PAGES])
def test_the_quick_commands_of_a_page_run_as_written(page, tmp_path):
    outcomes = runner.run_page(page, tmp_path)
    problems = [outcome.describe() for outcome in outcomes if not outcome.ok]
    assert not problems, "\n".join(problems)


def test_every_long_command_is_listed_with_its_cost_and_every_listed_prefix_is_used():
    used = {command.long.prefix for command in docs.all_commands() if command.long and command.language == "bash"}
    unused = [entry.prefix for entry in docs.LONG if entry.prefix not in used]
    assert not unused, f"LONG entries no page uses: {unused}"
    assert all(entry.cost for entry in docs.LONG)


def test_the_long_commands_parse_with_the_real_parser():
    problems = []
    for command in docs.all_commands():
        if command.long and (problem := docs.static_problem(command)):
            problems.append(f"{command.where}: {command.text}: {problem}")
    assert not problems, "\n".join(problems)


def test_the_witness_commands_written_in_prose_name_real_options():
    """`witness ...` code spans in the text (which may leave arguments out): no placeholders, an existing
    subcommand, and options it has."""
    problems = []
    for page in PAGES:
        for line, text in docs.inline_commands(page):
            where, argv = f"{docs.relative(page)}:{line}: `{text}`", text.split()[1:]
            if docs.PLACEHOLDER.search(text):
                problems.append(f"{where} holds a placeholder")
            elif problem := docs.option_problem(argv):
                problems.append(f"{where}: {problem}")
    assert not problems, "\n".join(problems)


def test_the_comment_conventions_are_read_as_meant():
    command = docs.Command("x.md", 1, "witness run a.npz --tokens 1,2", "exit 1: prints 3 (the answer is 0); more")
    assert (command.expect, command.prints) == (1, "3")
    text, comment = docs.split_comment('witness run a.npz --json   # prints {"output": 2}')
    assert (text, comment) == ("witness run a.npz --json", 'prints {"output": 2}')
    assert docs.static_problem(docs.Command("x.md", 1, "witness run net.npz --tokens A")) is not None
    assert docs.static_problem(docs.Command("x.md", 1, "witness verify net.npz --no-such-option")) is not None
    assert docs.static_problem(docs.Command("x.md", 1, "witness compile composition --L 1 --m 4 -o docs/x.npz"))


def test_a_broken_command_line_is_reported_as_a_problem(tmp_path, monkeypatch):
    """The checks above fail on a line that does not parse or does not do what its comment says: a scratch page
    fed through the same `run_page`, with a line that works and a long line that parses as controls."""
    page = tmp_path / "broken.md"
    page.write_text("\n".join([
        "# Broken", "", "```bash",
        "witness bounds --L 3 --Hdp 720                  # prints ≈ 2^155515",
        "witness bounds --L 3 --Hdp 720 --no-such-option",
        "witness inspect no-such.npz",
        "witness bounds --L 3 --Hdp 720                  # prints text it never prints",
        "witness bounds --L 3 --Hdp 720                  # exit 1",
        "witness hierarchy --out out/h --no-such-flag",
        ".venv/bin/python scripts/no_such_script.py",
        ".venv/bin/python scripts/run_docs_commands.py --no-such-option",
        "witness hierarchy --out out/h --full",
        "```", ""]), encoding="utf-8")
    monkeypatch.setattr(docs, "relative", lambda path: path.name)  # the page lies outside the repository
    outcomes = runner.run_page(page, tmp_path / "run")
    problems = {outcome.command.line: outcome.problem for outcome in outcomes}
    assert problems[4] is None and outcomes[0].status == 0  # runs, and prints what it says
    assert "unknown arguments ['--no-such-option']" in problems[5]
    assert problems[6] == "exit 2, expected 0"  # a missing file
    assert "does not contain 'text it never prints'" in problems[7]
    assert problems[8] == "exit 0, expected 1"
    assert "--no-such-flag" in problems[9] and outcomes[5].status is None  # long: parsed, refused, not run
    assert "no script 'scripts/no_such_script.py'" in problems[10]
    assert "no option ['--no-such-option']" in problems[11]
    assert problems[12] is None and outcomes[8].skipped.startswith("long")
    assert docs.option_problem(["hierarchy", "--no-such-flag"]) == "unknown options ['--no-such-flag']"
    assert docs.option_problem(["hierarchy", "--full"]) is None
