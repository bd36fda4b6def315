"""Every notebook in notebooks/ executes top to bottom without a cell error."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nbclient
import nbformat
import pytest
from jupyter_client.manager import KernelManager

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))
KERNEL = "python3"
CELL_TIMEOUT = 300  # seconds; the first build of a kernel runs the C compiler


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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_without_outputs(path: Path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (
                f"{path.name}: strip outputs before committing (cell {cell.source[:40]!r})"
            )
