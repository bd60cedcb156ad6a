"""Find the command lines of README.md and docs/*.md and check them without running them (scripts/run_docs_commands.py
runs them; its docstring says what counts as a command and what its comment may promise).

A command is long when it starts with one of the prefixes in LONG: its cost is written here, and the test suite
only parses it (`witness` lines with the real argument parser, scripts by checking that the file and its options
exist). Install lines are checked against pyproject.toml and constraints.txt, never run.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Long:
    """Commands starting with `prefix` take `cost`; `writes` names the committed files they rewrite, if any."""

    prefix: str
    cost: str
    writes: str | None = None


#: The long commands, most specific prefix first; each line's cost is what the pages say or what was measured on
#: the 2-core machine of docs/benchmarks.md (other load on the machine makes it longer).
LONG = (
    Long("bash scripts/main.sh", "about 5 minutes on 2 cores after a ~3-minute install (--full over an hour)"),
    Long("bash scripts/test.sh", "about 5 minutes on 2 cores"),
    Long("witness hierarchy --full --out docs/hierarchy", "over an hour on 2 cores", "docs/hierarchy/"),
    Long("witness hierarchy", "about 5 minutes on 2 cores (--quick a few minutes, --full over an hour)"),
    Long("witness train composition --L 1 --m 3", "10-20 s (torch, 200 steps)"),
    Long("witness train", "about 4 minutes (4,000 steps at d_model 32) to 6 minutes (16,000 steps)"),
    Long("witness capacity --sizes 4", "under a minute"),
    Long("witness capacity --L 1 --sizes 24 32 48 --H 1 --d-head 8 --d-model 32 --format fp16 --seeds 3 --steps 16000 "
         "--mixers rnn --reuse", "a few minutes: retrains the stored curve's fastest row (121 s when it was stored)"),
    Long("witness capacity", "32 minutes to over an hour with --workers 2"),
    Long("witness separation --L 3", "about 16 CPU-minutes and 8 GiB (52 minutes wall on a shared machine)"),
    Long("witness separation --L 2", "20-30 s"),
    Long("witness separation --L 1 --out cli-sep1", "5 s; separation.md runs the same"),
    Long("witness check-certificate sep2/", "about a minute (the L = 2 parametric certificate)"),
    Long("witness search hybrid --L 2", "about 15 s"),
    Long("witness search full --L 2", "about 10 s"),
    Long("witness search full --L 1 --m 8", "seconds, after the 4-minute `witness train` above it"),
    Long("witness run cot.npz", "seconds, after the `witness train composition_cot` above it (about 5 s)"),
    Long("witness search sparse", "10-20 s"),
    Long("witness run deltanet-hybrid.npz", "seconds, after the search above it"),
    Long("witness run natural.npz", "seconds, after the search above it"),
    Long(".venv/bin/python scripts/hybrid_table.py", "about 21 minutes", "docs/hybrid_results.md"),
    Long(".venv/bin/python scripts/sparse_table.py", "about 6 minutes", "docs/sparse_results.md"),
    Long(".venv/bin/python scripts/min_precision_table.py", "about 2 minutes", "docs/min_precision.md, .png"),
    Long(".venv/bin/python scripts/two_sum_min_precision_table.py", "minutes",
         "docs/two_sum_min_precision.md, .png"),
    Long(".venv/bin/python scripts/training_table.py", "about 40 minutes (the seconds column of docs/training.md)",
         "docs/training.md"),
    Long(".venv/bin/python scripts/run_docs_commands.py", "about a minute; --long hours"),
    Long(".venv/bin/python benchmarks/hybrid_constructions.py", "a minute or more", "docs/hybrid_constructions.md"),
    Long(".venv/bin/python benchmarks/run_all.py --update-docs", "about 70 s of runs", "docs/benchmarks.md"),
    Long(".venv/bin/python benchmarks/run_all.py", "about 70 s of runs"),
    Long(".venv/bin/python benchmarks/", "a minute or more"),
    Long(".venv/bin/python examples/quickstart.py", "about 5 s (also run by tests/docs/test_examples.py)"),
)

#: Lines that install: checked (`check_setup`), never run.
SETUP = ("python3 -m venv .venv", ".venv/bin/python -m pip install", "source .venv/bin/activate",
         "bash scripts/setup-venv.sh")
#: Placeholders a command line must not hold: it must run as written.
PLACEHOLDER = re.compile(r"…|\.\.\.|\bDIR\b|\bFILE\b|\bHOST\b|\bADDRESS\b|--tokens [AB]\b|<[A-Za-z_]+>")
EXIT = re.compile(r"\bexit (\d)\b")
PRINTS = re.compile(r"\bprints (.+?)(?: \(|;|$)")
LONG_MARK = re.compile(r"^<!-- long: (.+) -->$")
#: Folders of the repository linked into each page's folder, so commands that read them work as from the root.
LINKED = ("docs", "experiments")


def pages() -> list[Path]:
    """The README and every page directly in docs/ (the committed results in its sub-folders hold no commands)."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def relative(path: Path) -> str:
    return path.resolve().relative_to(ROOT).as_posix()


@dataclass(frozen=True)
class Command:
    """One command line of a bash block (continuation lines joined), or one python block."""

    page: str
    line: int
    text: str
    comment: str = ""
    language: str = "bash"
    long_mark: str | None = None  # python blocks: the `<!-- long: ... -->` cost

    @property
    def expect(self) -> int:
        found = EXIT.search(self.comment)
        return int(found.group(1)) if found else 0

    @property
    def prints(self) -> str | None:
        found = PRINTS.search(self.comment)
        return found.group(1).strip() if found else None

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.text)

    @property
    def kind(self) -> str:
        """witness, script (python or bash), setup, python (a block) or unknown."""
        if self.language == "python":
            return "python"
        if self.text.startswith(SETUP):
            return "setup"
        if self.text.startswith(("witness ", ".venv/bin/witness ")):
            return "witness"
        if self.text.startswith((".venv/bin/python ", "bash scripts/")):
            return "script"
        return "unknown"

    @property
    def long(self) -> Long | None:
        if self.language == "python":
            return Long("python block", self.long_mark) if self.long_mark else None
        text = re.sub(r"^\.venv/bin/witness ", "witness ", self.text)
        return next((entry for entry in LONG if text.startswith(entry.prefix)), None)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def short(self, width: int = 100) -> str:
        text = self.text if self.language == "bash" else "python block: " + self.text.splitlines()[0]
        return text if len(text) <= width else text[:width - 1] + "…"


def split_comment(line: str) -> tuple[str, str]:
    """(command, comment): the comment starts at the first ` #` outside quotes."""
    quote = None
    for index, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index].strip(), line[index + 1:].strip()
    return line.strip(), ""


def commands(page: Path) -> list[Command]:
    """Every command of `page`, in order."""
    name, found = relative(page), []
    lines = page.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[index])
        if not fence:
            index += 1
            continue
        language, start = fence.group(1), index + 1
        end = next(i for i in range(start, len(lines)) if lines[i].startswith("```"))
        block = lines[start:end]
        if language == "python":
            mark = LONG_MARK.match(lines[index - 1].strip()) if index else None
            found.append(Command(name, start + 1, "\n".join(block), language="python",
                                 long_mark=mark.group(1) if mark else None))
        elif language == "bash":
            continued, first = "", 0
            for offset, raw in enumerate(block):
                if not continued:
                    first = start + offset + 1
                    if not raw.strip() or raw.lstrip().startswith("#"):
                        continue
                if raw.rstrip().endswith("\\"):
                    continued += raw.rstrip()[:-1].strip() + " "
                    continue
                text, comment = split_comment(continued + raw.strip())
                continued = ""
                found.append(Command(name, first, text, comment))
        index = end + 1
    return found


def all_commands() -> list[Command]:
    return [command for page in pages() for command in commands(page)]


def inline_commands(page: Path) -> list[tuple[int, str]]:
    """`witness ...` code spans in a page's prose (outside code blocks): (line, text)."""
    found, fenced = [], False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            found += [(number, span) for span in re.findall(r"`(witness [^`]+)`", line)]
    return found


# -- checks that run nothing ---------------------------------------------------------------------------------------
def parse_problem(argv: list[str]) -> str | None:
    """None when the real parser accepts `witness ARGV` (every option known, every value of its type), else why."""
    from cli.main import build_parser

    try:
        args, extra = build_parser().parse_known_args(argv)
    except (SystemExit, Exception) as exc:  # the parser's own errors: CliError (exit 2) or SystemExit
        return f"the parser refuses it: {exc}"
    if not getattr(args, "command", None):
        return "no subcommand"
    if extra and args.command != "compile":  # compile reads its construction's options itself
        return f"unknown arguments {extra}"
    if args.command == "compile":
        from cli.options import construction_options

        try:
            construction_options(args.construction, extra)
        except (SystemExit, Exception) as exc:
            return f"the construction's options are refused: {exc}"
    return None


def subcommand_parser(argv: list[str]):
    """The argparse parser of `witness ARGV`'s subcommand (and of `search`'s architecture), and the rest of ARGV."""
    import argparse as _argparse

    from cli.main import build_parser

    parser, rest = build_parser(), list(argv)
    while rest:
        choices = next((action.choices for action in parser._actions
                        if isinstance(action, _argparse._SubParsersAction)), None)
        if not choices or rest[0] not in choices:
            break
        parser, rest = choices[rest[0]], rest[1:]
    return parser, rest


def known_options(argv: list[str]) -> set[str]:
    parser, _ = subcommand_parser(argv)
    return {option for action in parser._actions for option in action.option_strings}


def option_problem(argv: list[str]) -> str | None:
    """For a command named in prose, which may leave out required arguments: None when its subcommand exists and
    knows every `--option` given."""
    parser, rest = subcommand_parser(argv)
    if parser.prog == "witness" and argv and argv[0] != "--help":
        return f"no subcommand {argv[0]!r}"
    if parser.prog == "witness compile":
        return None  # the construction's own options are read by compile itself
    known = known_options(argv)
    unknown = [arg for arg in rest if arg.startswith("-") and arg.split("=")[0] not in known]
    return f"unknown options {unknown}" if unknown else None


def script_problem(command: Command) -> str | None:
    """None when the script exists and every `--option` of the line appears in it."""
    argv = command.argv
    script = argv[1] if argv[0] in (".venv/bin/python", "bash") else None
    if script is None or not (ROOT / script).is_file():
        return f"no script {script!r} in the repository"
    text = (ROOT / script).read_text(encoding="utf-8")
    missing = [arg for arg in argv[2:] if arg.startswith("--") and f'"{arg}"' not in text and arg not in text]
    if script.endswith(".sh") and script in ("scripts/main.sh", "scripts/test.sh"):
        missing = []  # their arguments go to `witness hierarchy` / pytest
    return f"the script has no option {missing}" if missing else None


def extras_defined() -> set[str]:
    """The extras pyproject.toml defines (read without tomllib, which Python 3.10 lacks)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    section = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^([A-Za-z0-9_-]+)\s*=", section, re.MULTILINE))


def setup_problem(command: Command) -> str | None:
    """Install lines: pip installs name real extras and the constraints (or torch at its pinned version)."""
    text = command.text
    if not text.startswith(".venv/bin/python -m pip install"):
        return None
    constraints = (ROOT / "constraints.txt").read_text(encoding="utf-8")
    torch = re.search(r"^torch==(\S+)", constraints, re.MULTILINE)
    if " torch==" in text:
        return None if torch and f"torch=={torch.group(1)}" in text else "torch is not at the constraints' pin"
    if "-c constraints.txt" not in text:
        return "a pip install without -c constraints.txt"
    extras = re.search(r'-e "\.\[([^\]]*)\]"', text)
    known = extras_defined()
    unknown = [extra for extra in (extras.group(1).split(",") if extras else []) if extra not in known]
    return f"unknown extras {unknown}" if unknown else None


def static_problem(command: Command) -> str | None:
    """What is wrong with a command without running it: a placeholder, an unknown kind, an option that does not
    exist, a fast command that writes into docs/."""
    if command.language == "python":
        try:
            compile(command.text, command.where, "exec")
        except SyntaxError as exc:
            return f"not valid Python: {exc}"
        return None
    if PLACEHOLDER.search(command.text):
        return "holds a placeholder: it must run as written"
    kind = command.kind
    if kind == "unknown":
        return "not a command this test knows (witness, .venv/bin/python, bash scripts/, or an install line)"
    if kind == "setup":
        return setup_problem(command)
    if kind == "script":
        return script_problem(command)
    argv = command.argv
    if command.long is None and any(a in ("-o", "--output", "--out", "--save-network") and b.startswith("docs")
                                    for a, b in zip(argv, argv[1:])):
        return "a quick command writes into docs/: mark it long (it rewrites committed files)"
    return parse_problem(argv[1:])


