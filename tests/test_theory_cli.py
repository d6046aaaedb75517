"""`rope-ref bound` and `rope-ref plot`, run as a user would."""

from __future__ import annotations

import io
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rope_ref.cli import main
from rope_ref.cli.progress import Progress

PNG = b"\x89PNG\r\n\x1a\n"


def worst(dim, length, base):
    theta = base ** (-2.0 * np.arange(dim // 2) / dim)
    m = np.arange(length + 1, dtype=np.float64)
    return float(np.cos(np.multiply.outer(m, theta)).sum(axis=1).min())


def test_bound_prints_a_table_in_the_order_given(capsys):
    assert main(["bound", "--dim", "32", "--context", "300", "--context", "100"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split() == ["context", "length", "smallest", "base"]
    assert set(lines[1]) == {"─"}
    assert lines[-1].startswith("d = 32;")
    rows = [line.split() for line in lines[2:-1]]
    assert [r[0] for r in rows] == ["300", "100"]
    assert all(re.fullmatch(r"\d{1,3}(,\d{3})*\.\d", r[1]) for r in rows)  # one format
    for length, row in ((300, rows[0]), (100, rows[1])):
        # rounded up to one decimal: the printed base passes, one unit below fails
        value = float(row[1].replace(",", ""))
        assert worst(32, length, value) >= 0
        assert worst(32, length, value - 0.1) < 0


def test_bound_reports_an_impossible_request(capsys):
    assert main(["bound", "--dim", "2", "--context", "10"]) == 2
    assert "no base works" in capsys.readouterr().err


def test_bound_needs_a_context(capsys):
    with pytest.raises(SystemExit):
        main(["bound", "--dim", "64"])


@pytest.mark.parametrize("figure", ["decay", "discrimination", "wavelengths"])
def test_plot_writes_a_png(tmp_path, capsys, figure):
    out = tmp_path / f"{figure}.png"
    assert main(["plot", figure, "--out", str(out), "--dim", "64"]) == 0
    assert out.read_bytes().startswith(PNG)
    assert str(out) in capsys.readouterr().out


def test_plot_bound_writes_a_png(tmp_path, monkeypatch):
    from rope_ref.analysis import _plots

    monkeypatch.setattr(_plots, "BOUND_CONTEXTS", (64, 128, 256))
    out = tmp_path / "bound.png"
    assert main(["plot", "bound", "--out", str(out), "--dim", "32"]) == 0
    assert out.read_bytes().startswith(PNG)


def test_plot_without_matplotlib_names_the_extra(tmp_path, monkeypatch, capsys):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delitem(sys.modules, "rope_ref.analysis._plots", raising=False)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    out = tmp_path / "x.png"
    assert main(["plot", "decay", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "matplotlib" in err
    assert "rope-ref[plot]" in err
    assert not out.exists()


def test_plot_rejects_a_bad_dim(tmp_path, capsys):
    assert main(["plot", "decay", "--out", str(tmp_path / "x.png"), "--dim", "7"]) == 2
    assert "--dim must be even" in capsys.readouterr().err


def test_plot_rejects_an_unknown_figure(tmp_path):
    with pytest.raises(SystemExit):
        main(["plot", "spectrum", "--out", str(tmp_path / "x.png")])


def test_progress_on_a_terminal_draws_a_bar_with_times():
    stream = io.StringIO()
    with Progress("job", total=4, stream=stream, terminal=True) as bar:
        bar.update(2, detail="half")
    text = stream.getvalue()
    assert "job" in text
    assert "50%" in text or "100%" in text
    assert "half" in text
    assert re.search(r"\d:\d\d:\d\d", text)  # elapsed, h:mm:ss


def test_progress_off_a_terminal_prints_periodic_lines_with_an_estimate(monkeypatch):
    clock = iter([0.0, 500.0, 1200.0, 2000.0, 3000.0])
    monkeypatch.setattr("rope_ref.cli.progress.time.monotonic", lambda: next(clock))
    stream = io.StringIO()
    with Progress("job", total=4, stream=stream, interval=1000.0) as bar:
        bar.update(1, detail="a")  # 500 s: too soon for a line
        bar.update(2, detail="b")  # 1200 s: a line, half done, about as long left
        bar.update(3, detail="c")  # 2000 s: too soon after the last line
    lines = stream.getvalue().splitlines()
    assert lines == [
        "job: 50% (elapsed 20 min 00 s, about 20 min 00 s left) b",
        "job: 75% (elapsed 50 min 00 s, about 16 min 40 s left) c",
    ]


def test_progress_off_a_terminal_speaks_while_a_step_takes_long():
    stream = io.StringIO()
    with Progress("job", total=2, stream=stream, interval=0.2) as bar:
        bar.update(1, detail="one slow step")
        time.sleep(0.7)  # no update meanwhile: the timer writes the lines
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 3
    assert all(line.startswith("job: 50% (elapsed") for line in lines[:-1])


def test_progress_of_unknown_total_gives_the_elapsed_time(monkeypatch):
    stream = io.StringIO()
    with Progress("job", total=None, stream=stream) as bar:
        bar.advance(detail="one")
    assert re.fullmatch(r"job: \(elapsed \d+ s\) done\n", stream.getvalue())


def test_bound_piped_reports_progress_on_stderr(capsys):
    assert main(["bound", "--dim", "32", "--context", "300"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"rope-ref bound: 100% \(elapsed \d+ s\) done", err)


def test_bound_search_reports_growing_shares_of_its_work():
    from rope_ref.analysis import _bound

    shares: list[float] = []
    _bound.smallest_feasible_log_base(40, 5000, lambda _, share: shares.append(share))
    assert shares[0] == 0.0
    assert 0.3 < shares[len(shares) // 2] < 1.0  # it moves during the search, not at its end
    assert shares == sorted(shares)


def test_bound_json(capsys):
    import json

    assert main(["bound", "--dim", "32", "--context", "100", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["dim"] == 32
    (row,) = report["bounds"]
    assert row["context_length"] == 100
    assert worst(32, 100, row["smallest_base"]) >= 0


# --- bad input: a one-line error and exit status 2, before any work ----------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bound", "--context", "1000000000"], "--context must be at most 4,194,304 for dim = 128"),
        (["bound", "--context", "-3"], "--context must be at least 0; got -3."),
        (["bound", "--dim", str(2**40), "--context", "10"], "--dim must be at most 1024"),
        (["bound", "--dim", "7", "--context", "10"], "--dim must be even; got 7."),
        (["bound", "--context", "100", "--context", str(10**9)], "--context must be at most"),
        (["plot", "decay", "--dim", str(2**40), "--out", "{tmp}/x.png"], "--dim must be at most"),
        (["plot", "bound", "--dim", "2048", "--out", "{tmp}/x.png"], "--dim must be at most 1024"),
        (["plot", "decay", "--out", "/nonexistent/d/f.png"], "--out must be in an existing"),
        (["plot", "decay", "--out", "{tmp}/figure"], "--out must end in an image format"),
        (["plot", "decay", "--out", "{tmp}/figure.xyz"], "--out must end in an image format"),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_status_2(tmp_path, capsys, monkeypatch, argv, message):
    from rope_ref import analysis
    from rope_ref.analysis import _plots

    def started(*args, **kwargs):
        pytest.fail("the search or the drawing started before the input was refused")

    monkeypatch.setattr(analysis, "base_lower_bound", started)
    monkeypatch.setattr("rope_ref.analysis._bound.smallest_feasible_log_base", started)
    monkeypatch.setattr(_plots, "bound_figure", started)
    monkeypatch.setattr(_plots, "FIGURES", dict.fromkeys(_plots.FIGURES, started))
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"rope-ref {argv[0]}: error: ")
    assert message in captured.err
    assert "Traceback" not in captured.err
    assert list(tmp_path.iterdir()) == []


def test_a_dim_that_is_not_an_integer_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["bound", "--dim", "2**40", "--context", "10"])
    assert exit_info.value.code == 2
    assert "invalid int value: '2**40'" in capsys.readouterr().err


def test_plot_into_a_directory_writes_the_figure_there(tmp_path, capsys):
    assert main(["plot", "wavelengths", "--out", str(tmp_path), "--dim", "16"]) == 0
    out = tmp_path / "wavelengths.png"
    assert out.read_bytes().startswith(PNG)
    assert capsys.readouterr().out.strip() == str(out)
    assert not (tmp_path.parent / f"{tmp_path.name}.png").exists()


def test_plot_other_formats_by_extension(tmp_path):
    out = tmp_path / "decay.svg"
    assert main(["plot", "decay", "--out", str(out), "--dim", "16"]) == 0
    assert out.read_text().lstrip().startswith("<?xml")


def test_plot_reports_a_file_it_cannot_write(capsys):
    if not Path("/proc/self").is_dir():
        pytest.skip("needs /proc, a directory in which no file can be created")
    assert main(["plot", "decay", "--out", "/proc/rope-ref.png", "--dim", "16"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rope-ref plot: error: cannot write '/proc/rope-ref.png': ")
    assert "Traceback" not in err


def _drawn(monkeypatch, draw):
    """The matplotlib figure that `draw(path)` saves."""
    from rope_ref.analysis import _plots

    saved = []
    monkeypatch.setattr(_plots, "_save", lambda fig, path: saved.append(fig))
    draw(Path("unused.png"))
    return saved[0]


def test_discrimination_lines_differ_in_colour_and_style(monkeypatch):
    from rope_ref.analysis import _plots

    fig = _drawn(monkeypatch, lambda p: _plots.discrimination_figure(p, dim=32))
    lines = [ln for ln in fig.axes[0].get_lines() if ln.get_label().startswith("base")]
    assert len(lines) == len(_plots.DISCRIMINATION_BASES)
    assert len({ln.get_color() for ln in lines}) == len(lines)
    assert len({str(ln.get_linestyle()) for ln in lines}) == len(lines)


def test_bound_labels_sit_clear_of_the_curve_and_inside_the_axes(monkeypatch):
    from rope_ref.analysis import _plots

    monkeypatch.setattr(_plots, "BOUND_CONTEXTS", (64, 128, 256, 512, 1024))
    fig = _drawn(monkeypatch, lambda p: _plots.bound_figure(p, dim=32))
    ax = fig.axes[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    (curve,) = [ln for ln in ax.get_lines() if ln.get_label() == "smallest base (exact)"]
    points = ax.transData.transform(curve.get_xydata())
    labels = [t for t in ax.texts if t.get_text()]
    assert labels
    for label in labels:
        box = label.get_window_extent(renderer)
        assert frame.x0 <= box.x0, label.get_text()
        assert box.x1 <= frame.x1, label.get_text()
        assert frame.y0 <= box.y0, label.get_text()
        assert box.y1 <= frame.y1, label.get_text()
        assert not any(box.contains(x, y) for x, y in points), label.get_text()


def test_bound_of_context_zero_is_base_one(capsys):
    # m = 0 is the only distance: B_0 = d/2 > 0 whatever the base, so every base works
    assert worst(128, 0, 1.0) > 0
    assert main(["bound", "--context", "0", "--context", "1"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.strip().splitlines()[2:-1]]
    assert rows == [["0", "1.0"], ["1", "1.0"]]
    assert main(["bound", "--context", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bounds"] == [
        {"context_length": 0, "smallest_base": 1.0}
    ]


@pytest.mark.parametrize("tail", ["{}.png", "{}/decay.png", "{}/"])
def test_plot_out_with_a_name_too_long_is_a_usage_error(tmp_path, capsys, tail):
    out = str(tmp_path / tail.format("a" * 300))
    assert main(["plot", "decay", "--out", out]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rope-ref plot: error: --out")
    assert "too long" in err
    assert len(err.strip().splitlines()) == 1


def test_base_lower_bound_of_context_zero_reports_progress():
    from rope_ref.analysis import base_lower_bound

    shares: list[float] = []
    assert base_lower_bound(64, 0, progress=shares.append) == 1.0
    assert all(0.0 <= share <= 1.0 for share in shares)


def test_plot_out_naming_a_fifo_is_a_usage_error(tmp_path, capsys):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    fifo = tmp_path / "decay.png"
    os.mkfifo(fifo)  # writing would wait for a reader forever
    started = time.monotonic()
    assert main(["plot", "decay", "--out", str(fifo)]) == 2
    assert time.monotonic() - started < 30
    err = capsys.readouterr().err
    assert err.startswith("rope-ref plot: error: --out must name a regular file")
