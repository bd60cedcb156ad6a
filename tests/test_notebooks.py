"""The notebooks in examples/ run top to bottom (nbclient), so they cannot rot; their cells assert their claims."""

from pathlib import Path

import pytest

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")
pytest.importorskip("ipykernel")
pytest.importorskip("transformer_lens.model_bridge.sources.native")

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NOTEBOOKS = sorted(EXAMPLES.glob("*.ipynb"))


def test_the_three_notebooks_are_there():
    assert [path.name for path in NOTEBOOKS] == ["01_construction.ipynb", "02_verify.ipynb", "03_train.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_runs(path, tmp_path):
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=240, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError, with the failing cell and traceback, on any error
    errors = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])
              if output.get("output_type") == "error"]
    assert not errors
    images = sum("image/png" in output.get("data", {}) for cell in notebook.cells if cell.cell_type == "code"
                 for output in cell.get("outputs", []))
    assert images >= 2  # the figures were drawn, not silently skipped
