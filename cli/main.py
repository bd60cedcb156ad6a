"""The `witness` command line: the one face that wires the core, the constructions and the verifier together.

Every subcommand prints text, or one JSON object with `--json`. Bad input is one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys

from cli import checks, hierarchy, networks, search, theory, training
from cli.common import EXIT_BAD_INPUT, EXIT_UNKNOWN, CliError, Parser
from witness.errors import StandInOverflow, WitnessError
from witness.progress import quiet, set_quiet

#: The subcommands, in the order `witness --help` lists them; each adds its parser to the subparsers it is given.
COMMANDS = (networks.add_compile, networks.add_run, networks.add_inspect, theory.add_bounds, checks.add_verify,
            checks.add_min_precision, checks.add_certify, checks.add_check_certificate, training.add_train,
            training.add_capacity, theory.add_separation, hierarchy.add_hierarchy, search.add_search)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="witness", description=__doc__.splitlines()[0])
    # What a subcommand may declare (set_defaults): that it parses the options of the construction it names from
    # what its own parser leaves over (compile), and that a kill interrupts it as Ctrl-C does (hierarchy).
    parser.set_defaults(reads_construction_options=False, interrupt_on_sigterm=False)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for add in COMMANDS:
        add(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; exit status 0, 1, 2 or 3 (docs/conventions.md §7). An error is one line on stderr (and with
    --json also one JSON object on stdout), never a traceback."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    was_quiet = quiet()
    sigterm = None  # the handler a kill had before this command took it over, if it did
    # Exact integers at the theorems' scale (`bounds --n 2^1000000`) have more than Python's default 4,300 digits
    # for str(); big_int bounds what comes in (exponents up to 10^6), so every such number is printed in full.
    digits = getattr(sys, "get_int_max_str_digits", lambda: None)()
    if digits is not None:
        sys.set_int_max_str_digits(0)
    try:
        args, rest = parser.parse_known_args(argv)
        if args.reads_construction_options:
            args.construction_argv = rest
        elif rest:
            raise CliError(f"unrecognised arguments: {' '.join(rest)}")
        set_quiet(was_quiet or args.quiet)
        if args.interrupt_on_sigterm:
            sigterm = signal.signal(signal.SIGTERM, _interrupt)
        return args.handler(args) or 0
    except StandInOverflow as exc:  # the run could not decide: unknown, not bad input
        return _error(str(exc), argv, EXIT_UNKNOWN)
    except WitnessError as exc:
        return _error(str(exc), argv)
    except BrokenPipeError:  # `witness ... | head`: the reader left; say so once, where it can still be read
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print("witness: error: the output pipe closed before witness finished writing", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        if "distributed" in sys.modules:  # a sweep was running: its clusters go now, quietly
            from lab.sweep import close_local_clusters

            close_local_clusters()
        print("witness: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        return _error("out of memory (the work exceeds what this machine has; try a smaller size)", argv)
    except Exception as exc:  # a bug in witness, not in the input: still one line, and named as ours
        return _error(f"internal error ({type(exc).__name__}: {exc}); please report it", argv)
    finally:
        set_quiet(was_quiet)
        if sigterm is not None:
            signal.signal(signal.SIGTERM, sigterm)
        if digits is not None:
            sys.set_int_max_str_digits(digits)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _error(message: str, argv: list[str], status: int = EXIT_BAD_INPUT) -> int:
    message = " ".join(message.split())  # one line, whatever the message held
    print(f"witness: {'unknown' if status == EXIT_UNKNOWN else 'error'}: {message}", file=sys.stderr)
    if "--json" in argv:
        print(json.dumps({"error": message, "exit": status}))
    return status


if __name__ == "__main__":
    sys.exit(main())
