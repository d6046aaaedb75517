"""`rope-ref check` defaults that cannot pass a bug: the spec's layout unless `--layout auto`
is asked for (and then the verdict names what it adopted), and no verdict of "conformant"
past the positions the dtype can check."""

from __future__ import annotations

import pytest

from tests._helpers import REPO, run_check

TARGETS = "tests.check_targets"


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    monkeypatch.chdir(REPO)


_check = run_check


def test_an_interleaved_function_fails_the_default_half_spec(capsys):
    status, out = _check(capsys, f"{TARGETS}:correct_interleaved")
    assert status == 1, out
    assert "layout: half, as the spec says" in out
    assert "diagnosis: layout\n" in out
    assert "the result pairs features (2j, 2j + 1)" in out


def test_layout_auto_is_an_opt_in_that_names_what_it_adopted(capsys):
    status, out = _check(capsys, f"{TARGETS}:correct_interleaved", "--layout", "auto")
    assert status == 0, out
    assert "layout: interleaved, detected (--layout auto)" in out
    assert "it differs from the spec's 'half'" in out
    assert "OK: conformant on 10 examples with the adopted layout 'interleaved'" in out


def test_the_layout_probe_stays_inside_float16s_range(capsys):
    argv = ["--layout", "auto", "--dtype", "float16", "--max-position", "100000"]
    status, out = _check(capsys, f"{TARGETS}:float16_interleaved", *argv)
    assert status == 1, out  # positions held in float16 are wrong past 2048
    assert "layout: interleaved, detected (--layout auto)" in out


def test_positions_past_the_checkable_range_get_no_pass(capsys):
    status, out = _check(capsys, f"{TARGETS}:correct_half", "--max-position", "4000000")
    assert status == 1, out
    # float32, fastest pair 1 rad/token: (1/2 - 4 eps) / (2 eps) - 1 with eps = 2**-23
    limit = int((0.5 - 4 * 2.0**-23) / (2 * 2.0**-23) - 1)
    assert f"NOT CHECKABLE past position {limit}: no verdict there" in out
    assert "OK: conformant" not in out
    status, out = _check(capsys, f"{TARGETS}:correct_half", "--max-position", str(limit))
    assert status == 0, out


def test_a_result_in_another_dtype_passes_only_when_allowed(capsys):
    argv = [f"{TARGETS}:computes_in_float32", "--dtype", "float64"]
    status, out = _check(capsys, *argv)
    assert status == 1, out
    assert "diagnosis: dtype\n" in out
    status, out = _check(capsys, *argv, "--result-dtype", "float32")
    assert status == 0, out
    assert "dtype float64 (results allowed in float32)" in out
