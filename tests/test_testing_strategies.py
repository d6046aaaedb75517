"""rope_ref.testing.strategies: valid draws, the edge cases that broke peers, eager errors,
and a clear ImportError without Hypothesis."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

import rope_ref as rr
from rope_ref.testing import assert_rope_close
from rope_ref.testing.strategies import (
    EDGE_POWERS,
    RopeCase,
    positions,
    rope_cases,
    rope_specs,
    scaling_rules,
)


@given(rope_specs())
def test_specs_are_valid_and_fit(spec):
    assert isinstance(spec, rr.RopeSpec)
    assert spec.n_pairs * 2 == spec.rotary_dim
    assert spec.rotary_stop <= spec.head_dim


@given(rope_cases(dtypes=["float32", "float64"]))
def test_cases_have_consistent_shapes(case):
    assert isinstance(case, RopeCase)
    batch, _heads, seq, d = case.x.shape
    assert d == case.spec.head_dim
    p = np.asarray(case.positions)
    assert p.dtype == np.int64
    assert p.shape in {(seq,), (batch, 1, seq)}
    assert p.min() >= 0
    assert p.max() <= 2**24 + 2
    assert "RopeCase(spec=RopeSpec(" in repr(case)


@given(rope_cases())
def test_the_oracle_passes_its_own_cases(case):
    assert_rope_close(
        rr.apply_rope(case.x, case.spec, case.positions), case.x, case.spec, case.positions
    )


def test_cases_in_other_namespaces(xp):
    if "dask" in xp.__name__:
        pytest.skip("dask arrays are lazy; the strategy builds eager test data")
    strategy = rope_cases(xp, dtypes=["float32"], max_position=5000)
    case = find(strategy, lambda c: c.x.shape[0] > 1)
    assert type(case.x) is type(xp.asarray([0.0]))
    y = rr.apply_rope(case.x, case.spec, case.positions)
    assert_rope_close(y, case.x, case.spec, case.positions)


def test_bfloat16_cases_with_torch():
    torch = pytest.importorskip("torch")
    case = find(rope_cases(torch, dtypes=["bfloat16"]), lambda c: True)
    assert case.x.dtype == torch.bfloat16


@pytest.mark.parametrize(
    ("name", "condition"),
    [
        ("odd pair count", lambda c: c.spec.n_pairs % 2 == 1 and c.spec.n_pairs > 1),
        ("partial rotary", lambda c: c.spec.rotary_dim < c.spec.head_dim),
        ("rotary_start > 0", lambda c: c.spec.rotary_start > 0),
        ("per-row positions", lambda c: np.ndim(c.positions) == 3 and c.x.shape[0] > 1),
        ("seq 1, batch > 1", lambda c: c.x.shape[2] == 1 and c.x.shape[0] > 1),
        ("bfloat16 edge", lambda c: np.any(np.abs(np.asarray(c.positions) - 2**8) <= 2)),
        ("float16 edge", lambda c: np.any(np.abs(np.asarray(c.positions) - 2**11) <= 2)),
        ("float32 edge", lambda c: np.any(np.abs(np.asarray(c.positions) - 2**24) <= 2)),
        ("interleaved", lambda c: c.spec.layout == "interleaved"),
    ],
)
def test_edge_cases_that_broke_peers_are_drawn(name, condition):
    assert condition(find(rope_cases(), condition))


def test_positions_hit_every_edge():
    for k in EDGE_POWERS:
        edge = 2**k + 1

        def hits(p: np.ndarray, edge: int = edge) -> bool:
            return bool(np.any(p == edge))

        assert edge in find(positions(3), hits)
    assert find(positions((2, 2), min_value=-5, max_value=-1), lambda p: True).max() <= -1


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: rope_specs(head_dims=64), "`head_dims` must be a Hypothesis strategy"),
        (lambda: rope_specs(layouts="half"), "`layouts` must be a Hypothesis strategy"),
        (lambda: rope_specs(layouts=["halves"]), "`layouts` must hold only .*got 'halves'"),
        (lambda: rope_specs(min_rotary_dim=3), "`min_rotary_dim` must be even; got 3."),
        (lambda: rope_specs(min_rotary_dim=0), "`min_rotary_dim` must be an integer >= 2"),
        (lambda: rope_specs(partial="yes"), "`partial` must be True or False"),
        (lambda: positions(3, min_value=5, max_value=1), "`max_value` must be at least"),
        (lambda: rope_cases(max_seq=0), "`max_seq` must be an integer >= 1"),
        (lambda: rope_cases(dtypes=[]), "`dtypes` must be a non-empty sequence"),
        (lambda: rope_cases(dtypes=["bfloat16"]), "lacks"),
        (lambda: rope_cases(xp=object()), "`xp` must be an array namespace"),
        (lambda: rope_cases(specs=rr.RopeSpec(4)), "`specs` must be a Hypothesis strategy"),
    ],
)
def test_invalid_arguments_raise_eagerly(call, message):
    with pytest.raises(InvalidArgument, match=message):
        call()


def test_head_dims_below_two_are_rejected_when_drawn():
    with pytest.raises(InvalidArgument, match="`head_dims` must draw integers >= 2"):
        find(rope_specs(head_dims=st.just(1)), lambda s: True)


_BLOCK_HYPOTHESIS = (
    "import sys\n"
    "class Block:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name == 'hypothesis' or name.startswith('hypothesis.'):\n"
    "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
    "sys.meta_path.insert(0, Block())\n"
)


def test_without_hypothesis_testing_imports_and_strategies_name_the_extra():
    code = _BLOCK_HYPOTHESIS + (
        "import rope_ref.testing, rope_ref.testing._plugin\n"
        "print('testing ok')\n"
        "try:\n"
        "    import rope_ref.testing.strategies\n"
        "except ImportError as err:\n"
        "    print(type(err).__name__, err)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "testing ok" in out.stdout
    assert "ModuleNotFoundError" in out.stdout
    assert "pip install 'rope-ref[testing]'" in out.stdout


def test_rope_ref_testing_does_not_import_hypothesis():
    code = (
        "import sys, rope_ref.testing, rope_ref.testing._plugin; "
        "print(sorted(m for m in ('hypothesis', 'torch', 'jax') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- strategies that fit peers --------------------------------------------------------------

PEER_CASES = rope_cases(
    dtypes=["float32", "float64"],
    specs=rope_specs(nonzero_start=False, scalings=st.one_of(st.none(), scaling_rules())),
    axes=("bhsd", "bshd"),
    position_modes=("shared", "rows", "offset"),
    max_position=70000,
)


def _apply(case):
    return rr.apply_rope(
        case.x, case.spec, case.positions, offset=case.offset, seq_axis=case.seq_axis
    )


@given(PEER_CASES)
def test_peer_shaped_cases_are_consistent_and_pass_the_oracle(case):
    assert case.spec.rotary_start == 0
    assert case.seq_axis in (-2, -3)
    seq = case.x.shape[case.seq_axis]
    if case.positions is None:
        assert case.offset >= 0
        assert case.offset + seq - 1 <= 70000
    else:
        assert case.offset == 0
        batch = case.x.shape[0]
        assert np.shape(case.positions) in {(seq,), (batch, seq), (batch, 1, seq)}
    assert_rope_close(
        _apply(case),
        case.x,
        case.spec,
        case.positions,
        offset=case.offset,
        seq_axis=case.seq_axis,
    )


@given(
    rope_cases(
        dtypes=["float64"],
        specs=rope_specs(sections=True),
        max_position=5000,
        axes=("bhsd", "bshd"),
    )
)
def test_multi_axis_cases_carry_an_axis_per_section(case):
    n_axes = len(case.spec.sections)
    assert np.shape(case.positions)[-1] == n_axes
    assert_rope_close(_apply(case), case.x, case.spec, case.positions, seq_axis=case.seq_axis)


@pytest.mark.parametrize(
    ("name", "condition"),
    [
        ("seq before heads", lambda c: c.seq_axis == -3),
        ("offset mode", lambda c: c.positions is None and c.offset > 2**11),
        *(
            (family, lambda c, f=family: type(c.spec.scaling).__name__ == f)
            for family in (
                "Linear",
                "NTKAware",
                "DynamicNTK",
                "YaRN",
                "Llama3",
                "LongRoPE",
                "Proportional",
            )
        ),
    ],
)
def test_peer_shaped_cases_draw_every_kind(name, condition):
    assert condition(find(PEER_CASES, condition))


@pytest.mark.parametrize("order", ["chunked", "interleaved"])
def test_sections_of_both_orders_are_drawn(order):
    found = find(rope_specs(sections=True), lambda s: s.section_order == order)
    assert sum(found.sections) == found.n_pairs


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: rope_cases(axes=["bsdh"]), "`axes` must hold only"),
        (lambda: rope_cases(position_modes="offset"), "`position_modes` must be a non-empty"),
        (lambda: rope_specs(nonzero_start=1), "`nonzero_start` must be True or False"),
        (lambda: scaling_rules(max_factor=0.5), "`max_factor` must be a number from 1"),
    ],
)
def test_new_arguments_are_checked(call, message):
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        call()


@settings(max_examples=30)
@given(rope_specs(head_dims=[8, 24], layouts=["interleaved"], bases=[500000.0], min_rotary_dim=8))
def test_spec_choices_as_lists_and_a_minimum_rotary_dim(spec):
    assert spec.head_dim >= 8
    assert spec.layout == "interleaved"
    assert spec.base == 500000.0
    assert spec.rotary_dim >= 8
