"""Every code block of README.md and docs/*.md runs as written.

Per page, in order, in one namespace and a fresh working directory:

- a ```python block is executed; when the next block (blank lines between) is a
  ```text block, that is the block's expected output: its stdout, and for a block
  that raises a TdslError, `Name: message` after it. `...` in the expected text
  stands for anything (times, machine-dependent choices); trailing blanks do not
  count. A block that raises with no expected output fails.
- a ```sh block runs in bash, `.venv/bin/` meaning this interpreter's bin directory,
  with `examples/`, `benchmarks/` and `notebooks/` of the repository at hand.
- a block preceded by `<!-- not run: reason -->` is not run; the reason is required,
  and the list of such blocks is printed by this module's last test.

Other blocks (```text and plain ``` illustrations) are not code. What each block
printed goes to $TDSL_CI_LOGS/docs-examples.txt when that is set.

docs/results.md is not a guide but the log of past benchmark runs: its commands record
what was run (runs of 11 to 18 minutes with Halide and TVM), and
docs/performance.md's reproduction command is the one to follow.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest

import tdsl as td

ROOT = Path(__file__).resolve().parents[2]
LOG_OF_RUNS = ROOT / "docs" / "results.md"
PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p != LOG_OF_RUNS)]
RUN = {"python", "sh"}
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)\s*$")
NOT_RUN = re.compile(r"<!--\s*not run:\s*(?P<why>.*?)\s*-->", re.S)
SH_SECONDS = 600


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    not_run: str | None  # the reason, when marked
    expected: str | None = None  # the text block that follows a python block


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page, each python block with its expected output."""
    lines = page.read_text().splitlines()
    out: list[Block] = []
    n = 0
    while n < len(lines):
        m = FENCE.match(lines[n])
        if not m:
            n += 1
            continue
        indent, lang, start = m["indent"], m["lang"], n
        body = []
        n += 1
        while n < len(lines) and lines[n].strip() != "```":
            body.append(lines[n][len(indent):] if lines[n].startswith(indent) else lines[n])
            n += 1
        before = "\n".join(lines[max(0, start - 3):start])
        why = NOT_RUN.search(before)
        out.append(Block(page, start + 1, lang, "\n".join(body) + "\n",
                         why["why"] if why else None))
        n += 1
    for a, b in zip(out, out[1:]):
        between = lines[a.line + a.text.count("\n") + 1:b.line - 1]  # after the closing fence
        if a.lang == "python" and b.lang == "text" and not any(x.strip() for x in between):
            a.expected = b.text
    return out


def matches(expected: str, got: str) -> bool:
    """`got` is `expected`, with `...` standing for any text and trailing blanks ignored."""
    def norm(s: str) -> str:
        return "\n".join(line.rstrip() for line in s.strip("\n").splitlines())

    parts = [re.escape(p) for p in norm(expected).split("...")]
    return re.fullmatch(".*?".join(parts), norm(got), re.S) is not None


def _log(block: Block, printed: str) -> None:
    out = os.environ.get("TDSL_CI_LOGS")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        with open(Path(out) / "docs-examples.txt", "a") as f:
            f.write(f"==> {block.page.relative_to(ROOT)}:{block.line} ({block.lang})\n"
                    f"{printed.rstrip()}\n")


def _run_python(block: Block, namespace: dict) -> str:
    stdout = io.StringIO()
    try:
        code = compile(block.text, f"{block.page.name}:{block.line}", "exec")
        with contextlib.redirect_stdout(stdout):
            exec(code, namespace)  # noqa: S102 - the documentation's own examples
    except td.TdslError as e:
        if block.expected is None:
            pytest.fail(f"{block.page.name}:{block.line} raised\n{traceback.format_exc()}")
        stdout.write(f"{type(e).__name__}: {e}\n")
    except Exception:  # noqa: BLE001 - report which block, with its traceback
        pytest.fail(f"{block.page.name}:{block.line} raised\n{traceback.format_exc()}")
    return stdout.getvalue()


def _run_sh(block: Block, cwd: Path) -> str:
    for name in ("examples", "benchmarks", "notebooks"):
        link = cwd / name
        if not link.exists():
            link.symlink_to(ROOT / name)
    script = block.text.replace(".venv/bin/", f"{Path(sys.executable).parent}/")
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, text=True,
                          capture_output=True, timeout=SH_SECONDS, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, (f"{block.page.name}:{block.line} exited {done.returncode}\n"
                                  f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_code_block_of_the_page_runs_as_written(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    ran = 0
    for block in blocks(page):
        if block.lang not in RUN or block.not_run is not None:
            continue
        printed = _run_python(block, namespace) if block.lang == "python" else \
            _run_sh(block, tmp_path)
        _log(block, printed)
        ran += 1
        if block.expected is not None:
            assert matches(block.expected, printed), (
                f"{page.name}:{block.line} printed\n{printed}\nbut the page shows\n"
                f"{block.expected}")
    if page.name == "README.md":
        assert ran >= 1, "README.md's example must run"


def test_blocks_not_run_say_why_and_are_few():
    """Blocks the suite cannot run as written (installs, campaigns of minutes) are
    marked with their reason; this lists them, and keeps them few."""
    skipped = [(b.page.relative_to(ROOT), b.line, b.not_run) for p in PAGES
               for b in blocks(p) if b.lang in RUN and b.not_run is not None]
    for page, line, why in skipped:
        assert len(why) > 20, f"{page}:{line}: say why the block is not run"
        print(f"{page}:{line}: not run: {why}")
    assert len(skipped) <= 4, skipped
    languages = {b.lang for p in PAGES for b in blocks(p)}
    assert languages <= RUN | {"text", ""}, f"a block in a language no test runs: {languages}"


def test_the_output_matcher():
    assert matches("a ... b\nc", "a 1.0 ms x b\nc  \n")
    assert not matches("a ... b", "a 1 c")
    assert matches("x\n...\n", "x\ny\nz")
