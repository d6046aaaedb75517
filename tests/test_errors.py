"""Bad input: a TypeError or ValueError that names the parameter and the value received."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import rope_ref as rr
from rope_ref._core import validation


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"head_dim": 8.0}, TypeError, "`head_dim` must be an integer; got 8.0."),
        ({"head_dim": True}, TypeError, "`head_dim` must be an integer; got True."),
        ({"head_dim": 0}, ValueError, "`head_dim` must be at least 1; got 0."),
        ({"head_dim": 8, "rotary_dim": 7}, ValueError, "`rotary_dim` must be even; got 7."),
        ({"head_dim": 7}, ValueError, "`rotary_dim` must be even; got 7 (the default"),
        (
            {"head_dim": 8, "rotary_dim": 10},
            ValueError,
            "`rotary_dim` must not exceed head_dim - rotary_start (8); got 10.",
        ),
        (
            {"head_dim": 8, "rotary_start": 4, "rotary_dim": 6},
            ValueError,
            "`rotary_dim` must not exceed head_dim - rotary_start (4); got 6.",
        ),
        ({"head_dim": 8, "rotary_start": -1}, ValueError, "`rotary_start` must be at least 0"),
        ({"head_dim": 8, "rotary_start": 8}, ValueError, "`rotary_start` must be less than"),
        ({"head_dim": 8, "base": 1.0}, ValueError, "`base` must be greater than 1; got 1.0."),
        ({"head_dim": 8, "base": float("nan")}, ValueError, "`base` must be finite; got nan."),
        ({"head_dim": 8, "base": "1e4"}, TypeError, "`base` must be a real number; got '1e4'."),
        (
            {"head_dim": 8, "layout": "neox"},
            ValueError,
            "`layout` must be one of 'half', 'interleaved'; got 'neox'.",
        ),
        (
            {"head_dim": 8, "freqs": [1.0, 0.5]},
            ValueError,
            "`freqs` must have one entry per pair (4); got shape (2,).",
        ),
        ({"head_dim": 4, "freqs": [1.0, -0.5]}, ValueError, "`freqs` must be non-negative"),
        ({"head_dim": 4, "freqs": [1.0, float("inf")]}, ValueError, "`freqs` must be finite"),
        (
            {"head_dim": 4, "freqs": [1.0, 0.5], "base": 500.0},
            ValueError,
            "`freqs` replaces `base`; leave it at its default",
        ),
        (
            {"head_dim": 8, "sections": (1, 2)},
            ValueError,
            "`sections` must sum to n_pairs = rotary_dim // 2 (4); got (1, 2) (sum 3).",
        ),
        ({"head_dim": 8, "sections": (2, 0, 2)}, ValueError, "`sections` must be at least 1"),
        ({"head_dim": 8, "sections": 4}, TypeError, "`sections` must be a sequence"),
        (
            {"head_dim": 12, "sections": (1, 1, 4), "section_order": "interleaved"},
            ValueError,
            "`sections` must fit the interleaved order",
        ),
        (
            {"head_dim": 8, "section_order": "zigzag"},
            ValueError,
            "`section_order` must be one of 'chunked', 'interleaved'; got 'zigzag'.",
        ),
        ({"head_dim": 8, "scaling": 2.0}, TypeError, "`scaling` must be a scaling rule"),
        ({"head_dim": 8, "xpos": 512.0}, TypeError, "`xpos` must be an xPos rule"),
    ],
)
def test_spec_rejects_bad_fields(kwargs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        rr.RopeSpec(**kwargs)


def test_spec_is_frozen_and_hashable():
    spec = rr.RopeSpec(head_dim=8, freqs=np.array([1.0, 0.5, 0.25, 0.125]), sections=[2, 2])
    assert spec.freqs == (1.0, 0.5, 0.25, 0.125)
    assert spec.sections == (2, 2)
    assert hash(spec) == hash(rr.RopeSpec(head_dim=8, freqs=(1, 0.5, 0.25, 0.125), sections=(2, 2)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.base = 2.0  # type: ignore[misc]


X = np.ones((3, 8))


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: rr.apply_rope([[1.0, 2.0]]), TypeError, "`x` must be an array; got list."),
        (
            lambda: rr.apply_rope(np.ones((3, 8), dtype=np.int64)),
            TypeError,
            "`x` must have a real floating dtype; got int64.",
        ),
        (
            lambda: rr.apply_rope(np.ones((3, 8), dtype=bool)),
            TypeError,
            "`x` must have a real floating dtype; got bool.",
        ),
        (
            lambda: rr.apply_rope(np.ones((3, 8), dtype=np.complex128)),
            TypeError,
            "`x` must have a real floating dtype; got complex128.",
        ),
        (lambda: rr.apply_rope(np.float64(1.0)), ValueError, "`x` must have a feature axis"),
        (
            lambda: rr.apply_rope(X, rr.RopeSpec(head_dim=4)),
            ValueError,
            "`x` must have spec.head_dim = 4 features on its last axis; got shape (3, 8).",
        ),
        (lambda: rr.apply_rope(X, {"head_dim": 8}), TypeError, "`spec` must be a RopeSpec"),
        (
            lambda: rr.apply_rope(X, None, [0.0, np.nan, 1.0]),
            ValueError,
            "`positions` must be finite",
        ),
        (
            lambda: rr.apply_rope(X, None, np.array([True, False, True])),
            TypeError,
            "`positions` must have an integer or real floating dtype; got bool.",
        ),
        (
            lambda: rr.apply_rope(X, None, ["a", "b", "c"]),
            TypeError,
            "`positions` must hold integer or real numbers",
        ),
        (
            lambda: rr.apply_rope(X, None, [0, 1]),
            ValueError,
            "`positions` must broadcast to x.shape[:-1] = (3,)",
        ),
        (lambda: rr.apply_rope(X, offset=np.inf), ValueError, "`offset` must be finite; got inf."),
        (lambda: rr.apply_rope(X, offset="3"), TypeError, "`offset` must be a real number"),
        (
            lambda: rr.apply_rope(X, seq_axis=-1),
            ValueError,
            "`seq_axis` must name an axis of x other than the last",
        ),
        (lambda: rr.apply_rope(X, seq_axis=2), ValueError, "`seq_axis` must name an axis"),
        (lambda: rr.apply_rope(X, seq_axis=0.0), TypeError, "`seq_axis` must be an integer"),
        (lambda: rr.apply_rope(np.ones(8)), ValueError, "`x` must have a sequence axis"),
        (
            lambda: rr.apply_rope(X, form="polar"),
            ValueError,
            "`form` must be one of 'rotate_half', 'complex', 'matrix'; got 'polar'.",
        ),
        (
            lambda: rr.apply_rope(X, backend="triton"),
            ValueError,
            "`backend` must be one of 'reference', 'numba', 'cupy', 'auto', 'exact'; got 'triton'.",
        ),
        (lambda: rr.apply_rope(X, inverse=1), TypeError, "`inverse` must be True or False"),
        (
            lambda: rr.apply_rope(X, out=np.empty_like(X)),
            ValueError,
            "`out` is supported by the kernel backends",
        ),
        (lambda: rr.apply_rope(X, seq_len=0), ValueError, "`seq_len` must be positive; got 0.0."),
        (
            lambda: rr.apply_rope(X, role="value"),
            ValueError,
            "`role` must be one of 'query', 'key'; got 'value'.",
        ),
        (
            lambda: rr.apply_rope(X, rr.RopeSpec(head_dim=8, sections=(2, 2)), [1, 2, 3]),
            ValueError,
            "`positions` must have a trailing axis of length 2",
        ),
        (lambda: rr.apply_rope_qk(X, np.ones((3, 4))), ValueError, "`k` must have head_dim = 8"),
        (
            lambda: rr.apply_rope_qk(np.ones((5, 8)), X),
            ValueError,
            "`q` must not have more tokens (5) than there are key positions",
        ),
        (lambda: rr.inv_freq("spec"), TypeError, "`spec` must be a RopeSpec; got str."),
        (
            lambda: rr.rope_angles(rr.RopeSpec(head_dim=8), [1.0, np.inf]),
            ValueError,
            "`positions` must be finite",
        ),
        (
            lambda: rr.rotation_matrix(rr.RopeSpec(head_dim=8), [1.0, 2.0]),
            ValueError,
            "`position` must be a single position",
        ),
        (lambda: rr.convert_layout(X, src="neox"), ValueError, "`src` must be one of"),
        (
            lambda: rr.permute_weights(np.ones((12, 4)), n_heads=5),
            ValueError,
            "`w` must be (n_heads * head_dim, in_features)",
        ),
        (
            lambda: rr.permute_weights(np.ones((12, 4)), n_heads=0),
            ValueError,
            "`n_heads` must be at least 1; got 0.",
        ),
        (
            lambda: rr.permute_weights(np.ones((12, 4)), n_heads=2, spec=rr.RopeSpec(head_dim=4)),
            ValueError,
            "`spec` must be a RopeSpec with head_dim = w.shape[0] // n_heads = 6",
        ),
        (lambda: rr.sinusoidal_embedding([1, 2], 5), ValueError, "`dim` must be even; got 5."),
    ],
)
def test_bad_arguments_name_the_parameter(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()


def test_positions_from_another_namespace_are_refused():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=re.escape("`positions` must be in the namespace of `x`")):
        rr.apply_rope(np.ones((3, 8)), None, torch.arange(3))


def test_numpy_positions_are_accepted_with_any_namespace():
    torch = pytest.importorskip("torch")
    y = rr.apply_rope(torch.ones(3, 8, dtype=torch.float64), None, np.arange(3))
    assert isinstance(y, torch.Tensor)


def test_missing_kernel_backend_names_what_to_install():
    reasons = rr.available_backends()
    for name in ("numba", "cupy"):
        if reasons[name] is None:
            continue
        with pytest.raises(ModuleNotFoundError, match=f"backend='{name}' is not available"):
            rr.apply_rope(X, backend=name)


def test_kernel_backends_refuse_other_forms():
    if rr.available_backends()["numba"] is not None:
        pytest.skip("the numba backend is not available here")
    with pytest.raises(ValueError, match="`form` applies to backend='reference' only"):
        rr.apply_rope(X, form="complex", backend="numba")


def test_bad_scaling_rule_output_is_caught():
    @dataclasses.dataclass(frozen=True)
    class Broken:
        def inv_freq(self, inv_freq, *, base, rotary_dim, seq_len):
            return inv_freq[:-1]

        def attention_factor(self, *, seq_len):
            return 1.0

    spec = rr.RopeSpec(head_dim=8, scaling=Broken())
    with pytest.raises(ValueError, match=re.escape("`spec.scaling` must give 4 finite inverse")):
        rr.inv_freq(spec)


# --- masked arrays, table dtypes, the table cache, analysis arguments ---------------------

MASKED = np.ma.masked_array(np.ones((3, 8)), mask=np.eye(3, 8, dtype=bool))


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: rr.apply_rope(MASKED), TypeError, "`x` must not be a masked array"),
        (
            lambda: rr.apply_rope(MASKED, backend="numba"),
            TypeError,
            "`x` must not be a masked array",
        ),
        (
            lambda: rr.apply_rope(X, None, np.ma.masked_array([0, 1, 2], mask=[0, 1, 0])),
            TypeError,
            "`positions` must not be a masked array",
        ),
        (lambda: rr.apply_rope_qk(X, MASKED), TypeError, "`k` must not be a masked array"),
        (
            lambda: rr.rope_cos_sin(rr.RopeSpec(8), np.ma.masked_array([1.0])),
            TypeError,
            "`positions` must not be a masked array",
        ),
        (lambda: rr.convert_layout(MASKED), TypeError, "`x` must not be a masked array"),
        (
            lambda: rr.analysis.discrimination(8, np.ma.masked_array([1.0, 2.0])),
            TypeError,
            "`distances` must not be a masked array",
        ),
        (
            lambda: rr.apply_rope(X, None, np.array([0, 1, 2], dtype=object)),
            TypeError,
            "`positions` must have an integer or real floating dtype; got object.",
        ),
        (
            lambda: rr.apply_rope(X, None, np.array([0, 1, 2], dtype=object), backend="numba"),
            TypeError,
            "`positions` must have an integer or real floating dtype; got object.",
        ),
        (
            lambda: rr.apply_rope(X, None, np.array(["0", "1", "2"])),
            TypeError,
            "`positions` must have an integer or real floating dtype; got <U1.",
        ),
        (
            lambda: rr.analysis.base_lower_bound(128, 10**5, progress=5),
            TypeError,
            "`progress` must be a callable or None; got 5.",
        ),
        (
            lambda: rr.analysis.base_lower_bound(2**34, 10),
            ValueError,
            "`dim` must be at most 1024",
        ),
    ]
    + [
        (
            lambda dtype=dtype: rr.rope_cos_sin(rr.RopeSpec(8), [0, 1, 2], dtype=dtype),
            TypeError,
            "`dtype` must be a real floating dtype of array_api_compat.numpy",
        )
        for dtype in (np.int32, bool, np.uint8, object, np.complex128, "bogus", "int64")
    ],
)
def test_more_bad_arguments_name_the_parameter(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()


@pytest.mark.parametrize("dtype", [np.float16, np.float32, "float32", "f8", np.dtype(np.float64)])
def test_rope_cos_sin_takes_real_floating_dtypes(dtype):
    cos, sin = rr.rope_cos_sin(rr.RopeSpec(4), [0, 1, 2], dtype=dtype)
    assert cos.dtype == sin.dtype == np.dtype(dtype)
    expected = np.cos(np.array([0.0, 1.0, 2.0])[:, None] * rr.inv_freq(rr.RopeSpec(4)))
    np.testing.assert_array_equal(cos, expected.astype(dtype))


@pytest.mark.parametrize(
    ("valid", "bad", "message"),
    [
        ({"seq_len": 1}, {"seq_len": True}, "`seq_len` must be a real number; got True."),
        ({"seq_axis": 0}, {"seq_axis": False}, "`seq_axis` must be an integer; got False."),
        ({"seq_axis": 1}, {"seq_axis": True}, "`seq_axis` must be an integer; got True."),
        ({"offset": 1}, {"offset": True}, "`offset` must be a real number; got True."),
    ],
)
def test_a_table_cache_hit_refuses_what_a_miss_refuses(valid, bad, message):
    x = np.ones((1, 3, 8))
    positions = np.arange(3)
    rr.apply_rope(x, None, positions, **valid)  # builds and caches the tables
    for call_positions in (positions, None):
        with pytest.raises(TypeError, match=re.escape(message)):
            rr.apply_rope(x, None, call_positions, **bad)


# --- errors that name the argument they are about ----------------------------------------

SPEC8 = rr.RopeSpec(8)
Q, K = np.ones((3, 8)), np.ones((5, 8))


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda: rr.rerotate(K, SPEC8, from_seq_len=-1, to_seq_len=4),
            ValueError,
            "`from_seq_len` must be positive; got -1.0.",
        ),
        (
            lambda: rr.rerotate(K, SPEC8, from_seq_len=4, to_seq_len=0),
            ValueError,
            "`to_seq_len` must be positive; got 0.0.",
        ),
        (
            lambda: rr.rerotate(K, SPEC8, from_seq_len=4, to_seq_len="8"),
            TypeError,
            "`to_seq_len` must be a real number; got '8'.",
        ),
        (
            lambda: rr.rerotate(K, SPEC8, from_seq_len=None, to_seq_len=8),
            TypeError,
            "`from_seq_len` must be a real number; got None.",
        ),
        (
            lambda: rr.rerotate(K, SPEC8, from_seq_len=np.inf, to_seq_len=8),
            ValueError,
            "`from_seq_len` must be finite; got inf.",
        ),
        (
            lambda: rr.apply_rope_qk(Q, K, SPEC8, k_positions=np.arange(4)),
            ValueError,
            "`k_positions` must broadcast to k.shape[:-1] = (5,)",
        ),
        (
            lambda: rr.apply_rope_qk(Q, K, SPEC8, np.arange(3), k_positions=np.arange(6)),
            ValueError,
            "`k_positions` must broadcast to k.shape[:-1] = (5,)",
        ),
        (
            lambda: rr.apply_rope_qk(Q, K, SPEC8, np.arange(3), k_positions=[0, 1, "2", 3, 4]),
            TypeError,
            "`k_positions` must hold integer or real numbers",
        ),
        (
            lambda: rr.apply_rope_qk(Q, K, SPEC8, k_positions=np.full(5, np.nan)),
            ValueError,
            "`k_positions` must be finite",
        ),
        (
            lambda: rr.testing.error_model("float32", angle_dtype="float16"),
            ValueError,
            "`angle_dtype` must be float32 or float64",
        ),
        (
            lambda: rr.testing.error_model("float32", angle_dtype=np.int8),
            ValueError,
            "`angle_dtype` must be float32 or float64",
        ),
    ],
)
def test_errors_name_the_argument_they_are_about(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()


def test_a_16_bit_angle_dtype_is_refused_by_the_oracle():
    # angles in float16 are off by ~0.25 rad at position 1000; a model that granted them
    # would pass a kernel that is wrong there
    x = np.ones((1, 8), dtype=np.float32)
    p = np.array([1000])
    with pytest.raises(ValueError, match="`angle_dtype` must be float32 or float64"):
        rr.testing.assert_rope_close(rr.apply_rope(x, SPEC8, p), x, SPEC8, p, angle_dtype="float16")
    with pytest.raises(ValueError, match="`angle_dtype` must be float32 or float64"):
        rr.testing.rope_atol(SPEC8, p, dtype="float32", angle_dtype="bfloat16")


@pytest.mark.parametrize(
    ("make", "name", "kind"),
    [
        (lambda t: t.ones(3, 8).to_sparse(), "x", "layout torch.sparse_coo"),
        (lambda t: t.ones(3, 8).to_sparse_csr(), "x", "layout torch.sparse_csr"),
        (lambda t: t.nested.nested_tensor([t.ones(2, 8), t.ones(3, 8)]), "x", "nested"),
        (
            lambda t: t.nested.nested_tensor([t.ones(2, 8), t.ones(3, 8)], layout=t.jagged),
            "x",
            "nested",
        ),
    ],
)
@pytest.mark.filterwarnings("ignore:.*(nested tensors|Sparse CSR):UserWarning")
def test_sparse_and_nested_tensors_are_refused_by_name(make, name, kind):
    torch = pytest.importorskip("torch")
    x = make(torch)
    for call in (
        lambda: rr.apply_rope(x, SPEC8),
        lambda: rr.convert_layout(x, SPEC8, src="interleaved", dst="half"),
        lambda: rr.rerotate(x, SPEC8, from_seq_len=3, to_seq_len=5),
    ):
        with pytest.raises(TypeError, match=f"`{name}` must be a dense \\(strided\\) tensor"):
            call()
    dense = torch.ones(3, 8)
    with pytest.raises(TypeError, match=f"`k` must be a dense .* {kind}"):
        rr.apply_rope_qk(dense, x, SPEC8)
    with pytest.raises(TypeError, match=f"`q` must be a dense .* {kind}"):
        rr.apply_rope_qk(x, dense, SPEC8)


def test_sparse_positions_are_refused_by_name():
    torch = pytest.importorskip("torch")
    sparse = torch.arange(3).to_sparse()
    with pytest.raises(TypeError, match="`positions` must be a dense"):
        rr.apply_rope(torch.ones(3, 8), SPEC8, sparse)
    with pytest.raises(TypeError, match="`positions` must be a dense"):
        rr.rope_cos_sin(SPEC8, sparse)


def _unknown_rows(shape):
    da = pytest.importorskip("dask.array")
    x = da.ones(shape, chunks=1)
    return x[x[(slice(None), *(0,) * (len(shape) - 1))] > 0]  # rows known only when computed


@pytest.mark.parametrize(
    "call",
    [
        lambda x, x3: rr.apply_rope(x, SPEC8),
        lambda x, x3: rr.apply_rope(x, SPEC8, np.arange(6)),
        lambda x, x3: rr.apply_rope(x3, SPEC8),  # unknown batch, known sequence
        lambda x, x3: rr.apply_rope(x3, SPEC8, np.arange(6), backend="auto"),
        lambda x, x3: rr.rerotate(x, SPEC8, from_seq_len=3, to_seq_len=5),
        lambda x, x3: rr.convert_layout(x, SPEC8, src="interleaved", dst="half"),
    ],
)
def test_dask_arrays_of_unknown_size_are_refused_by_name(call):
    x, x3 = _unknown_rows((6, 8)), _unknown_rows((2, 6, 8))
    with pytest.raises(ValueError, match=re.escape("`x` must have a known size on every axis")):
        call(x, x3)


def test_dask_queries_or_keys_of_unknown_size_are_refused_by_name():
    da = pytest.importorskip("dask.array")
    unknown, known = _unknown_rows((6, 8)), da.ones((6, 8))
    with pytest.raises(ValueError, match=re.escape("`q` must have a known size on every axis")):
        rr.apply_rope_qk(unknown, known, SPEC8)
    with pytest.raises(ValueError, match=re.escape("`k` must have a known size on every axis")):
        rr.apply_rope_qk(known, unknown, SPEC8)
    rows = unknown.compute_chunk_sizes()  # the way out the message gives
    np.testing.assert_allclose(
        rr.apply_rope(rows, SPEC8).compute(), rr.apply_rope(K.repeat(2, 0)[:6], SPEC8)
    )


def test_rotation_matrix_takes_seq_len_and_role_by_name_only():
    """Catches: the keyword-only marker of `rotation_matrix` dropped."""
    with pytest.raises(TypeError):
        rr.rotation_matrix(rr.RopeSpec(4), 1.0, 8.0)  # type: ignore[call-arg]


def test_real_checks_at_their_edges():
    """Catches: 0 refused as non-negative; a Python int past float range not caught."""
    assert validation.check_nonnegative("x", 0.0) == 0.0
    assert validation.check_nonnegative("x", 0) == 0.0
    with pytest.raises(ValueError, match=r"`x` must be non-negative; got -0\.5"):
        validation.check_nonnegative("x", -0.5)
    with pytest.raises(ValueError, match=r"`x` must be finite; got inf"):
        validation.check_real("x", 10**400)
    with pytest.raises(ValueError, match=r"`x` must be finite; got -inf"):
        validation.check_real("x", -(10**400))


@pytest.mark.parametrize(("offset", "error"), [("x", TypeError), (float("nan"), ValueError)])
def test_rope_atol_names_a_bad_offset(offset: object, error: type[Exception]) -> None:
    """`rope_atol(offset="x")` names `offset` (it was NumPy's "could not convert string")."""
    from rope_ref.testing import rope_atol

    with pytest.raises(error, match="`offset`"):
        rope_atol(rr.RopeSpec(8), [1, 2], dtype="float32", offset=offset)
