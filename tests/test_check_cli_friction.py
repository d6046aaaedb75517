"""`rope-ref check` conveniences: a pasteable reproducer on failure, JAX arrays, and a
stated position dtype for targets that round their own grid."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rope_ref.cli import main
from tests._helpers import REPO, run_check

TARGETS = "tests.check_targets"


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    monkeypatch.chdir(REPO)


_check = run_check


def _snippet(out: str) -> str:
    lines = out.split("  reproduce it (paste into Python, from the directory you ran this in):\n")
    assert len(lines) == 2, out
    return "\n".join(line.removeprefix("    ") for line in lines[1].splitlines())


@pytest.mark.parametrize(
    ("target", "args", "raised"),
    [
        ("spec_driven_sign_flipped", ["--base", "500000"], "Likely cause: direction"),
        ("no_attention_factor", ["--attention-factor", "1.25"], "RoPE result differs"),
    ],
)
def test_a_failing_check_prints_a_reproducer_that_fails_the_same_way(capsys, target, args, raised):
    status, out = _check(capsys, f"{TARGETS}:{target}", *args)
    assert status == 1, out
    snippet = _snippet(out)
    run = subprocess.run(
        [sys.executable, "-"], input=snippet, capture_output=True, text=True, cwd=REPO, check=False
    )
    assert run.returncode == 1, snippet + run.stdout + run.stderr
    assert "AssertionError" in run.stderr
    assert raised in run.stderr


def test_jax_arrays(capsys):
    pytest.importorskip("jax")
    status, out = _check(capsys, f"{TARGETS}:jax_half", "--array", "jax")
    assert status == 0, out
    assert "calling: jax arrays" in out
    argv = [f"{TARGETS}:jax_half", "--array", "jax", "--dtype", "float64", "--convention", "plain"]
    status = main(["check", *argv])
    assert status == 2
    assert "needs JAX_ENABLE_X64=1" in capsys.readouterr().err  # a usage error: stderr


def test_a_stated_position_dtype_widens_the_model_only_as_far_as_it_can_check(capsys):
    argv = [f"{TARGETS}:float16_positions", "--max-position", "4096"]
    status, out = _check(capsys, *argv)
    assert status == 1, out
    assert "diagnosis: precision\n" in out
    status, out = _check(capsys, *argv, "--position-dtype", "float16")
    assert status == 1, out
    assert "diagnosis: not_checkable\n" in out  # float16 positions to 4096: +-8 tokens
    status, out = _check(capsys, *argv[:1], "--max-position", "200", "--position-dtype", "float16")
    assert status == 0, out


@pytest.mark.parametrize(
    ("target", "convention", "extra"),
    [
        ("litgpt_apply_rope", "full", []),
        ("litgpt_apply_rope", "full", ["--positions", "rows", "--rotary-dim", "32"]),
        ("megatron_apply_rotary_pos_emb", "freqs", ["--rotary-dim", "32"]),
    ],
)
def test_full_width_table_conventions(capsys, target, convention, extra):
    pytest.importorskip("torch")
    argv = [f"{TARGETS}:{target}", *extra]
    status = main(["check", *argv, "--convention", convention, "--examples", "10"])
    out = capsys.readouterr().out
    if convention == "full" and "--rotary-dim" in extra:
        assert status == 1, out  # litgpt slices the rotated part off before the call
        assert "FAIL: the checked function raised RuntimeError" in out
        return
    assert status == 0, out
    assert "OK: conformant on 10 examples" in out


def test_a_table_of_the_other_layout_through_the_freqs_convention(capsys):
    pytest.importorskip("torch")
    argv = [f"{TARGETS}:megatron_interleaved_rotation", "--convention", "freqs"]
    status = main(["check", *argv, "--examples", "10"])
    out = capsys.readouterr().out
    assert status == 1, out
    assert "diagnosis: table_layout\n" in out
    assert "built for the 'half' layout" in out
    assert "applied with the 'interleaved' rotation" in out
