"""The notebooks in examples/ run top to bottom (nbclient), so they cannot rot; their cells assert their claims.

They are also committed executed, with their outputs and figures, so that a reader browsing the repository sees
them: `scripts/execute_notebooks.py` refreshes them. The committed outputs are checked here against a fresh
execution (every cell that shows something has saved outputs, with as many figures), and for what must not be
saved (progress bars, stderr, execution timings).
"""

import importlib.util
import re

import pytest
from tests import REPO

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")
pytest.importorskip("ipykernel")
pytest.importorskip("transformer_lens.model_bridge.sources.native")

ROOT = REPO
EXAMPLES = ROOT / "examples"
NOTEBOOKS = sorted(EXAMPLES.glob("*.ipynb"))
REFRESH = "refresh them with `.venv/bin/python scripts/execute_notebooks.py`"
#: What the three committed notebooks may weigh together (their PNG figures, mostly).
MAX_BYTES = 1_500_000
#: A tqdm bar drawn into text: a carriage-return redraw, a block character, or an ascii bar `NN%|#...|`.
PROGRESS = re.compile(r"\r|[\u2580-\u259f]|\d+%\|")


def code_cells(notebook):
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def shown(cell):
    """The outputs a reader sees: all but stderr streams (warnings, progress bars), which are not saved."""
    return [output for output in cell.get("outputs", [])
            if not (output.get("output_type") == "stream" and output.get("name") == "stderr")]


def images(cell):
    return sum("image/png" in output.get("data", {}) for output in cell.get("outputs", []))


def test_the_three_notebooks_are_there():
    assert [path.name for path in NOTEBOOKS] == ["01_construction.ipynb", "02_verify.ipynb", "03_train.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_is_committed_executed(path):
    notebook = nbformat.read(path, as_version=4)
    cells = code_cells(notebook)
    assert [cell.execution_count for cell in cells] == list(range(1, len(cells) + 1)), \
        f"{path.name} was not saved from one top-to-bottom run: {REFRESH}"
    assert sum(map(images, cells)) >= 2, f"{path.name} has no saved figures: {REFRESH}"
    assert notebook.metadata.get("language_info") == {"name": "python"}  # no interpreter version to churn
    for k, cell in enumerate(cells):
        assert "execution" not in cell.metadata, f"{path.name} code cell {k}: execution timings saved"
        for output in cell.outputs:
            assert output.output_type != "error", f"{path.name} code cell {k}: an error was saved"
            if output.output_type == "stream":
                assert output.name == "stdout", f"{path.name} code cell {k}: a stderr stream was saved"
                assert not PROGRESS.search(output.text), f"{path.name} code cell {k}: a progress bar was saved"


def test_committed_notebooks_are_small():
    sizes = {path.name: path.stat().st_size for path in NOTEBOOKS}
    assert sum(sizes.values()) < MAX_BYTES, f"the executed notebooks weigh {sizes} bytes: draw fewer or smaller figures"


def test_execute_script_cleans_what_it_saves():
    spec = importlib.util.spec_from_file_location("execute_notebooks", ROOT / "scripts" / "execute_notebooks.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    cell = nbformat.v4.new_code_cell("work()")
    cell.metadata["execution"] = {"iopub.execute_input": "2025-01-01T00:00:00Z"}
    cell.outputs = [nbformat.v4.new_output("stream", name="stderr", text="\rtrain:  10%|#   | 1/10"),
                    nbformat.v4.new_output("stream", name="stdout", text="accuracy 1.0\n"),
                    nbformat.v4.new_output("stream", name="stdout", text="done\n")]
    notebook = nbformat.v4.new_notebook(cells=[cell], metadata={"language_info": {"name": "python",
                                                                                  "version": "3.11.2"}})
    cleaned = script.clean(notebook)
    assert [output.text for output in cleaned.cells[0].outputs] == ["accuracy 1.0\ndone\n"]  # one stream, as saved
    assert "execution" not in cleaned.cells[0].metadata and cleaned.metadata.language_info == {"name": "python"}
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="\rtrain:  10%|#   | 1/10")]
    with pytest.raises(SystemExit, match="progress bar"):
        script.clean(notebook)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_runs(path, tmp_path):
    committed = nbformat.read(path, as_version=4)
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=240, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError, with the failing cell and traceback, on any error
    errors = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])
              if output.get("output_type") == "error"]
    assert not errors
    ran, saved = code_cells(notebook), code_cells(committed)
    assert sum(map(images, ran)) >= 2  # the figures were drawn, not silently skipped
    for k, (fresh, old) in enumerate(zip(ran, saved, strict=True)):
        for output in fresh.outputs:
            if output.output_type == "stream" and output.name == "stdout":
                assert not PROGRESS.search(output.text), f"code cell {k} prints a progress bar on stdout"
        # The committed file shows what the notebook shows today: outputs where a run has them, the same figures.
        assert bool(shown(old)) == bool(shown(fresh)), f"{path.name} code cell {k}: saved outputs are stale; {REFRESH}"
        assert images(old) == images(fresh), \
            f"{path.name} code cell {k}: {images(old)} figures saved, {images(fresh)} drawn; {REFRESH}"
