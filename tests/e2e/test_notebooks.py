"""Every notebook in notebooks/ executes top to bottom without a cell error, and every
cell that draws leaves an image in its outputs.

With TDSL_EXECUTED_NOTEBOOKS set to a directory, each executed notebook is saved there
too: the documentation renders those outputs instead of running the notebooks again."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import nbclient
import nbformat
import pytest
from jupyter_client.manager import KernelManager

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("*.ipynb"))
KERNEL = "python3"
CELL_TIMEOUT = 300  # seconds; the first build of a kernel runs the C compiler
# a cell that calls one of these draws a figure, and must show it
DRAWS = re.compile(r"\.plot\(|\bplot_iteration_space\(|\bplt\.")


def drawing_cells_without_an_image(nb) -> list[str]:
    """The sources of the code cells that draw (call `.plot(`, `plot_iteration_space(` or
    pyplot) but have no image among their outputs: a figure made and never shown."""
    missing = []
    for cell in nb.cells:
        if cell.cell_type != "code" or not DRAWS.search(cell.source):
            continue
        if not any("image/png" in o.get("data", {}) for o in cell.get("outputs", [])):
            missing.append(cell.source)
    return missing


@pytest.fixture
def kernel_env(monkeypatch):
    """Resolve the `python3` kernel to the ipykernel installed next to this interpreter,
    ahead of any user-level kernel spec of the same name."""
    monkeypatch.setenv("JUPYTER_PREFER_ENV_PATH", "1")
    cmd = KernelManager(kernel_name=KERNEL).format_kernel_cmd()
    if os.path.realpath(cmd[0]) != os.path.realpath(sys.executable):
        pytest.fail(
            f"kernel spec {KERNEL!r} runs {cmd[0]}, not {sys.executable}; "
            "install ipykernel into this environment (the 'dev' extra does)"
        )


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no .ipynb files"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path: Path, kernel_env):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        kernel_name=KERNEL,
        timeout=CELL_TIMEOUT,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()  # raises CellExecutionError, with the cell and traceback, on any error
    errors = [
        o
        for cell in nb.cells
        if cell.cell_type == "code"
        for o in cell.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors, errors
    assert not drawing_cells_without_an_image(nb), (
        f"{path.name}: these cells draw a figure that is never shown (end the cell with "
        f"the figure): {drawing_cells_without_an_image(nb)}")
    out = os.environ.get("TDSL_EXECUTED_NOTEBOOKS")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, Path(out) / path.name)


def test_a_figure_made_and_not_shown_is_found():
    """The check above finds a cell that assigns its figure (notebook 03 did, and showed
    nothing), and passes one that ends with it."""
    hidden = nbformat.v4.new_code_cell("fig = result.plot()")
    shown = nbformat.v4.new_code_cell("td.plot_iteration_space(s, Y)", outputs=[
        nbformat.v4.new_output("execute_result", {"image/png": "iVBOR", "text/plain": "<Figure>"},
                               execution_count=1)])
    quiet = nbformat.v4.new_code_cell("x = 1")
    nb = nbformat.v4.new_notebook(cells=[hidden, shown, quiet])
    assert drawing_cells_without_an_image(nb) == ["fig = result.plot()"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_without_outputs(path: Path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (
                f"{path.name}: strip outputs before committing (cell {cell.source[:40]!r})"
            )


def test_a_user_error_in_a_notebook_shows_no_frames_inside_tdsl(kernel_env):
    """A ScheduleError showed six internal frames before its message in Jupyter."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import tdsl as td\n"
        "(i,) = td.dims('i')\n"
        "X = td.input('X', {i: 8}, td.float32)\n"
        "Y = td.compute('Y', {i: 8}, X[i] + 1)\n"
        "td.schedule(Y).split(Y, 'nope', 2)")])
    nbclient.NotebookClient(nb, kernel_name=KERNEL, timeout=CELL_TIMEOUT,
                            allow_errors=True).execute()
    (err,) = [o for o in nb.cells[0].outputs if o.output_type == "error"]
    assert err.ename == "ScheduleError" and "nope" in err.evalue
    shown = "\n".join(err.traceback)
    import tdsl

    assert os.path.dirname(tdsl.__file__) not in shown
    assert "td.schedule(Y).split(Y, 'nope', 2)" in shown
