"""Callables for `rope-ref check` in the tests: real peer code, and planted bugs.

The planted bugs each reproduce one failure seen in real RoPE code (see the peer survey):
a flipped rotation, an off-by-one position, positions held in float16, float32 angles,
frequencies over the wrong dimension, a hard-coded base, partial rotary ignored, a short
cos/sin cache read as identity, a dropped attention factor, the wrong pairing layout.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

# --- a plain NumPy RoPE with knobs, for the planted bugs ----------------------------------------


def _rope(
    x: np.ndarray,
    positions: np.ndarray,
    *,
    base: float = 10000.0,
    rotary_dim: int | None = None,
    exponent_dim: int | None = None,
    layout: str = "half",
    sign: float = 1.0,
    position_dtype: Any = np.float64,
    factor: float = 1.0,
    table_len: int | None = None,
) -> np.ndarray:
    """RoPE of x (..., seq, head_dim) at positions (seq,), written out in float64."""
    d = x.shape[-1] if rotary_dim is None else rotary_dim
    n = d // 2
    inv = base ** (-np.arange(0, d, 2, dtype=np.float64) / (exponent_dim or d))
    p = np.asarray(positions).astype(position_dtype).astype(np.float64)
    angles = p[:, None] * inv
    cos, sin = np.cos(angles) * factor, np.sin(angles) * factor
    if table_len is not None:  # a masked load past the end of a cos/sin cache: cos=1, sin=0
        beyond = np.asarray(positions) >= table_len
        cos[beyond], sin[beyond] = 1.0, 0.0
    xr = x[..., :d].astype(np.float64)
    a, b = (xr[..., :n], xr[..., n:]) if layout == "half" else (xr[..., 0::2], xr[..., 1::2])
    a2, b2 = a * cos - sign * b * sin, b * cos + sign * a * sin
    if layout == "half":
        rotated = np.concatenate([a2, b2], axis=-1)
    else:
        rotated = np.stack([a2, b2], axis=-1).reshape(xr.shape)
    return np.concatenate([rotated, x[..., d:]], axis=-1).astype(x.dtype)


def correct_half(x, positions):
    return _rope(x, positions)


def correct_half_bshd(x, positions):
    """x (batch, seq, heads, head_dim)."""
    return np.swapaxes(_rope(np.swapaxes(x, 1, 2), positions), 1, 2)


def correct_half_sbhd(x, positions):
    """x (seq, batch, heads, head_dim)."""
    return np.transpose(_rope(np.transpose(x, (1, 2, 0, 3)), positions), (2, 0, 1, 3))


def rounded_to_float32(x, positions):
    """The float64 RoPE of x rounded once to float32 (whatever x's dtype)."""
    return _rope(x.astype(np.float64), positions).astype(np.float32)


def correct_interleaved(x, positions):
    return _rope(x, positions, layout="interleaved")


def correct_partial_32(x, positions):
    return _rope(x, positions, rotary_dim=32)


def sign_flipped(x, positions):
    return _rope(x, positions, sign=-1.0)


def off_by_one(x, positions):
    return _rope(x, positions + 1)


def positions_ignored(x, positions):
    return _rope(x, np.arange(x.shape[-2]))


def float16_positions(x, positions):
    return _rope(x, positions, position_dtype=np.float16)


def float32_angles(x, positions):
    """HF's float32 recipe: inv_freq and positions * inv_freq in float32."""
    d = x.shape[-1]
    f32 = np.float32
    inv = (f32(1.0) / f32(10000.0) ** (np.arange(0, d, 2).astype(f32) / f32(d))).astype(f32)
    angles = (np.asarray(positions).astype(f32)[:, None] * inv).astype(f32).astype(np.float64)
    cos, sin = np.cos(angles), np.sin(angles)
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1).astype(x.dtype)


def float16_interleaved(x, positions):
    """Interleaved RoPE with positions held in float16: NaN past 65504."""
    return _rope(x, positions, layout="interleaved", position_dtype=np.float16)


def computes_in_float32(x, positions):
    """Correct RoPE computed and returned in float32, whatever the input's dtype."""
    return _rope(x.astype(np.float32), positions)


def float64_result(x, positions):
    """Correct RoPE returned as float64 for any input (an upcast: not the dtype asked for)."""
    return _rope(x.astype(np.float64), positions)


def hf_half_result(q, k, cos, sin):
    """transformers' rotation, results returned as float16 (`.half()`)."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    q_out, k_out = apply_rotary_pos_emb(q, k, cos, sin)
    return q_out.half(), k_out.half()


def head_dim_exponent_32(x, positions):
    """Partial rotary (32 of head_dim) with theta_j = base^(-2j/head_dim)."""
    return _rope(x, positions, rotary_dim=32, exponent_dim=x.shape[-1])


def base_hardcoded(x, positions):
    return _rope(x, positions, base=10000.0)


def whole_head(x, positions):
    """Rotates every feature: partial rotary ignored."""
    return _rope(x, positions)


def cache_2048(x, positions):
    return _rope(x, positions, table_len=2048)


def no_attention_factor(x, positions):
    return _rope(x, positions)


def attention_factor_125(x, positions):
    return _rope(x, positions, factor=1.25)


def raises(x, positions):
    msg = "kernel launch failed"
    raise RuntimeError(msg)


def wrong_shape(x, positions):
    return x[..., :-1]


def returns_none(x, positions):
    return None


# --- rotary-embedding-torch through the plain convention ----------------------------------------


@functools.cache
def _lucidrains_module(dim: int) -> Any:
    from rotary_embedding_torch import RotaryEmbedding

    return RotaryEmbedding(dim=dim)


def lucidrains_plain(x, positions):
    """rotary_embedding_torch: freqs for arbitrary positions, then apply_rotary_emb."""
    import torch
    from rotary_embedding_torch import apply_rotary_emb

    t = torch.from_numpy(x)
    module = _lucidrains_module(x.shape[-1])
    freqs = module(torch.from_numpy(positions))  # (seq, dim), float32 angles, interleaved
    return apply_rotary_emb(freqs, t).numpy()


# --- Meta LLaMA (llama/model.py): precompute_freqs_cis and apply_rotary_emb ----------------------


def precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0):
    import torch

    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    return torch.polar(torch.ones_like(freqs), freqs)  # complex64


def reshape_for_broadcast(freqs_cis, x):
    ndim = x.ndim
    assert ndim > 1
    assert freqs_cis.shape == (x.shape[1], x.shape[-1])
    shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(*shape)


def apply_rotary_emb(xq, xk, freqs_cis):
    import torch

    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def meta_plain(x, positions):
    """Meta's table and rotation, driven by arbitrary positions (plain convention)."""
    import torch

    t = torch.from_numpy(x).transpose(1, 2)  # (batch, seq, heads, head_dim), as Meta's model
    table = precompute_freqs_cis(x.shape[-1], int(positions.max()) + 1)
    out, _ = apply_rotary_emb(t, t, table[torch.from_numpy(positions)])
    return out.transpose(1, 2).numpy()


def meta_conjugate(xq, xk, freqs_cis):
    """Meta's apply_rotary_emb fed the conjugate table: rotates the wrong way."""
    return apply_rotary_emb(xq, xk, freqs_cis.conj())


# --- flash-attn's pure-torch reference (cos_sin convention) -------------------------------------


def _rotate_half(x, interleaved=False):
    import torch

    if not interleaved:
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def flash_apply_rotary_emb_torch(x, cos, sin, interleaved=False):
    """flash_attn.layers.rotary.apply_rotary_emb_torch, without einops: x (b, s, h, d)."""
    import torch

    ro_dim = cos.shape[-1] * 2
    assert ro_dim <= x.shape[-1]
    if interleaved:
        cos, sin = cos.repeat_interleave(2, dim=-1), sin.repeat_interleave(2, dim=-1)
    else:
        cos, sin = torch.cat([cos, cos], dim=-1), torch.cat([sin, sin], dim=-1)
    cos, sin = cos[:, None, :], sin[:, None, :]
    rotated = x[..., :ro_dim] * cos + _rotate_half(x[..., :ro_dim], interleaved) * sin
    return torch.cat([rotated, x[..., ro_dim:]], dim=-1)


def flash_interleaved(x, cos, sin):
    return flash_apply_rotary_emb_torch(x, cos, sin, interleaved=True)


def flash_sin_negated(x, cos, sin):
    return flash_apply_rotary_emb_torch(x, cos, -sin)


# --- HF-style hf-convention bugs -----------------------------------------------------------------


def hf_rotate_half_wrong_sign(q, k, cos, sin):
    """rotate_half returning (x2, -x1): the rotation runs backwards."""
    import torch

    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
        return torch.cat((x2, -x1), dim=-1)

    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def hf_first_row_positions(q, k, cos, sin):
    """Uses batch row 0's cos/sin for every row (per-row position_ids ignored)."""
    cos, sin = cos[:1].unsqueeze(1), sin[:1].unsqueeze(1)
    from transformers.models.llama.modeling_llama import rotate_half

    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def hf_bfloat16_tables(q, k, cos, sin):
    """Rounds cos/sin to bfloat16 before rotating float32 inputs."""
    import torch
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    return apply_rotary_pos_emb(
        q, k, cos.to(torch.bfloat16).float(), sin.to(torch.bfloat16).float()
    )


# --- targets that try to fool the checker -------------------------------------------------------


def zeroes_input_plain(x, positions):
    x[...] = 0.0
    return x


def zeroes_input_cos_sin(x, cos, sin):
    """Overwrites its input and returns it: must never pass."""
    x.zero_()
    return x


def zeroes_inputs_hf(q, k, cos, sin):
    q.zero_()
    k.zero_()
    return q, k


def zeroes_input_complex(x, freqs_cis):
    x.zero_()
    return x


def flash_in_place(x, cos, sin):
    """A correct rotation written into x itself (as vLLM's and flash-attn's kernels do)."""
    x.copy_(flash_apply_rotary_emb_torch(x, cos, sin))


def hf_in_place(q, k, cos, sin):
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    q_out, k_out = apply_rotary_pos_emb(q, k, cos, sin)
    q.copy_(q_out)
    k.copy_(k_out)


def exits_zero(x, positions):
    raise SystemExit(0)


def os_exit_zero(x, positions):
    """Ends the process with status 0 in the middle of the call."""
    import os

    os._exit(0)


def swallows_the_timeout(x, positions):
    """Catches every exception (the timer's too) around a sleep, forever."""
    import contextlib
    import time

    while True:
        with contextlib.suppress(BaseException):
            time.sleep(0.05)


def ignores_the_alarm(x, positions):
    """Ignores SIGALRM, then sleeps for a long time."""
    import signal
    import time

    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    time.sleep(60)


def late_but_correct(x, positions):
    """Swallows the timer's exception, then returns a correct result after the limit."""
    import contextlib
    import time

    with contextlib.suppress(BaseException):
        time.sleep(3)
    time.sleep(0.5)
    return _rope(x, positions)


def raises_keyboard_interrupt(x, positions):
    raise KeyboardInterrupt


def raises_generator_exit(x, positions):
    raise GeneratorExit


def closes_stdout(x, positions):
    """Closes sys.stdout, then returns a correct result."""
    import sys

    sys.stdout.close()
    return _rope(x, positions)


def hangs(x, positions):
    import time

    while True:
        time.sleep(0.01)


# --- adapters that take the spec ----------------------------------------------------------------


def spec_driven(x, positions, *, spec):
    """The oracle itself, told the spec: conformant for any --hf-config."""
    import rope_ref as rr

    grid_ndim = positions.ndim - (spec.sections is not None)
    if grid_ndim == 2:  # (batch, seq) ids against (batch, heads, seq, dim)
        positions = positions[:, None]
    return rr.apply_rope(x, spec, positions)


def spec_driven_sign_flipped(x, positions, *, spec):
    """The oracle told the spec, rotating the wrong way."""
    import rope_ref as rr

    return rr.apply_rope(x, spec, positions, inverse=True)


def jax_half(x, positions):
    """RoPE in JAX, half layout, angles in float32 (JAX's default precision)."""
    import jax.numpy as jnp

    d = x.shape[-1]
    inv = 1.0 / 10000.0 ** (jnp.arange(0, d, 2, dtype=jnp.float32) / d)
    angles = positions.astype(jnp.float32)[:, None] * inv
    cos, sin = jnp.cos(angles).astype(x.dtype), jnp.sin(angles).astype(x.dtype)
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return jnp.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def fields_driven(x, positions, base, head_dim):
    """A hand-written RoPE that reads base and head_dim from the keywords it is given."""
    assert x.shape[-1] == head_dim
    return _rope(x, positions, base=base)


def torchtune_rope(x, input_pos, *, spec):
    """torchtune's RotaryPositionalEmbeddings: x (b, s, h, d) torch, input_pos (b, s)."""
    from torchtune.modules import RotaryPositionalEmbeddings

    module = _torchtune_module(RotaryPositionalEmbeddings, spec.rotary_dim, spec.base)
    return module(x, input_pos=input_pos)


@functools.cache
def _torchtune_module(cls, dim, base, **kwargs):
    return cls(dim=dim, max_seq_len=2**15 + 1, base=int(base), **kwargs)


def mlx_fast_rope(x, offset, *, spec):
    """MLX's fused kernel: x (b, h, s, d) mlx, positions offset + arange(s)."""
    import mlx.core as mx

    return mx.fast.rope(
        x,
        spec.rotary_dim,
        traditional=spec.layout == "interleaved",
        base=spec.base,
        scale=1.0,
        offset=offset,
    )


def torchtune_llama3(x, input_pos, *, spec):
    """torchtune's Llama3ScaledRoPE with its defaults (factor 8, original length 8192)."""
    from torchtune.models.llama3_1._position_embeddings import Llama3ScaledRoPE

    module = _torchtune_module(Llama3ScaledRoPE, spec.rotary_dim, spec.base)
    return module(x, input_pos=input_pos)


# --- full-width tables: litgpt and Megatron-core ----------------------------------------------


def litgpt_apply_rope(x, cos, sin):
    """litgpt's apply_rope: full-width cos/sin (T, hs) or (B, T, hs)."""
    import torch

    head_size = x.size(-1)
    x1 = x[..., : head_size // 2]
    x2 = x[..., head_size // 2 :]
    rotated = torch.cat((-x2, x1), dim=-1)
    if cos.dim() > 1:
        cos = cos.unsqueeze(-3)
        sin = sin.unsqueeze(-3)
    roped = (x * cos) + (rotated * sin)
    return roped.to(dtype=x.dtype)


def _megatron_rotate_half(x, rotary_interleaved):
    import torch

    if not rotary_interleaved:
        x1, x2 = torch.chunk(x, 2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)
    x1 = x[:, :, :, ::2]
    x2 = x[:, :, :, 1::2]
    x_new = torch.stack((-x2, x1), dim=-1)
    return x_new.view(x_new.shape[0], x_new.shape[1], x_new.shape[2], -1)


def megatron_apply_rotary_pos_emb(t, freqs, rotary_interleaved=False):
    """Megatron-core's _apply_rotary_pos_emb_bshd: angles (seq, 1, 1, rot_dim)."""
    import torch

    rot_dim = freqs.shape[-1]
    t, t_pass = t[..., :rot_dim], t[..., rot_dim:]
    cos_ = torch.cos(freqs).to(t.dtype)
    sin_ = torch.sin(freqs).to(t.dtype)
    t = (t * cos_) + (_megatron_rotate_half(t, rotary_interleaved) * sin_)
    return torch.cat((t, t_pass), dim=-1)


def megatron_interleaved_rotation(t, freqs):
    """Megatron's interleaved rotation applied to a table built for the half layout."""
    return megatron_apply_rotary_pos_emb(t, freqs, rotary_interleaved=True)


def leaves_a_sleeper(x, positions):
    """Forks a process that keeps the inherited descriptors open, then returns a correct
    result (its pid goes to the file named by ROPE_REF_TEST_PIDFILE)."""
    import os
    import time

    pid = os.fork()
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    with open(os.environ["ROPE_REF_TEST_PIDFILE"], "a") as out:
        out.write(f"{pid}\n")
    return _rope(x, positions)


def litgpt_interleaved_rotation(x, cos, sin):
    """litgpt's full-width half-layout table applied with the (2j, 2j + 1) rotation."""
    import torch

    x1, x2 = x[..., 0::2], x[..., 1::2]
    rotated = torch.stack((-x2, x1), dim=-1).flatten(-2)
    return (x * cos.unsqueeze(-3)) + (rotated * sin.unsqueeze(-3))


def flash_in_place_sign_flipped(x, cos, sin):
    """The inverse rotation written into x itself."""
    x.copy_(flash_apply_rotary_emb_torch(x, cos, -sin))


def off_by_one_in_place(x, positions):
    """Positions shifted by one, written into x itself; x is (batch, seq, heads, d)."""
    x[...] = np.swapaxes(_rope(np.swapaxes(x, 1, 2), positions + 1), 1, 2)
