"""The `rope-ref` command line, run as a user would."""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rope_ref.cli import main


def test_verify_passes_and_reports_every_check(capsys):
    assert main(["verify"]) == 0
    out = capsys.readouterr().out
    assert "0 failed" in out
    for check in (
        "position 0 is identity",
        "relative position",
        "inverse undoes",
        "form matrix = rotate_half",
        "layouts commute",
        "partial rotary pass-through",
    ):
        assert check in out


def test_verify_says_what_it_tested_and_counts_its_skips(monkeypatch, capsys):
    """The minimal install: NumPy only, no numba; the summary counts every skip."""
    from rope_ref.cli import verify

    real_namespace = verify._namespace
    monkeypatch.setattr(verify, "_namespace", lambda n: real_namespace(n) if n == "numpy" else None)
    missing = {"numba": "needs 'numba'", "cupy": "needs 'cupy'"}
    monkeypatch.setattr(verify, "available_backends", lambda: {"reference": None, **missing})
    assert main(["verify"]) == 0
    out = capsys.readouterr().out
    assert "RopeSpec(head_dim=128): base 10000, layout 'half'" in out
    assert f"positions {verify.OFFSET}..{verify.OFFSET + verify.SEQ - 1}" in out
    assert "error model:" in out
    others = len(verify.NAMESPACES) - 1
    skip_lines = [line for line in out.splitlines() if line.startswith("skipped:")]
    assert len(skip_lines) == 3  # the namespaces on one line, then each backend
    assert all(name in skip_lines[0] for name in verify.NAMESPACES if name != "numpy")
    numpy_checks = sum(" ok" in line for line in out.splitlines() if line.startswith("numpy"))
    assert f"{numpy_checks} passed, 0 failed; skipped {others} namespace(s) and 2 backend(s)" in out


def test_verify_error_model_line_is_the_tolerance_it_applies():
    """The formula printed for people is the one the checks use."""
    import numpy as np

    from rope_ref._core.error_model import tolerance
    from rope_ref.cli.verify import OFFSET, SEQ, SHIFT, describe_setup

    assert "2 eps(dtype) + 4 eps(float64) * (|angle|max + 1)" in describe_setup()["error model"]
    top = OFFSET + SEQ - 1 + SHIFT
    assert f"{top} rad" in describe_setup()["error model"]
    eps32, eps64 = float(np.finfo(np.float32).eps), float(np.finfo(np.float64).eps)
    for magnitude in (1.0, 3.7):
        printed = magnitude * (2 * eps32 + 4 * eps64 * (top + 1))
        assert tolerance(eps32, max_angle=top, magnitude=magnitude) == pytest.approx(printed)


def test_verify_json_lists_numpy_checks(capsys):
    assert main(["verify", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["setup"]) == {"spec", "inputs", "error model"}
    numpy_checks = [c for c in report["checks"] if c["namespace"] == "numpy"]
    assert {c["dtype"] for c in numpy_checks} == {"float32", "float64"}
    assert all(c["passed"] and c["error"] <= c["tolerance"] for c in report["checks"])


def test_verify_fails_when_a_check_fails(monkeypatch, capsys):
    from rope_ref._core.error_model import tolerance

    monkeypatch.setattr("rope_ref.cli.verify.tolerance", lambda *a, **k: -1.0 * tolerance(*a, **k))
    assert main(["verify"]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_example_prints_the_correct_numbers(capsys):
    assert main(["example"]) == 0
    out = capsys.readouterr().out
    # pos 1: [0, 1, 0, 1] rotates to [-sin 1, cos 1, -sin 0.01, cos 0.01]
    row = [-math.sin(1), math.cos(1), -math.sin(0.01), math.cos(0.01)]
    assert "[" + ", ".join(f"{v: .6f}" for v in row) + "]" in out
    # sinusoidal PE at pos 3: [sin 3, cos 3, sin 0.03, cos 0.03]
    pe = [math.sin(3), math.cos(3), math.sin(0.03), math.cos(0.03)]
    assert "[" + ", ".join(f"{v: .6f}" for v in pe) + "]" in out
    # the closing notes state true values and name no outside source
    assert f"[{-math.sin(1):.6f}, {math.cos(1):.6f}]" in out
    assert f"sin(0.03) = {math.sin(0.03):.6f}" in out
    assert "source" not in out


def test_console_script_is_installed():
    exe = shutil.which("rope-ref")
    if exe is None:
        pytest.skip("rope-ref is not on PATH (package not installed)")
    result = subprocess.run([exe, "--help"], capture_output=True, text=True, check=True)
    assert "verify" in result.stdout
    bad = subprocess.run([exe, "frobnicate"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2
    assert "unknown command 'frobnicate'" in bad.stderr


@pytest.mark.parametrize("module", ["rope_ref", "rope_ref.cli"])
def test_module_entry_point(module):
    result = subprocess.run(
        [sys.executable, "-m", module, "example"], capture_output=True, text=True, check=True
    )
    assert "RoPE" in result.stdout


def test_version_is_the_package_version(capsys):
    import rope_ref

    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"rope-ref {rope_ref.__version__}"


def _parsers():
    from rope_ref.cli import build_parser

    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return parser, commands


def test_every_subcommand_and_option_has_help():
    parser, commands = _parsers()
    described = {a.dest: a.help for a in commands._choices_actions}
    assert set(described) == set(commands.choices)
    for name, sub in [("rope-ref", parser), *commands.choices.items()]:
        assert name == "rope-ref" or described[name], name
        assert sub.description, f"{name} has no description"
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            assert action.help, (name, action.dest)
            assert action.help != argparse.SUPPRESS, (name, action.dest)


@pytest.mark.parametrize(
    ("argv", "named", "suggested", "usage"),
    [
        (["verify", "--jsn"], "--jsn", "--json", "usage: rope-ref verify"),
        (["bound", "--contxt", "100"], "--contxt", "--context", "usage: rope-ref bound"),
        (["bench", "--rouns", "3"], "--rouns", "--rounds", "usage: rope-ref bench"),
        (["survey", "--jsno"], "--jsno", "--json", "usage: rope-ref survey"),
        (["verfy"], "'verfy'", "verify", "usage: rope-ref [-h]"),
    ],
)
def test_a_mistyped_word_is_named_with_the_nearest_one(argv, named, suggested, usage, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert named in err
    assert f"did you mean {suggested}?" in err
    assert usage in err


def test_an_unknown_option_far_from_all_lists_the_choices(capsys):
    with pytest.raises(SystemExit):
        main(["verify", "--zzzzzz"])
    assert "choose from --help, --json" in capsys.readouterr().err


def test_unique_abbreviations_still_parse(capsys):
    assert main(["bound", "--cont", "100"]) == 0  # argparse's unique prefixes
    assert "229.0" in capsys.readouterr().out


def test_an_interrupted_command_exits_130(monkeypatch, capsys):
    from rope_ref.cli import example

    def interrupted(**options: bool) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(example, "run_example", interrupted)
    assert main(["example"]) == 130
    assert "interrupted" in capsys.readouterr().err


def test_peer_import_notices_are_silenced(tmp_path):
    """torchao's "Failed to load" lines and torch's pytree notice: loggers, not warnings."""
    target = tmp_path / "noisy_peer.py"
    target.write_text(
        "import logging\n"
        "logging.getLogger('torchao').warning('Failed to load _C_mxfp8.so')\n"
        "logging.getLogger('torch.utils._pytree').warning('Enum subclass ... deprecated')\n"
        "logging.getLogger('elsewhere').warning('kept')\n"
    )
    code = (
        "import sys; from rope_ref.cli import main\n"
        "import rope_ref.cli.example as e\n"
        "e.run_example = lambda **options: __import__('noisy_peer') and 0\n"
        "sys.exit(main(['example']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert "Failed to load" not in result.stderr
    assert "deprecated" not in result.stderr
    assert "kept" in result.stderr


@pytest.mark.parametrize("width", [60, 80])
def test_tables_fit_the_terminal_and_wide_keeps_rows_whole(width, monkeypatch, capsys):
    from rope_ref.cli import tables

    def fitted_width(*, wide=False, stream=None):
        return None if wide else width

    monkeypatch.setattr(tables, "table_width", fitted_width)
    assert main(["example"]) == 0
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  3")]
    assert main(["example", "--wide"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in out) > width  # whole rows
    assert all(len(line) <= width for line in table)
    assert table  # the row of position 3, wrapped


def test_fitted_tables_keep_every_value(capsys):
    from rope_ref.cli.tables import Column, format_table

    columns = [Column("a", wrap=True), Column("b", "right")]
    rows = [("alpha beta gamma delta epsilon", "3.14")]
    lines = format_table(columns, rows, width=16)
    assert max(len(line) for line in lines) <= 16
    words = " ".join(lines).split()
    for word in ("alpha", "beta", "gamma", "delta", "epsilon", "3.14"):
        assert word in words


def test_survey_table_wraps_its_settings_column():
    from rope_ref.cli.survey import table_lines
    from rope_ref.cli.survey.run import Row

    settings = "rope_type=yarn, factor=4.0, original_max_position_embeddings=8192, beta_fast=32"
    rows = [Row("transformers", "5.0", "LlamaRotaryEmbedding", settings, "conformant", 0.27)]
    lines = table_lines(rows, width=70)
    assert max(len(line) for line in lines) <= 70
    assert len(lines) > 3
    assert len(table_lines(rows)) == 3  # unlimited: header, rule, one row


def test_example_json_has_the_numbers(capsys):
    assert main(["example", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sinusoidal_pe"][3][0] == pytest.approx(math.sin(3))
    assert report["rotated"][1][:2] == pytest.approx([-math.sin(1), math.cos(1)])
    scores = {s["score"] for s in report["relative_scores"] if s["n"] - s["m"] == 1}
    assert max(scores) - min(scores) < 1e-12


TARGET = "tests.check_targets:correct_half"


@pytest.mark.parametrize(
    ("options", "line"),
    [
        (["--base", "nan"], "--base must be finite; got nan."),
        (["--rotary-dim", "3"], "--rotary-dim must be even; got 3."),
        (["--rotary-start", "-1"], "--rotary-start must be at least 0; got -1."),
        (["--examples", "0"], "--examples must be between 1 and 1000000; got 0."),
    ],
)
def test_check_usage_errors_go_to_stderr_naming_the_option(
    capsys: pytest.CaptureFixture[str], options: list[str], line: str
) -> None:
    """A bad `rope-ref check` option: exit 2, one line on stderr naming it, stdout empty."""
    status = main(["check", TARGET, "--convention", "plain", *options])
    captured = capsys.readouterr()
    assert status == 2
    assert captured.out == ""
    assert captured.err == f"rope-ref check: error: {line}\n"


def test_check_json_usage_error_names_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    """With --json the usage error is the JSON verdict on stdout, naming --base."""
    import json

    status = main(["check", TARGET, "--convention", "plain", "--json", "--base", "inf"])
    data = json.loads(capsys.readouterr().out)
    assert status == 2
    assert data["verdict"] == "usage_error"
    assert data["error"] == "--base must be finite; got inf."


def test_plot_refuses_an_empty_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--out ''` is a usage error; it used to write decay.png into the current directory."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        main(["plot", "decay", "--out", ""])
    assert stop.value.code == 2
    assert "--out must name a file or a directory; got ''" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
