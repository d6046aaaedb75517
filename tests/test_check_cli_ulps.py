"""`rope-ref check --max-ulps N`: the probe's results held to N ulps of the correct rounding.

Whether the float64 reference rounded to float32 is correctly rounded is decided here by an
mpmath computation written in the test, not by the exact backend under test.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rope_ref import RopeSpec
from rope_ref.cli import main
from rope_ref.cli.check.cases import CheckConfig, probe_case, probe_positions
from rope_ref.cli.check.conventions import Calling, run_case
from tests import check_targets

mpmath = pytest.importorskip("mpmath")

REPO = Path(__file__).resolve().parent.parent
TARGETS = "tests.check_targets"
MAX_POSITION = 32768


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    monkeypatch.chdir(REPO)  # `rope-ref check` imports MODULE from the current directory


def _check(capsys, target, *args):
    status = main(
        ["check", f"{TARGETS}:{target}", "--convention", "plain", "--examples", "5", *args]
    )
    return status, capsys.readouterr().out


def _nearest_float32(value) -> np.float32:
    """The float32 nearest the mpmath `value` (ties to even), chosen among three neighbours."""
    guess = np.float32(float(value))
    down, up = np.nextafter(guess, np.float32(-np.inf)), np.nextafter(guess, np.float32(np.inf))
    candidates = [down, guess, up]
    distances = [abs(value - mpmath.mpf(float(c))) for c in candidates]
    best = min(distances)
    ties = [c for c, dist in zip(candidates, distances, strict=True) if dist == best]
    return next((c for c in ties if int(c.view(np.int32)) % 2 == 0), ties[0])


def _mpmath_rope_float32(x: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Correctly rounded half-layout RoPE (base 10000) of float32 `x` (b, h, s, d), in mpmath."""
    d = x.shape[-1]
    n = d // 2
    out = np.empty_like(x, dtype=np.float32)
    with mpmath.workprec(200):
        for s, p in enumerate(positions.tolist()):
            for i in range(n):
                angle = mpmath.mpf(int(p)) * mpmath.power(10000, mpmath.mpf(-2 * i) / d)
                c, sn = mpmath.cos(angle), mpmath.sin(angle)
                for idx in np.ndindex(*x.shape[:2]):
                    a = mpmath.mpf(float(x[(*idx, s, i)]))
                    b = mpmath.mpf(float(x[(*idx, s, i + n)]))
                    out[(*idx, s, i)] = _nearest_float32(a * c - b * sn)
                    out[(*idx, s, i + n)] = _nearest_float32(b * c + a * sn)
    return out


def test_float64_reference_rounded_passes_as_far_as_mpmath_says_it_is_rounded(capsys):
    cfg = CheckConfig(
        calling=Calling(convention="plain", dtype="float32"),
        spec=RopeSpec(64),
        layout="half",
        max_position=MAX_POSITION,
        examples=1,
    )
    case = probe_case(cfg)
    (out,) = run_case(check_targets.correct_half, cfg.calling, case, cfg.spec)
    x = np.asarray(out.setup.x, dtype=np.float32)
    actual = np.asarray(out.actual, dtype=np.float32)
    rounded = _mpmath_rope_float32(x, np.asarray(case.positions))
    steps = np.abs(actual.view(np.int32).astype(np.int64) - rounded.view(np.int32))
    assert steps.max() <= 1  # faithful everywhere (double rounding can cost one ulp)
    planted = np.asarray(check_targets.float32_angles(out.setup.x, case.positions), np.float32)
    assert np.any(planted != rounded)  # the mpmath result tells a float32-angle RoPE apart

    status, text = _check(capsys, "correct_half", "--max-ulps", "1")
    assert status == 0, text
    assert "errors in ulps: at most" in text
    status, text = _check(capsys, "correct_half", "--max-ulps", "0")
    if status == 0:  # a pass needs every element of the probe correctly rounded
        assert not np.any(steps > 0)
        assert "errors in ulps: at most 0 over the 5 examples and the probe" in text
    else:  # the probe or a drawn example has an element one ulp off
        assert "elements are over" in text


def test_float32_angles_fail_four_ulps_with_the_worst_element_named(capsys):
    args = ("--angle-dtype", "float32", "--max-position", "4096")
    status, text = _check(capsys, "float32_angles", *args)
    assert status == 0, text  # within the float32-angle tolerance: only ulps catch it
    status, text = _check(capsys, "float32_angles", *args, "--max-ulps", "4")
    assert status == 1, text
    assert "FAIL" in text
    assert "ulps from the correctly rounded result" in text
    assert "allowed: max_ulps=4" in text


def test_max_ulps_is_in_the_json_verdict(capsys):
    status, text = _check(capsys, "correct_half", "--json", "--max-ulps", "1")
    data = json.loads(text)
    assert status == 0
    assert 0 <= data["max_ulps"] <= 1
    args = ("--angle-dtype", "float32", "--max-position", "4096", "--max-ulps", "4")
    status, text = _check(capsys, "float32_angles", "--json", *args)
    data = json.loads(text)
    assert (status, data["verdict"]) == (1, "mismatch")
    assert data["max_ulps"] > 4
    assert "ulps from the correctly rounded result" in data["worst"]
    status, text = _check(capsys, "correct_half", "--json")
    assert json.loads(text)["max_ulps"] is None


@pytest.mark.parametrize("bad", ["-1", "nan", "inf"])
def test_bad_max_ulps_is_a_usage_error_naming_it(capsys, bad):
    status = main(
        ["check", f"{TARGETS}:correct_half", "--convention", "plain", f"--max-ulps={bad}"]
    )
    assert status == 2
    captured = capsys.readouterr()
    said = captured.out + captured.err
    assert f"--max-ulps must be a number of ulps >= 0; got {float(bad)}" in said


PROBED = frozenset(probe_positions(4096).tolist())


def float32_angles_off_the_probe(x, positions):
    """float32 angles at positions the probe case never uses, the float64 RoPE at the rest."""
    p = np.asarray(positions)
    off = ~np.isin(p, sorted(PROBED))
    good = check_targets.correct_half(x, positions)
    bad = check_targets.float32_angles(x, positions)
    return np.where(off[:, None], bad, good)


def test_max_ulps_judges_every_drawn_example_not_only_the_probe(capsys):
    probe = np.array(sorted(PROBED))
    x = np.random.default_rng(0).uniform(-1, 1, (2, len(probe), 64)).astype(np.float32)
    # on the probe's positions the planted target is the float64 reference itself ...
    same = float32_angles_off_the_probe(x, probe) == check_targets.correct_half(x, probe)
    assert np.all(same)
    target = "tests.test_check_cli_ulps:float32_angles_off_the_probe"
    args = ["check", target, "--convention", "plain", "--angle-dtype", "float32"]
    args += ["--max-position", "4096", "--examples", "20"]
    status = main(args)
    text = capsys.readouterr().out
    assert status == 0, text  # ... and within the float32-angle tolerance everywhere
    status = main([*args, "--max-ulps", "4"])
    text = capsys.readouterr().out
    assert status == 1, text  # only a drawn example shows the ulps
    assert "ulps from the correctly rounded result" in text
    assert "allowed: max_ulps=4" in text
    # the pasteable reproducer replays the drawn counterexample and fails on its ulps
    assert main([*args, "--max-ulps", "4", "--json"]) == 1
    code = json.loads(capsys.readouterr().out)["reproducer"]
    with pytest.raises(AssertionError, match="allowed: max_ulps=4"):
        exec(code, {})
