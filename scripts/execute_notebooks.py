"""Execute the example notebooks top to bottom and save them with their outputs, so that a reader browsing the
repository sees every printed result and figure.

    .venv/bin/python scripts/execute_notebooks.py              # examples/*.ipynb, in place
    .venv/bin/python scripts/execute_notebooks.py NB.ipynb ... # just these
    .venv/bin/python scripts/execute_notebooks.py --out DIR    # write the executed copies to DIR instead

Each notebook runs in a fresh `python3` kernel whose working folder is a temporary one (removed afterwards), so
the files a notebook writes do not land in the repository. A failing cell stops the script with its traceback and
nothing is saved for that notebook. What is saved is made to diff small on re-execution: no execution timings in
cell metadata, no kernel/Python version in the notebook metadata, consecutive prints saved as one stream, and
stderr streams (progress bars, library warnings: echoed here instead) left out of the outputs; a notebook that
still prints a progress bar on stdout is refused. Wall and CPU time (the kernel's) of each notebook are printed;
the tests re-execute the notebooks on every CI run (tests/docs/test_notebooks.py), so keep each under about a minute.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import sys
import tempfile
import time
from pathlib import Path

import nbclient
import nbformat

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

#: A tqdm bar drawn into text: a carriage return, a block character, or `NN%|...|` (tqdm's ascii bar).
PROGRESS = re.compile(r"\r|[\u2580-\u259f]|\d+%\|")


def progress_spill(text: str) -> bool:
    """True when `text` holds a progress bar as tqdm draws it (carriage-return redraws or bar characters)."""
    return bool(PROGRESS.search(text))


def clean(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Drop what changes on every run or every machine, and stderr streams; refuse progress bars on stdout."""
    notebook.metadata.pop("widgets", None)
    notebook.metadata["language_info"] = {"name": "python"}
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type != "code":
            continue
        kept = []
        for output in cell.outputs:
            if output.output_type == "stream" and output.name == "stderr":
                if not progress_spill(output.text):  # a warning: shown here, left out of the notebook
                    print(f"(stderr, not saved) {output.text.rstrip()}", file=sys.stderr)
                continue
            if output.output_type == "stream" and progress_spill(output.text):
                raise SystemExit(f"a progress bar printed on stdout in cell:\n{cell.source}")
            if output.output_type == "stream" and kept and kept[-1].get("name") == output.name:
                kept[-1].text += output.text  # how prints split into messages depends on timing: save one
                continue
            kept.append(output)
        cell.outputs = kept
    return notebook


def execute(path: Path, timeout: int) -> tuple[nbformat.NotebookNode, float, float]:
    """Run `path` in a fresh kernel in a temporary folder; returns the executed notebook, wall and CPU seconds."""
    notebook = nbformat.read(path, as_version=4)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="witness-notebook-") as folder:
        client = nbclient.NotebookClient(notebook, timeout=timeout, kernel_name="python3", record_timing=False,
                                         resources={"metadata": {"path": folder}})
        client.execute()  # raises CellExecutionError, with the failing cell and its traceback, on any error
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the kernel is our child, reaped at shutdown
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return clean(notebook), wall, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: examples/*.ipynb")
    parser.add_argument("--out", type=Path, help="write the executed notebooks here instead of in place")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600)")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(EXAMPLES.glob("*.ipynb"))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    for path in paths:
        notebook, wall, cpu = execute(path, args.timeout)
        target = args.out / path.name if args.out else path
        nbformat.validate(notebook)
        nbformat.write(notebook, target)
        images = sum("image/png" in output.get("data", {}) for cell in notebook.cells if cell.cell_type == "code"
                     for output in cell.outputs)
        print(f"{path.name}: wall {wall:.1f} s, cpu {cpu:.1f} s, {images} figures, "
              f"{os.path.getsize(target) / 1024:.0f} KiB -> {target}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
