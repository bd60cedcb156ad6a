"""`witness hierarchy`: the main job (docs/hierarchy.md)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from cli.common import CliError, add_command, add_engine_options, check_output_folder, emit


def cmd_hierarchy(args: argparse.Namespace) -> None:
    # Imported here: dask.distributed takes a noticeable fraction of a second to import, and only sweeps need it.
    from experiments import hierarchy, trained
    from lab.sweep import Engine

    check_output_folder(Path(args.out), "--out")
    config = hierarchy.load_config(args.config, quick=args.quick).select(args.L)
    if args.full:
        store = None
    elif args.stored is not None:
        store = trained.Store(args.stored)
    elif args.quick or args.config is not None:
        store = None  # only the embedded full configuration has a committed store; these train (quickly)
    elif (trained.DEFAULT_STORE / trained.STORE).is_file():
        store = trained.Store(trained.DEFAULT_STORE)
    else:
        raise CliError(f"no stored trained networks at {trained.DEFAULT_STORE} (an install without the "
                       "repository's docs/): pass --stored DIR, a folder `witness hierarchy --full` wrote, or "
                       "--full to compute everything here")
    workers = args.workers if args.workers or args.scheduler else len(os.sched_getaffinity(0))
    report = hierarchy.hierarchy(args.out, config, Engine(None if args.scheduler else workers, args.scheduler),
                                 store=store, quick=args.quick)
    text = "\n".join(["witness hierarchy: summary", *hierarchy.summary_lines(report),
                      f"wrote {args.out}/report.md (the summary, then every row), report.json, "
                      f"{len(report['plots'])} plots"])
    emit(args, report, text)


def add_hierarchy(commands) -> None:
    cmd = add_command(commands, "hierarchy", cmd_hierarchy, "certify the constructions, probe weaker architectures "
                                                            "within their budget, and write the report (Markdown, "
                                                            "JSON, plots)")
    # A kill ends the run as Ctrl-C does, leaving the output folder marked unfinished (cli.main).
    cmd.set_defaults(interrupt_on_sigterm=True)
    cmd.add_argument("--out", required=True, metavar="DIR", help="folder for report.md, report.json, plots, "
                                                                "networks and certificates")
    cmd.add_argument("--quick", action="store_true", help="a smoke run: the configuration's small `quick` sizes, "
                                                          "a few training steps (a few minutes)")
    cmd.add_argument("--L", type=int, nargs="+", help="only these depths (default: every configured one)")
    cmd.add_argument("--config", metavar="JSON", help="a configuration file (default: the embedded one)")
    stored_or_full = cmd.add_mutually_exclusive_group()
    stored_or_full.add_argument("--full", action="store_true",
                                help="compute everything here: train every network and scan every separation from "
                                     "its family's first size; writes DIR/trained.json for later replays; the default "
                                     "for --quick and --config")
    stored_or_full.add_argument("--stored", metavar="DIR",
                                help="replay what a --full run wrote to DIR (default for the embedded configuration: "
                                     "the repository's docs/hierarchy): trained networks, searched here, one "
                                     "network retrained and compared bit for bit; each separation's certificate and "
                                     "coverage re-checked here")
    add_engine_options(cmd)
