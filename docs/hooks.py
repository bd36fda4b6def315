"""MkDocs hooks (mkdocs.yml: hooks): what the site takes from outside docs/.

- the home page is README.md, its links into docs/ made relative to the site;
- the notebooks are notebooks/*.ipynb with their outputs: those the test suite executed
  and saved (tests/e2e/test_notebooks.py, with TDSL_EXECUTED_NOTEBOOKS set to a
  directory, as .ci/run does), so CI runs them once; without that directory they are
  executed here (nbclient), once per build. The "Notebooks" section of the navigation
  lists every notebook, titled by its first heading. A live widget's output (td.explore)
  has no saved widget state to render on a static page, so the page shows the
  snapshot that came with it (its text/html).
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import nbformat
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
_made: dict[str, Path] = {}
WIDGET = "application/vnd.jupyter.widget-view+json"


def _static(nb):
    """`nb` without the live widget views that carry a static fallback beside them."""
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if WIDGET in data and "text/html" in data:
                del data[WIDGET]
    return nb


def _title(path: Path) -> str:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            m = re.search(r"^#\s+(.+)$", cell.source, re.M)
            if m:
                return m.group(1).strip()
    return path.stem


def on_config(config):
    """Fill the navigation's "Notebooks" section with every notebook."""
    entries = [{_title(p): f"notebooks/{p.name}"} for p in NOTEBOOKS]
    for item in config.nav:
        if isinstance(item, dict) and "Notebooks" in item:
            item["Notebooks"] = entries
    return config


def _executed() -> Path:
    """A directory holding every notebook with its outputs."""
    if "dir" in _made:
        return _made["dir"]
    given = os.environ.get("TDSL_EXECUTED_NOTEBOOKS")
    if given and all((Path(given) / p.name).exists() for p in NOTEBOOKS):
        _made["dir"] = Path(given)
        return _made["dir"]
    import nbclient

    out = Path(tempfile.mkdtemp(prefix="tdsl-notebooks-"))
    for p in NOTEBOOKS:
        nb = nbformat.read(p, as_version=4)
        nbclient.NotebookClient(nb, kernel_name="python3", timeout=600,
                                resources={"metadata": {"path": str(p.parent)}}).execute()
        nbformat.write(nb, out / p.name)
    _made["dir"] = out
    return out


@event_priority(100)  # before mkdocs-jupyter turns .ipynb files into pages
def on_files(files, config):
    """Add README.md as the home page and the executed notebooks."""
    readme = (ROOT / "README.md").read_text()
    readme = re.sub(r"\]\(docs/", "](", readme)
    home = Path(tempfile.mkdtemp(prefix="tdsl-home-"))
    (home / "index.md").write_text(readme)
    files.append(File("index.md", str(home), config["site_dir"], config["use_directory_urls"]))
    executed = _executed()
    for p in NOTEBOOKS:
        src = Path(tempfile.mkdtemp(prefix="tdsl-nb-"))
        (src / "notebooks").mkdir()
        nb = _static(nbformat.read(executed / p.name, as_version=4))
        nbformat.write(nb, src / "notebooks" / p.name)
        files.append(File(f"notebooks/{p.name}", str(src), config["site_dir"],
                          config["use_directory_urls"]))
    return files
