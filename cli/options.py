"""Options generated from schemas, so that the command line accepts a new task or construction without naming it.

A task's options come from its registration record (`witness.tasks.RECORDS`, `TaskRecord.parameters`). A command
that takes any task (`witness train TASK ...`) has one sub-parser per registered task, because tasks spell their
options differently (composition's --n lists n_1 .. n_{L-1}, 2-Sum's is one length); a command about one task
(`witness search sparse`) adds that task's options to its own. Either way `task_from_args` builds the task.

A construction's options come from its builder's signature, read only once the construction is named: looking the
builders up reads package metadata (a tenth of a CPU-second), which `witness --help` should not pay. `witness
compile NAME` parses them from what its own parser left over (`construction_options`); `witness min-precision NAME`
makes a parser for NAME when NAME is parsed (`NamedConstruction`), so that the whole line parses in one pass and
`witness min-precision NAME --help` lists them.
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable
from typing import Any

from cli.common import CliError, Parser, add_output_options
from witness.registry import builder
from witness.tasks import RECORDS, record_of
from witness.tasks.record import Parameter, TaskRecord

#: The one construction with a parametric description (`verify.certify.Construction`, named by --L --m --n): certify
#: proves it, min-precision checks it and bounds gives its budget at any size, without building its network.
PARAMETRIC_CONSTRUCTION = "composition"


def _help(parameter: Parameter) -> str:
    text = parameter.help.replace("%", "%%")  # argparse formats help with %
    if parameter.required or parameter.kind == "flag" or parameter.default == ():
        return text
    shown = " ".join(map(str, parameter.default)) if parameter.kind == "ints" else parameter.default
    return f"{text} (default {shown})"


def _argument(parameter: Parameter) -> dict[str, Any]:
    """`add_argument`'s keywords for one parameter: how its kind is read, and its default or that it is required."""
    if parameter.kind == "flag":  # False when absent
        return {"action": "store_true", "help": _help(parameter)}
    read = {"int": {"type": int}, "ints": {"type": int, "nargs": "*"}, "choice": {"choices": parameter.choices}}
    if parameter.required:
        return {**read[parameter.kind], "required": True, "help": _help(parameter)}
    default = list(parameter.default) if parameter.kind == "ints" else parameter.default
    return {**read[parameter.kind], "default": default, "help": _help(parameter)}


def add_task_options(parser: argparse.ArgumentParser, record: TaskRecord) -> None:
    """`--NAME` for every parameter of the task's record: an int, a list of ints, a flag or one of its choices;
    required where the parameter has no default, else the record's default. Read them back with
    `task_from_args`."""
    for parameter in record.parameters:
        parser.add_argument(f"--{parameter.name}", **_argument(parameter))


def add_task_commands(parser: argparse.ArgumentParser, add_options: Callable[[argparse.ArgumentParser], None]) -> None:
    """`witness COMMAND TASK ...`: a sub-parser per registered task, each with --json, --quiet, the task's options and
    the command's own (`add_options`); `args.task` is the task's name."""
    tasks = parser.add_subparsers(dest="task", required=True, parser_class=Parser)
    for record in RECORDS.values():
        cmd = tasks.add_parser(record.name, help=record.summary)
        add_output_options(cmd)
        add_task_options(cmd, record)
        add_options(cmd)


def task_from_args(args: argparse.Namespace):
    """The task `args.task` names, built by its record from the options `add_task_options` added (a ParameterError
    names a value it refuses)."""
    record = record_of(args.task)
    return record.build(**{parameter.name: getattr(args, parameter.name) for parameter in record.parameters})


def add_signature_options(parser, function: Callable) -> list[str]:
    """`--NAME` for each of `function`'s parameters, and their names. A parameter whose default is a tuple takes a
    list of integers (`--n 2 4`), a bool default is a flag, a str default takes a string, and anything else takes one
    integer (required when there is no default)."""
    names = []
    for param in inspect.signature(function).parameters.values():
        flag, default = f"--{param.name}", param.default
        required = default is inspect.Parameter.empty
        if isinstance(default, bool):
            parser.add_argument(flag, action="store_true")
        elif isinstance(default, tuple):
            parser.add_argument(flag, type=int, nargs="*", default=list(default))
        elif isinstance(default, str):
            parser.add_argument(flag, default=default)
        else:
            parser.add_argument(flag, type=int, required=required, default=None if required else default)
        names.append(param.name)
    return names


def construction_options(name: str, argv: list[str]) -> dict[str, Any]:
    """The options of construction `name` (its builder's parameters) from `argv`, what `witness compile NAME` left
    over."""
    prog = f"witness compile {name}"
    parser = Parser(prog=prog, add_help=False)
    add_signature_options(parser, builder(name))
    try:
        return vars(parser.parse_args(argv))
    except CliError as exc:  # name the construction and what it takes: argparse's message names neither
        takes = " ".join(parser.format_usage().removeprefix(f"usage: {prog}").split())
        raise CliError(f"compile {name} takes {takes}: {exc}") from None


class NamedConstruction(argparse.Action):
    """A positional naming a construction, followed by the construction's options and the command's: like a
    sub-command per construction, except that each sub-parser is made (`make_parser(name, prog)`, which returns it
    and the names of the construction's options) only once its construction is named. Listing the constructions
    reads package metadata and reading a builder's signature imports its module, which `witness --help` should not
    pay for. Sets the construction's name, `construction_options` (a dict) and the command's options."""

    def __init__(self, option_strings, dest, make_parser, **kwargs):
        super().__init__(option_strings, dest, nargs=argparse.PARSER, **kwargs)
        self.make_parser = make_parser

    def __call__(self, parser, namespace, values, option_string=None):
        name, *rest = values
        prog = f"{parser.prog} {name}"
        construction_parser, names = self.make_parser(name, prog)
        try:
            parsed = vars(construction_parser.parse_args(rest))
        except CliError as exc:
            raise CliError(f"{prog.removeprefix('witness ')}: {exc}") from None
        namespace.construction_options = {option: parsed.pop(option) for option in names}
        vars(namespace).update(parsed, **{self.dest: name})
