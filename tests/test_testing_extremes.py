"""The pair-wise extremes of a comparison against the full per-element route.

A passing comparison under the error model reads its largest error and largest share of
the tolerance from `rope_ref.testing._extremes` (NumPy passes, or one compiled loop where
Numba is installed) instead of building the per-element arrays. Each case here builds the
comparison, then the same comparison without its extremes (`dataclasses.replace` does not
copy them), whose numbers come from the per-element `error` and `tolerance`: the verdict,
the largest ratio and the largest error must be the same, to the bit, by every route.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import subprocess
import sys

import numpy as np
import pytest

import rope_ref as rr
from rope_ref.testing._args import CheckArgs
from rope_ref.testing._compare import Comparison, HostResult
from rope_ref.testing._extremes import extremes

HAVE_NUMBA = importlib.util.find_spec("numba") is not None
#: Bits after the point of each dtype: its epsilon is 2 ** -bits.
MANTISSA_BITS = {"float64": 52, "float32": 23, "float16": 10, "bfloat16": 7}
ROUTES = [False, pytest.param(True, marks=pytest.mark.skipif(not HAVE_NUMBA, reason="numba"))]


def _full(c: Comparison) -> Comparison:
    """`c` rebuilt without its extremes: every number from the per-element arrays."""
    full = dataclasses.replace(c)
    assert full.extremes is None
    return full


def _per_row(c: Comparison) -> np.ndarray:
    assert c.model is not None
    return np.asarray(c.model.atol(c.setup.max_angles(), 1.0), dtype=np.float64)


def _route(c: Comparison, actual: object, fused: bool):
    s = c.setup
    given = actual.values if isinstance(actual, HostResult) else actual
    return extremes(
        given,
        s.expected,
        _per_row(c),
        s.spec,
        inverse=s.inverse,
        copied_eps=2.0 ** -MANTISSA_BITS[c.judged_dtype],
        fused=fused,
    )


def _agree(c: Comparison, actual: object, *, fast: bool) -> None:
    """The comparison, each route of `extremes` and the full route give the same numbers."""
    full = _full(c)
    assert c.ok is full.ok
    assert (c.max_ratio, c.max_error) == (full.max_ratio, full.max_error)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(full.error == 0.0, 0.0, full.error / full.tolerance)
    assert full.max_ratio == float(np.max(ratio, initial=0.0))
    assert (c.extremes is not None) is fast
    for fused in (False, True) if HAVE_NUMBA else (False,):
        found = _route(c, actual, fused)
        if fast:
            assert found is not None
            assert (found.max_error, found.max_ratio) == (full.max_error, full.max_ratio)
        else:
            assert found is None


def _case(
    spec: rr.RopeSpec, shape: tuple[int, ...], dtype: str = "float32", seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    p = np.arange(shape[-2]) + 1000
    return x, p, np.asarray(rr.apply_rope(x, spec, p))


SPECS = {
    "half": rr.RopeSpec(head_dim=16),
    "interleaved": rr.RopeSpec(head_dim=16, layout="interleaved"),
    "read interleaved, write half": rr.RopeSpec(
        head_dim=16, layout="interleaved", output_layout="half"
    ),
    "partial": rr.RopeSpec(head_dim=20, rotary_dim=8, rotary_start=4),
    "multi-axis": rr.RopeSpec(head_dim=16, sections=(2, 2, 4)),
}


@pytest.mark.parametrize("name", sorted(SPECS))
@pytest.mark.parametrize("inverse", [False, True])
def test_a_correct_result_passes_with_the_same_numbers_by_every_route(name, inverse):
    spec = SPECS[name]
    shape = (3, 7, spec.head_dim)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    if spec.sections is None:
        p = np.arange(7) + 1000
    else:
        p = np.stack([np.arange(7) + 1000, np.arange(7) % 3, np.arange(7) * 2], axis=-1)
    y = np.asarray(rr.apply_rope(x, spec, p, inverse=inverse))
    c = CheckArgs(positions=p, inverse=inverse).comparison(y, x, spec)
    assert c.ok
    _agree(c, y, fast=True)


def _at_smallest_tolerance(spec: rr.RopeSpec, where_error: str) -> tuple[Comparison, np.ndarray]:
    """A float64 result off where the tolerance is smallest: "inside" is the float farthest
    from the oracle's value still within the tolerance, "outside" the next one."""
    x, p, _ = _case(spec, (4, 9, spec.head_dim), dtype="float64", seed=3)
    args = CheckArgs(positions=p)
    exact = args.comparison(np.asarray(rr.apply_rope(x, spec, p)), x, spec)
    tol = _full(exact).tolerance
    where = np.unravel_index(np.argmin(np.where(tol > 0, tol, np.inf)), tol.shape)
    actual = np.array(exact.expected)
    y, limit = actual[where], tol[where]
    value = y
    while abs(np.nextafter(value, np.inf) - y) <= limit:  # exact: the two are close
        value = np.nextafter(value, np.inf)
    actual[where] = value if where_error == "inside" else np.nextafter(value, np.inf)
    return args.comparison(actual, x, spec), actual


@pytest.mark.parametrize("name", ["half", "interleaved", "partial"])
@pytest.mark.parametrize("where_error", ["inside", "outside"])
def test_an_error_just_inside_or_outside_the_smallest_tolerance(name, where_error):
    c, actual = _at_smallest_tolerance(SPECS[name], where_error)
    assert c.ok is (where_error == "inside")
    _agree(c, actual, fast=True)


def test_an_error_exactly_at_the_tolerance_passes_by_every_route():
    spec = SPECS["half"]
    x, p, _ = _case(spec, (2, 5, 16), dtype="float64", seed=4)
    args = CheckArgs(positions=p)
    exact = args.comparison(np.asarray(rr.apply_rope(x, spec, p)), x, spec)
    tol = _full(exact).tolerance
    actual = np.array(exact.expected)
    actual[1, 2, 3] += tol[1, 2, 3]
    c = args.comparison(actual, x, spec)
    full = _full(c)
    assert c.ok is full.ok  # error <= tolerance where the sum rounds onto the tolerance
    _agree(c, actual, fast=True)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("name", ["half", "partial"])
@pytest.mark.parametrize("feature", [0, 5])
def test_a_nan_or_infinite_element_is_judged_element_by_element(bad, name, feature):
    spec = SPECS[name]
    x, p, y = _case(spec, (2, 5, spec.head_dim))
    y = y.copy()
    y[1, 3, feature] = bad
    c = CheckArgs(positions=p).comparison(y, x, spec)
    assert not c.ok
    assert c.extremes is None
    _agree(c, y, fast=False)


def test_infinities_in_x_and_the_same_infinities_in_the_result():
    spec = SPECS["partial"]
    x, p, _ = _case(spec, (2, 5, spec.head_dim))
    x[0, 1, 0] = np.inf  # a copied feature: the oracle copies it too
    y = np.asarray(rr.apply_rope(x, spec, p))
    c = CheckArgs(positions=p).comparison(y, x, spec)
    assert c.extremes is None
    assert c.ok
    _agree(c, y, fast=False)


@pytest.mark.parametrize("name", ["half", "interleaved"])
def test_zero_pairs_are_judged_element_by_element(name):
    spec = SPECS[name]
    x, p, _ = _case(spec, (2, 5, 16))
    x[:, 2, :] = 0.0  # every pair of a row: norm 0, tolerance 0
    y = np.asarray(rr.apply_rope(x, spec, p))
    c = CheckArgs(positions=p).comparison(y, x, spec)
    assert c.ok
    assert c.extremes is None
    _agree(c, y, fast=False)
    wrong = y.copy()
    wrong[1, 2, 0] = 1e-30  # anything but zero fails where the tolerance is 0
    c = CheckArgs(positions=p).comparison(wrong, x, spec)
    assert not c.ok
    assert c.max_ratio == math.inf
    _agree(c, wrong, fast=False)


def test_huge_and_tiny_pairs_take_the_per_element_route():
    spec = SPECS["half"]
    x, p, _ = _case(spec, (2, 5, 16), dtype="float64")
    x[0] *= 1e200
    x[1] *= 1e-200
    y = np.asarray(rr.apply_rope(x, spec, p))
    c = CheckArgs(positions=p).comparison(y, x, spec)
    assert c.ok
    assert c.extremes is None
    _agree(c, y, fast=False)


def test_a_float16_result_is_read_directly():
    spec = SPECS["half"]
    x, p, y = _case(spec, (3, 6, 16), dtype="float16")
    c = CheckArgs(positions=p).comparison(y, x, spec)
    assert c.ok
    _agree(c, y, fast=True)  # the loop reads float32 and float64; float16 takes NumPy


def test_a_bfloat16_result_takes_the_per_element_route():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    spec = SPECS["half"]
    x, p, _ = _case(spec, (3, 6, 16))
    xb = x.astype(ml_dtypes.bfloat16)
    y = np.asarray(rr.apply_rope(xb, spec, p))
    c = CheckArgs(positions=p).comparison(y, xb, spec)
    assert c.ok
    assert c.extremes is None
    _agree(c, y, fast=False)


def test_a_strided_result_and_a_host_result_give_the_same_numbers():
    spec = SPECS["interleaved"]
    x, p, y = _case(spec, (3, 6, 16), seed=5)
    args = CheckArgs(positions=p)
    strided = np.asfortranarray(y)
    host = HostResult(values=y.astype(np.float64), dtype="float32")
    plain = args.comparison(y, x, spec)
    for other in (strided, host):
        c = args.comparison(other, x, spec)
        assert (c.ok, c.max_ratio, c.max_error) == (plain.ok, plain.max_ratio, plain.max_error)
        _agree(c, other, fast=True)


def test_a_result_in_another_dtype_fails_with_the_numbers_of_the_full_route():
    spec = SPECS["half"]
    x, p, y = _case(spec, (2, 5, 16))
    wide = y.astype(np.float64)
    c = CheckArgs(positions=p).comparison(wide, x, spec)
    assert not c.ok
    assert c.dtype_mismatch is not None
    _agree(c, wide, fast=True)


def test_the_tolerance_is_the_model_written_here():
    # |error| <= |pair| * (2 * eps32 * (|p| * inv_freq_max + 1) + 4 * eps32), inv_freq_max = 1
    spec = rr.RopeSpec(head_dim=8)
    x, p, _ = _case(spec, (1, 4, 8), dtype="float64", seed=6)
    y = np.asarray(rr.apply_rope(x, spec, p)).astype(np.float32)
    eps = 2.0**-23
    expected = np.asarray(rr.apply_rope(x, spec, p))
    norms = np.hypot(expected[..., :4], expected[..., 4:])
    per_unit = 2 * eps * (p[:, None].astype(np.float64) + 1) + 4 * eps
    error = np.abs(y.astype(np.float64) - expected)
    ratio = np.maximum(error[..., :4], error[..., 4:]) / (norms * per_unit)
    c = CheckArgs(positions=p, dtype="float32").comparison(y, x, spec)
    assert c.extremes is not None
    assert c.max_ratio == pytest.approx(float(ratio.max()), rel=1e-12)


@pytest.mark.parametrize("fused", ROUTES)
def test_both_routes_agree_bit_for_bit_on_random_pairs(fused):
    # one pair per row: each row's ratio is its own maximum, so every row is compared
    spec = rr.RopeSpec(head_dim=2)
    rng = np.random.default_rng(7)
    for scale in (1e-3, 1.0, 1e5):
        expected = rng.standard_normal((4096, 2)) * scale
        actual = (expected + rng.standard_normal((4096, 2)) * 1e-7 * scale).astype(np.float32)
        per_row = rng.uniform(1e-7, 1e-3, 4096)
        norms = np.sqrt(np.square(expected[:, 0]) + np.square(expected[:, 1]))
        error = np.abs(actual.astype(np.float64) - expected)
        ratios = np.maximum(error[:, 0], error[:, 1]) / (norms * per_row)
        for row in range(0, 4096, 97):
            found = extremes(
                actual[row : row + 1],
                expected[row : row + 1],
                per_row[row : row + 1],
                spec,
                inverse=False,
                copied_eps=2.0**-23,
                fused=fused,
            )
            assert found is not None
            assert found.max_ratio == ratios[row]


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba")
@pytest.mark.parametrize("opt_out", ["", "0"])
def test_a_large_result_takes_the_loop_unless_opted_out(monkeypatch, opt_out):
    from rope_ref.testing import _extremes

    monkeypatch.setenv(_extremes.OPT_OUT, opt_out)
    loops: list[int] = []
    original = _extremes._fused_pairs

    def counted(*args, **kwargs):
        loops.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(_extremes, "_fused_pairs", counted)
    spec = rr.RopeSpec(head_dim=128)
    shape = (1, _extremes.FUSED_MIN_SIZE // (4 * 128), 4, 128)
    x = np.random.default_rng(8).standard_normal(shape).astype(np.float32)
    p = np.arange(shape[1]) + 1000
    y = np.asarray(rr.apply_rope(x, spec, p, seq_axis=1))
    c = CheckArgs(positions=p, seq_axis=1).comparison(y, x, spec)
    assert c.ok
    assert len(loops) == (0 if opt_out == "0" else 1)
    _agree(c, y, fast=True)


def test_a_small_check_never_imports_numba():
    code = (
        "import sys, numpy as np, rope_ref as rr\n"
        "from rope_ref.testing import assert_rope_close\n"
        "spec = rr.RopeSpec(head_dim=64)\n"
        "x = np.ones((2, 16, 4, 64), np.float32)\n"
        "assert_rope_close(rr.apply_rope(x, spec), x, spec)\n"
        "print('numba' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    assert out.stdout.strip() == "False"
