"""The mathematics of RoPE as Hypothesis properties, on every array namespace."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import array_api_compat
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import rope_ref as rr
from tests._helpers import host, max_abs

EPS = float(np.finfo(np.float64).eps)
fixture_ok = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


@dataclass(frozen=True)
class Case:
    spec: rr.RopeSpec
    x: np.ndarray  # (batch, seq, head_dim), float64, entries in [-4, 4]
    positions: np.ndarray  # (seq,), integers or reals

    @property
    def max_angle(self) -> float:
        return float(np.max(np.abs(self.positions), initial=0.0))


@st.composite
def specs(draw, *, max_head_dim: int = 24, bucket: tuple[int, ...] | None = None) -> rr.RopeSpec:
    """Any spec; with `bucket`, head_dim is drawn from it and the rotated slice from 2 choices."""
    if bucket is None:
        head_dim = draw(st.integers(2, max_head_dim))
        rotary_start = draw(st.integers(0, head_dim - 2))
        rotary_dim = 2 * draw(st.integers(1, (head_dim - rotary_start) // 2))
    else:
        head_dim = draw(st.sampled_from(bucket))
        rotary_start, rotary_dim = draw(st.sampled_from([(0, head_dim), (2, head_dim - 4)]))
    return rr.RopeSpec(
        head_dim=head_dim,
        rotary_start=rotary_start,
        rotary_dim=rotary_dim,
        base=draw(st.sampled_from([10000.0, 500000.0, 2.5, 1e6 + 0.5])),
        layout=draw(st.sampled_from(["half", "interleaved"])),
    )


positions_int = st.integers(-(2**20), 2**20)
positions_real = st.floats(-1e5, 1e5, allow_nan=False, allow_subnormal=False)


#: JAX compiles each operation once per input shape, so fresh shapes in every example cost
#: more than the checks. Its draws take (batch, seq) and head_dim from these few fixed
#: shapes; values, positions, bases, layouts and the rotated slice still vary. The other
#: namespaces draw every shape.
JAX_BATCH_SEQ = ((2, 3), (1, 5))
JAX_HEAD_DIMS = (8, 12)


@st.composite
def cases(draw, *, bucketed: bool = False) -> Case:
    if bucketed:
        spec = draw(specs(bucket=JAX_HEAD_DIMS))
        batch, seq = draw(st.sampled_from(JAX_BATCH_SEQ))
    else:
        spec = draw(specs())
        batch, seq = draw(st.integers(1, 3)), draw(st.integers(1, 5))
    x = draw(
        hnp.arrays(
            np.float64,
            (batch, seq, spec.head_dim),
            elements=st.floats(-4, 4, allow_subnormal=False),
        )
    )
    pos = draw(
        st.one_of(
            st.lists(positions_int, min_size=seq, max_size=seq),
            st.lists(positions_real, min_size=seq, max_size=seq),
        )
    )
    return Case(spec, x, np.asarray(pos))


def cases_for(xp) -> st.SearchStrategy[Case]:
    """`cases()` for namespace `xp`: shape-bucketed for JAX (see JAX_BATCH_SEQ)."""
    return cases(bucketed=array_api_compat.is_jax_namespace(xp))


def tolerance(case: Case, *extra_angles: float, scale: float = 1.0) -> float:
    """Float64 error model: each angle is off by <= |phi| * 2^-52 (inv_freq and product
    rounding), each rotated value by that times |x| plus a few roundings."""
    angle = case.max_angle + sum(abs(a) for a in extra_angles)
    magnitude = 4.0 * np.sqrt(case.spec.head_dim) * scale
    return 16 * EPS * (1.0 + angle) * magnitude


@fixture_ok
@given(data=st.data())
def test_position_zero_is_identity(xp, data):
    case = data.draw(cases_for(xp), label="case")
    x = xp.asarray(case.x)
    y = rr.apply_rope(x, case.spec, xp.zeros(case.x.shape[1]))
    assert np.array_equal(host(y), case.x)


@fixture_ok
@given(data=st.data())
def test_rotation_preserves_pair_norms(xp, data):
    case = data.draw(cases_for(xp), label="case")
    y = host(rr.apply_rope(xp.asarray(case.x), case.spec, xp.asarray(case.positions)))
    order = rr.feature_order(case.spec, case.spec.layout, "half")
    n, s = case.spec.n_pairs, case.spec.rotary_start
    before = case.x[..., order][..., s : s + 2 * n]
    after = y[..., order][..., s : s + 2 * n]
    norm_before = np.hypot(before[..., :n], before[..., n:])
    norm_after = np.hypot(after[..., :n], after[..., n:])
    np.testing.assert_allclose(norm_after, norm_before, rtol=8 * EPS, atol=8 * EPS)


@fixture_ok
@given(data=st.data())
def test_inverse_undoes(xp, data):
    case = data.draw(cases_for(xp), label="case")
    x, pos = xp.asarray(case.x), xp.asarray(case.positions)
    y = rr.apply_rope(x, case.spec, pos)
    back = rr.apply_rope(y, case.spec, pos, inverse=True)
    assert max_abs(back, case.x) <= tolerance(case)
    assert max_abs(back, rr.apply_rope(y, case.spec, -pos)) <= tolerance(case)


@fixture_ok
@given(data=st.data(), shift=positions_int)
def test_scores_depend_only_on_relative_position(xp, data, shift):
    case = data.draw(cases_for(xp), label="case")
    # <R_m q, R_n k> = <q, R_{n-m} k>: shifting every position leaves all scores unchanged.
    q = xp.asarray(case.x)
    k = xp.asarray(case.x[::-1, ::-1] * 0.5)
    pos = xp.asarray(case.positions)
    scores = [
        host(q_rot) @ np.swapaxes(host(k_rot), -1, -2)
        for q_rot, k_rot in (
            rr.apply_rope_qk(q, k, case.spec, pos),
            rr.apply_rope_qk(q, k, case.spec, pos + shift),
        )
    ]
    assert np.max(np.abs(scores[0] - scores[1])) <= tolerance(
        case, shift, scale=4 * case.spec.head_dim
    )


@fixture_ok
@given(data=st.data(), step=positions_int)
def test_composition_adds_positions(xp, data, step):
    case = data.draw(cases_for(xp), label="case")
    # R_b R_a = R_{a+b}
    x, pos = xp.asarray(case.x), xp.asarray(case.positions)
    twice = rr.apply_rope(rr.apply_rope(x, case.spec, pos), case.spec, xp.asarray([step]))
    once = rr.apply_rope(x, case.spec, pos + step)
    assert max_abs(twice, once) <= tolerance(case, step)


@fixture_ok
@given(data=st.data())
def test_forms_agree(xp, data):
    case = data.draw(cases_for(xp), label="case")
    x, pos = xp.asarray(case.x), xp.asarray(case.positions)
    reference = rr.apply_rope(x, case.spec, pos)
    for form in ("complex", "matrix"):
        # Same angles, same tables: only the rotation arithmetic differs (a few roundings).
        assert max_abs(rr.apply_rope(x, case.spec, pos, form=form), reference) <= 8 * EPS * 8


@fixture_ok
@given(data=st.data())
def test_convert_layout_commutes_with_rotation(xp, data):
    case = data.draw(cases_for(xp), label="case")
    spec_i = dataclasses.replace(case.spec, layout="interleaved")
    spec_h = dataclasses.replace(case.spec, layout="half")
    x, pos = xp.asarray(case.x), xp.asarray(case.positions)
    via_half = rr.convert_layout(
        rr.apply_rope(rr.convert_layout(x, spec_i), spec_h, pos),
        spec_i,
        src="half",
        dst="interleaved",
    )
    assert np.array_equal(host(via_half), host(rr.apply_rope(x, spec_i, pos)))


@fixture_ok
@given(data=st.data())
def test_partial_rotary_passes_other_features_through(xp, data):
    case = data.draw(cases_for(xp), label="case")
    x = xp.asarray(case.x, dtype=xp.float32)
    y = host(rr.apply_rope(x, case.spec, xp.asarray(case.positions)))
    start, stop = case.spec.rotary_start, case.spec.rotary_stop
    assert np.array_equal(y[..., :start], host(x)[..., :start])
    assert np.array_equal(y[..., stop:], host(x)[..., stop:])


@given(spec=specs(), m=positions_real, n=positions_real)
def test_rotation_matrices_form_a_group(spec, m, n):
    r_m, r_n = rr.rotation_matrix(spec, m), rr.rotation_matrix(spec, n)
    eye = np.eye(spec.head_dim)
    tol = 16 * EPS * (1 + abs(m) + abs(n))
    np.testing.assert_allclose(r_m.T @ r_m, eye, atol=8 * EPS)
    assert abs(np.linalg.det(r_m) - 1.0) <= 16 * EPS * spec.head_dim
    np.testing.assert_allclose(r_m.T @ r_n, rr.rotation_matrix(spec, n - m), atol=tol)
    np.testing.assert_allclose(r_n @ r_m, rr.rotation_matrix(spec, m + n), atol=tol)


@given(spec=specs(max_head_dim=12), position=positions_real, data=st.data())
def test_rotation_matrix_is_what_apply_rope_does(spec, position, data):
    x = data.draw(hnp.arrays(np.float64, (spec.head_dim,), elements=st.floats(-4, 4)))
    expected = rr.rotation_matrix(spec, position) @ x
    actual = rr.apply_rope(x[None, :], spec, np.asarray([position]))[0]
    np.testing.assert_allclose(actual, expected, rtol=0, atol=64 * EPS)


@pytest.mark.parametrize("order", ["chunked", "interleaved"])
@given(data=st.data())
def test_multi_axis_reduces_to_1d_for_equal_axes(order, data):
    n_axes = data.draw(st.integers(1, 4))
    sizes = data.draw(st.lists(st.integers(1, 4), min_size=n_axes, max_size=n_axes))
    n_pairs = sum(sizes)
    if order == "interleaved":  # axis a needs pair index a + n_axes * (size - 1) to exist
        sizes = [
            sizes[0],
            *(min(s, (n_pairs - 1 - a) // n_axes + 1) for a, s in enumerate(sizes[1:], start=1)),
        ]
        sizes[0] += n_pairs - sum(sizes)
    spec = rr.RopeSpec(head_dim=2 * n_pairs, sections=tuple(sizes), section_order=order)
    pos = np.asarray(data.draw(st.lists(positions_int, min_size=1, max_size=4)))
    x = np.ones((len(pos), spec.head_dim))
    multi = rr.apply_rope(x, spec, np.stack([pos] * n_axes, axis=-1))
    assert np.array_equal(multi, rr.apply_rope(x, rr.RopeSpec(head_dim=spec.head_dim), pos))
