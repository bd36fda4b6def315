"""The `tdsl` command line: `tdsl demo --quick` checks every kernel against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import tdsl as td
from tdsl import cli


def table_rows(text: str) -> dict[str, list[str]]:
    """The demo table's data rows, by kernel name, as lists of cells."""
    lines = text.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("kernel "))
    header = [c.strip() for c in lines[start].split("|")]
    assert header == list(cli.COLUMNS)
    rows = {}
    for line in lines[start + 2 :]:
        if not line.strip():
            break
        cells = [c.strip() for c in line.split("|")]
        rows[cells[0]] = cells
    return rows


def run_demo(capsys, *args: str) -> tuple[int, str, str]:
    status = cli.main(["demo", "--quick", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_demo_quick_checks_every_kernel(capsys, backend):
    status, out, err = run_demo(capsys, "--target", backend)
    assert status == 0, err
    rows = table_rows(out)
    assert set(rows) == {k.name for k in cli.demo_kernels(quick=True)}
    check = cli.COLUMNS.index("check")
    for name, cells in rows.items():
        assert cells[check] == "ok", f"{name}: {cells}"
        assert cells[cli.COLUMNS.index("speedup")].endswith("x")


def test_demo_fails_when_a_result_is_wrong(capsys, monkeypatch):
    right_blur = cli.blur_reference

    def wrong_blur(inp):
        out = right_blur(inp)
        out[len(out) // 2, 3] += 1
        return out

    monkeypatch.setattr(cli, "blur_reference", wrong_blur)
    status, out, err = run_demo(capsys, "--runs", "1")
    assert status == 1
    rows = table_rows(out)
    check = cli.COLUMNS.index("check")
    assert rows["blur 3x3"][check] == "WRONG"
    assert rows["matmul"][check] == "ok"
    assert "blur 3x3: the tdsl result does not match numpy" in err
    assert "Mismatched elements: 1 /" in err


def test_demo_reports_tdsl_errors_without_a_traceback(capsys, monkeypatch):
    def bad_kernels(quick):
        import tdsl as td

        x = td.dim("x")
        a = td.input("a", {x: 8}, td.float32)
        b = td.compute("b", {x: 8}, a[x] + 1)
        td.schedule(b).vectorize(b, "nope")  # raises ScheduleError

    monkeypatch.setattr(cli, "demo_kernels", bad_kernels)
    status, _, err = run_demo(capsys)
    assert status == 2
    assert err.startswith("error: ScheduleError:")


def test_table_aligns_columns():
    rows = [("a", "1x1", "1", "2.00", "3.00", "1.0 GB/s", "1.0 GB/s", "1.50x", "ok")]
    lines = cli.format_table(rows).splitlines()
    assert len(lines) == 3
    assert len({line.index("|") for line in lines[::2]}) == 1


def test_time_numpy_uses_the_median():
    t = cli.time_numpy(lambda: np.zeros(10), runs=5, warmup=0)
    assert t.runs == len(t.times) == 5
    assert t.min <= t.median


def test_runs_must_be_positive(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["demo", "--runs", "0"])
    assert exc.value.code == 2
    assert "argument --runs: must be at least 1, not 0" in capsys.readouterr().err


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"tdsl {td.__version__}"
