"""td.explore in a real browser: headless Chromium (Debian's, driven by Playwright; no
browser is downloaded) opens JupyterLab on a notebook, runs it, moves a control of
td.explore's widget and sees the time and the loop nest change. A screenshot of each
state goes to $TDSL_CI_LOGS (.ci/run sets it; else the test's temporary directory)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Chromium on a machine with no network, no display and no GPU, run as root: a fresh
# profile each time, nothing that phones home
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
LOAD_SECONDS = 180  # JupyterLab's first start builds nothing, but a busy machine is slow

NOTEBOOK = [
    "import numpy as np\nimport tdsl as td\n"
    "i, j, k = td.dims('i j k')\n"
    "A = td.input('A', {i: 64, k: 32}, td.float32)\n"
    "B = td.input('B', {k: 32, j: 48}, td.float32)\n"
    "C = td.compute('C', {i: 64, j: 48}, td.sum(A[i, k] * B[k, j], over=k))\n"
    "a = np.ones((64, 32), np.float32)\nb = np.ones((32, 48), np.float32)",
    "t = (td.schedule(C).tile(C, i=td.knob('ti', [4, 8, 16]), j=16).vectorize(C, 'j_i')\n"
    "       .parallel(C, td.knob('par', [None, 'i_o'])))\n"
    "td.explore(t, A=a, B=b)",
]


def _missing() -> str | None:
    if not os.path.exists(CHROMIUM):
        return "chromium is not installed (apt-get install chromium)"
    for module in ("playwright", "jupyterlab"):
        try:
            __import__(module)
        except ImportError:
            return f"{module} is not installed (pip install -e '.[dev]')"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def logs(tmp_path) -> Path:
    out = Path(os.environ.get("TDSL_CI_LOGS") or tmp_path / "logs")
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """A JupyterLab server on a free port of 127.0.0.1 serving tmp_path/work, with the
    app exposed to the page's scripts; yields its URL and token."""
    why = _missing()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"the browser test cannot run in CI: {why}")
        pytest.skip(why)
    work = tmp_path / "work"
    work.mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in NOTEBOOK])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    # executed and saved, as the notebooks the suite runs are: the page first shows the
    # saved outputs, with no widget state behind them (the python3 kernel is this
    # environment's, as in test_notebooks.py)
    import nbclient

    monkeypatch.setenv("JUPYTER_PREFER_ENV_PATH", "1")
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=300).execute()
    nbformat.write(nb, work / "explore.ipynb")
    port, token = _free_port(), "tdsl-browser-test"
    env = {**os.environ, "JUPYTER_PREFER_ENV_PATH": "1", "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "run"), "HOME": str(tmp_path)}
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}", "--ip=127.0.0.1",
         f"--IdentityProvider.token={token}", "--LabApp.expose_app_in_browser=True",
         "--ServerApp.disable_check_xsrf=True", f"--ServerApp.root_dir={work}",
         "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        stdout=open(tmp_path / "lab.log", "w"), stderr=subprocess.STDOUT, env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        end = time.monotonic() + LOAD_SECONDS
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > end:
                    pytest.fail("JupyterLab did not start: "
                                + (tmp_path / "lab.log").read_text()[-3000:])
                time.sleep(0.5)
        yield url, token
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _shown(page, selector: str) -> str:
    return page.locator(selector).first.inner_text()


def test_moving_an_explore_control_in_jupyterlab_changes_the_time_and_the_nest(lab, logs,
                                                                               tmp_path):
    from playwright.sync_api import expect, sync_playwright

    url, token = lab
    with sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1280, "height": 1400})
        try:
            page = browser.new_page()
            page.set_default_timeout(LOAD_SECONDS * 1000)
            page.goto(f"{url}/lab/tree/explore.ipynb?token={token}")
            page.wait_for_function("window.jupyterapp && window.jupyterapp.shell"
                                   " && document.querySelector('.jp-Notebook')")
            saved = page.locator(".jp-OutputArea-output").last
            expect(saved).to_contain_text("snapshot")  # the saved output: no raw VBox text
            expect(saved).to_contain_text("per call")
            assert "VBox(children" not in saved.inner_text()
            page.screenshot(path=str(logs / "explore-saved.png"), full_page=True)
            # the kernel: started by the notebook's panel; run every cell once it is idle
            page.wait_for_function(
                "(() => { const w = window.jupyterapp.shell.currentWidget;"
                " return w && w.sessionContext && w.sessionContext.session"
                " && w.sessionContext.session.kernel"
                " && w.sessionContext.session.kernel.status === 'idle'; })()")
            page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
            box = page.locator(".jp-OutputArea-output .widget-vbox").first
            expect(box).to_contain_text("per call")
            expect(box).to_contain_text("for i_i in 0 .. 4:")
            page.screenshot(path=str(logs / "explore-before.png"), full_page=True)
            before = box.inner_text()
            par = box.locator("select").first
            assert par.locator("option").all_inner_texts() == ["None", "'i_o'"]
            # the ti slider: focus its handle and step it right, as a keyboard user would
            handle = box.locator(".noUi-handle").first
            handle.focus()
            page.keyboard.press("ArrowRight")
            expect(box).to_contain_text("for i_i in 0 .. 8:")
            par.select_option(label="'i_o'")
            expect(box).to_contain_text("# parallel")
            after = box.inner_text()
            page.screenshot(path=str(logs / "explore-after.png"), full_page=True)
            # JupyterLab's dark theme: the nest keeps its own light background
            page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme',"
                          " {theme: 'JupyterLab Dark'})")
            page.wait_for_function("document.body.dataset.jpThemeLight === 'false'")
            page.wait_for_selector("#jupyterlab-splash", state="detached")
            code = box.locator("pre").last
            background, *colours = code.evaluate(
                "e => [getComputedStyle(e).backgroundColor, getComputedStyle(e).color,"
                " ...[...e.querySelectorAll('span')].filter(s => s.textContent.trim())"
                ".map(s => getComputedStyle(s).color)]")
            page.screenshot(path=str(logs / "explore-dark.png"), full_page=True)
        finally:
            browser.close()
    times = [re.search(r"([\d.]+ [mu]?s) per call", t) for t in (before, after)]
    assert all(times), (before, after)
    assert "for i_i in 0 .. 4:" in before and "parallel" not in before
    assert "for i_i in 0 .. 8:" in after and "# parallel" in after
    assert (logs / "explore-after.png").stat().st_size > 10_000
    assert background == "rgb(248, 248, 248)" and len(set(colours)) >= 3
    for colour in set(colours):  # every colour shown reads on that background (WCAG 4.5:1)
        assert _contrast(colour, background) >= 4.5, (colour, background)


def _luminance(css: str) -> float:
    rgb = [int(v) / 255 for v in re.findall(r"\d+", css)[:3]]
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def _contrast(a: str, b: str) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)
