"""Interleaved pairs read, half order written (DeepSeek-V3 / Mistral 4 ``rope_interleave``).

Every backend against a formula written here: rotate pairs ``(2j, 2j + 1)`` and write the
first members to ``j`` and the second to ``j + n``; HF's own
``apply_rotary_pos_emb_interleave`` where transformers is installed; the CUDA kernel through
its host emulation (nvcc, no GPU).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rope_ref as rr

HEAD, START, ROTARY = 24, 4, 16
SPEC = rr.RopeSpec(
    HEAD, rotary_dim=ROTARY, rotary_start=START, layout="interleaved", output_layout="half"
)


def _expected(x: np.ndarray, p: np.ndarray, *, inverse: bool = False) -> np.ndarray:
    n = ROTARY // 2
    theta = 10000.0 ** (-np.arange(n) * 2.0 / ROTARY)
    angle = p[:, None] * theta * (-1.0 if inverse else 1.0)
    c, s = np.cos(angle), np.sin(angle)
    y = x.astype(np.float64).copy()
    rot = y[..., START : START + ROTARY]
    if inverse:  # read half order, write interleaved pairs
        a, b = rot[..., :n], rot[..., n:]
        out = np.stack([a * c - b * s, b * c + a * s], axis=-1).reshape(rot.shape)
    else:
        a, b = rot[..., 0::2], rot[..., 1::2]
        out = np.concatenate([a * c - b * s, b * c + a * s], axis=-1)
    y[..., START : START + ROTARY] = out
    return y


def _inputs(dtype: type) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    return rng.standard_normal((2, 3, 9, HEAD)).astype(dtype), np.arange(9) * 4099.0


def test_spec_field() -> None:
    assert SPEC.written_layout == "half"
    assert rr.RopeSpec(8, layout="half", output_layout="half").output_layout is None
    with pytest.raises(ValueError, match=r"`output_layout` must be one of"):
        rr.RopeSpec(8, output_layout="both")


@pytest.mark.parametrize("form", ["rotate_half", "complex", "matrix"])
@pytest.mark.parametrize("inverse", [False, True])
def test_reference_against_the_formula(inverse: bool, form: str) -> None:
    x, p = _inputs(np.float64)
    y = rr.apply_rope(x, SPEC, p, inverse=inverse, form=form)
    np.testing.assert_allclose(y, _expected(x, p, inverse=inverse), rtol=0, atol=1e-12)
    back = rr.apply_rope(y, SPEC, p, inverse=not inverse)
    np.testing.assert_allclose(back, x, rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("in_place", [False, True])
def test_numba(dtype: type, inverse: bool, in_place: bool) -> None:
    pytest.importorskip("numba")
    x, p = _inputs(dtype)
    expected = rr.apply_rope(x, SPEC, p, inverse=inverse)
    work = x.copy()
    out = work if in_place else None
    y = rr.apply_rope(work, SPEC, p, inverse=inverse, backend="numba", out=out)
    tolerances: dict[Any, float] = {np.float16: 2e-3, np.float32: 1e-6, np.float64: 1e-12}
    tol = tolerances[dtype]
    np.testing.assert_allclose(y.astype(np.float64), expected.astype(np.float64), atol=tol)
    np.testing.assert_allclose(
        y.astype(np.float64), _expected(x, p, inverse=inverse), atol=4 * tol + 1e-12
    )


@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("in_place", [False, True])
def test_numba_bfloat16(inverse: bool, in_place: bool) -> None:
    pytest.importorskip("numba")
    bf16 = np.dtype(pytest.importorskip("ml_dtypes").bfloat16)
    x, p = _inputs(np.float32)
    x = x.astype(bf16)
    work = x.copy()
    y = rr.apply_rope(
        work, SPEC, p, inverse=inverse, backend="numba", out=work if in_place else None
    )
    assert y.dtype == bf16
    expected = _expected(x.astype(np.float64), p, inverse=inverse)
    # one rounding to bfloat16 (8 bits) of a float32 rotation: within 2**-8 of the largest pair
    np.testing.assert_allclose(y.astype(np.float64), expected, rtol=0, atol=2.0**-8 * 4)


@pytest.mark.parametrize("inverse", [False, True])
def test_exact_backend(inverse: bool) -> None:
    pytest.importorskip("mpmath")
    x, p = _inputs(np.float32)
    y = rr.apply_rope(x, SPEC, p, inverse=inverse, backend="exact")
    # correctly rounded float32 of the formula: within half an ulp of |y| plus float64 slack
    expected = _expected(x.astype(np.float64), p, inverse=inverse)
    np.testing.assert_allclose(y.astype(np.float64), expected, rtol=2.0**-24, atol=1e-12)


def test_cuda_kernel_host_emulation() -> None:
    from tests.cuda_host import emulation

    if emulation.nvcc() is None:
        pytest.skip("nvcc is not on PATH")
    harness = emulation.shared_harness()
    for dtype in (np.float32, np.float64):
        x, p = _inputs(dtype)
        cos, sin = rr.rope_cos_sin(SPEC, p)
        cos, sin = (np.asarray(t, dtype=dtype)[None, None] for t in (cos, sin))
        for inverse in (False, True):
            for in_place in (False, True):
                work = x.copy()
                harness.launches.clear()
                (out,) = harness.rotate(
                    [(work, cos, sin, work if in_place else None)],
                    layout="interleaved>half",
                    rotary_start=START,
                    inverse=inverse,
                )
                assert [plan.vector for plan in harness.launches] == [False]
                tol = 1e-5 if dtype == np.float32 else 1e-12
                np.testing.assert_allclose(
                    np.asarray(out, dtype=np.float64), _expected(x, p, inverse=inverse), atol=tol
                )


def test_hf_apply_rotary_pos_emb_interleave() -> None:
    torch = pytest.importorskip("torch")
    dsv3 = pytest.importorskip("transformers.models.deepseek_v3.modeling_deepseek_v3")
    spec = rr.RopeSpec(64, layout="interleaved", output_layout="half")
    p = np.array([0, 1, 5, 4096, 65535], dtype=np.float64)
    x = np.random.default_rng(3).standard_normal((1, 2, 5, 64))
    cos, sin = rr.rope_cos_sin(spec, p)
    full = (np.concatenate([t, t], axis=-1)[None] for t in (cos, sin))
    c, s = (torch.from_numpy(t) for t in full)
    q = torch.from_numpy(x)
    ours = rr.apply_rope(x, spec, p)
    theirs, _ = dsv3.apply_rotary_pos_emb_interleave(q, q.clone(), c, s)
    np.testing.assert_allclose(ours, theirs.numpy(), rtol=0, atol=1e-12)
