"""`rope-ref verify` checks backend="exact" where mpmath is installed, and says why not."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rope_ref as rr
from rope_ref.cli import main, verify


def _only_exact(monkeypatch: pytest.MonkeyPatch, backends: dict[str, str | None]) -> None:
    """No namespace and no kernel: what is left is the exact backend's check (or its skip)."""
    monkeypatch.setattr(verify, "_namespace", lambda name: None)
    monkeypatch.setattr(verify, "available_backends", lambda: backends)


def test_verify_checks_the_exact_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    _only_exact(monkeypatch, {"reference": None, "exact": None})
    results, skipped = verify.run_checks()
    rows = [(r.namespace, r.backend, r.dtype, r.check) for r in results]
    assert rows == [
        ("numpy", "exact", "float64", verify.EXACT_CHECK),
        ("numpy", "exact", "float32", verify.EXACT_CHECK),
    ]
    assert all(r.error == 0.0 and r.tolerance == 0.0 and r.passed for r in results)
    assert not any(line.startswith("backend exact") for line in skipped)


def test_the_exact_check_sees_one_ulp(monkeypatch: pytest.MonkeyPatch) -> None:
    real = rr.apply_rope

    def one_ulp_off(x: Any, *args: Any, **kwargs: Any) -> Any:
        y = np.array(real(x, *args, **kwargs))
        y[0, 1, 1, 3] = np.nextafter(y[0, 1, 1, 3], np.inf)
        return y

    monkeypatch.setattr(verify, "apply_rope", one_ulp_off)
    # the oracle: cos and sin of p * 10000**(-2j/8) from mpmath, independently of verify's
    assert verify._exact_error("float64") == 1.0
    assert verify._exact_error("float32") == 1.0


def test_verify_lists_the_exact_backend_as_skipped_without_mpmath(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    why = "needs 'mpmath': pip install 'rope-ref[exact]'"
    _only_exact(monkeypatch, {"reference": None, "exact": why})
    results, skipped = verify.run_checks()
    assert results == []
    verify.print_table(results, skipped, wide=True)
    out = capsys.readouterr().out
    assert f"skipped: backend exact: {why}" in out
    assert "exact" not in "".join(line for line in out.splitlines() if line.startswith("numpy"))


def test_verify_prints_the_exact_rows(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _only_exact(monkeypatch, {"reference": None, "exact": None})
    assert main(["verify", "--wide"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    exact_rows = [row for row in rows if row[:2] == ["numpy", "exact"]]
    assert [row[2] for row in exact_rows] == ["float64", "float32"]
    assert all(row[-1] == "ok" for row in exact_rows)
