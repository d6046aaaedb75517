"""`rope-ref check` says what it checked: the axes it was given, one angle error for a
mismatch (the one its reproducer raises), and no read of a config past its limits; and
`assert_rope_close` points at another sequence axis when the result fits it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import types

import numpy as np
import pytest

import rope_ref as rr
from rope_ref.cli import main
from rope_ref.testing import RopeOracle, assert_rope_close, diagnose
from tests._helpers import REPO, run_check

TARGETS = "tests.check_targets"
ANGLE_ERROR = re.compile(r"max angle error ([0-9.e+-]+) rad")


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    monkeypatch.chdir(REPO)


@pytest.mark.parametrize(
    ("axes", "shape"),
    [
        ("bshd", "x (batch, seq, heads, head_dim)"),
        ("sbhd", "x (seq, batch, heads, head_dim)"),
        (None, "x (batch, heads, seq, head_dim)"),
    ],
)
def test_the_header_names_the_axes_the_target_was_called_with(capsys, axes, shape):
    target = "correct_half" if axes is None else f"correct_half_{axes}"
    extra = [] if axes is None else ["--axes", axes]
    status, out = run_check(capsys, f"{TARGETS}:{target}", *extra)
    assert status == 0, out
    header = next(line for line in out.splitlines() if line.startswith("  convention:"))
    assert shape in header, header


def test_a_mismatch_states_the_angle_error_its_reproducer_raises(capsys):
    status, out = run_check(capsys, f"{TARGETS}:float32_angles", "--angle-dtype", "float64")
    assert status == 1, out
    summary = next(line for line in out.splitlines() if line.startswith("  angle precision:"))
    stated = ANGLE_ERROR.search(summary)
    assert stated is not None, summary
    snippet = out.split("from the directory you ran this in):\n")[1]
    code = "\n".join(line.removeprefix("    ") for line in snippet.splitlines())
    run = subprocess.run(
        [sys.executable, "-"], input=code, capture_output=True, text=True, cwd=REPO, check=False
    )
    replayed = ANGLE_ERROR.search(run.stderr)
    assert replayed is not None, run.stderr
    assert float(stated.group(1)) > 0.0
    assert stated.group(1) == replayed.group(1)


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/null"])
def test_a_config_that_is_not_a_regular_file_is_refused_unread(capsys, path):
    status = main(
        ["check", f"{TARGETS}:correct_half", "--convention", "plain", "--hf-config", path]
    )
    err = capsys.readouterr().err
    assert status == 2
    assert "is not a regular file" in err


def test_a_config_past_the_size_limit_is_refused(capsys, tmp_path):
    from rope_ref.cli.check_options import MAX_CONFIG_BYTES

    big = tmp_path / "config.json"
    with big.open("wb") as f:
        f.truncate(MAX_CONFIG_BYTES + 1)
    status = main(
        ["check", f"{TARGETS}:correct_half", "--convention", "plain", "--hf-config", str(big)]
    )
    assert status == 2
    assert "is larger than 16 MiB" in capsys.readouterr().err


def test_the_command_reads_a_config_file_with_the_reader_of_from_hf(capsys, tmp_path, monkeypatch):
    from rope_ref._config import hf_file

    config = tmp_path / "config.json"
    config.write_text(json.dumps({"head_dim": 64, "rope_theta": 10000.0, "padding": "x" * 200}))
    monkeypatch.setattr(hf_file, "MAX_CONFIG_BYTES", 100)  # one limit: the reader's
    with pytest.raises(ValueError, match="too large"):
        rr.RopeSpec.from_hf(config)
    status = main(
        ["check", f"{TARGETS}:correct_half", "--convention", "plain", "--hf-config", str(config)]
    )
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith(f"rope-ref check: error: --hf-config {str(config)!r}: is larger than")


def test_a_config_file_that_is_not_an_object_is_refused_in_the_readers_words(capsys, tmp_path):
    config = tmp_path / "config.json"
    config.write_text("[1, 2]")
    with pytest.raises(ValueError, match="must hold a JSON object; got list") as raised:
        rr.RopeSpec.from_hf(config)
    status = main(
        ["check", f"{TARGETS}:correct_half", "--convention", "plain", "--hf-config", str(config)]
    )
    err = capsys.readouterr().err
    assert status == 2
    assert str(raised.value).replace("`", "") in err


def test_a_result_along_the_other_sequence_axis_gets_the_hint():
    spec = rr.RopeSpec(head_dim=16)
    x = np.random.default_rng(0).standard_normal((2, 6, 3, 16)).astype(np.float32)
    y = rr.apply_rope(x, spec, seq_axis=-3)  # (batch, seq, heads, head_dim)
    with pytest.raises(AssertionError, match=r"Hint: .*pass seq_axis=-3\."):
        assert_rope_close(y, x, spec)
    assert_rope_close(y, x, spec, seq_axis=-3)


def test_no_hint_when_no_other_axis_fits():
    spec = rr.RopeSpec(head_dim=16)
    x = np.random.default_rng(0).standard_normal((2, 6, 3, 16)).astype(np.float32)
    y = rr.apply_rope(x, spec, inverse=True)
    with pytest.raises(AssertionError) as raised:
        assert_rope_close(y, x, spec)
    assert "Hint" not in str(raised.value)


def test_rope_oracle_diagnose_takes_every_keyword_of_the_checker():
    spec = rr.RopeSpec(head_dim=8)
    x = np.random.default_rng(1).standard_normal((5, 8))
    y32 = np.asarray(rr.apply_rope(x, spec)).astype(np.float32)
    oracle = RopeOracle()
    assert oracle.diagnose(y32, x, spec) is not None  # float32 where float64 was asked for
    assert oracle.diagnose(y32, x, spec, dtype="float32") is None
    assert oracle.diagnose(y32, x, spec, rtol=1e-6, atol=1e-6, dtype="float32") is None
    shifted = rr.apply_rope(x, spec, offset=1)
    causes = [
        oracle.diagnose(shifted, x, spec, atol=1e-9),
        oracle.diagnose(shifted, x, spec, position_dtype="float32"),
        diagnose(shifted, x, spec),
    ]
    assert [None if d is None else d.cause for d in causes] == ["offset"] * 3


def test_the_kit_exports_exactly_its_public_names():
    import rope_ref.testing as kit

    public = {
        name
        for name in dir(kit)
        if not name.startswith("_") and not isinstance(getattr(kit, name), types.ModuleType)
    }  # submodules (`strategies`) are public by their own name
    assert public == set(kit.__all__)
    assert callable(kit.diagnose)
    import rope_ref.testing._diagnosis as module  # the submodule, not a function

    assert not callable(module)


def test_max_ulps_counts_in_the_result_dtype_allowed(capsys):
    pytest.importorskip("mpmath")
    status, out = run_check(
        capsys,
        f"{TARGETS}:rounded_to_float32",
        *("--dtype", "float64", "--result-dtype", "float32", "--max-ulps", "1"),
    )
    assert status == 0, out
    assert "errors in ulps: at most" in out
