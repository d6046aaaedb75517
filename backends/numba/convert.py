"""Loads and stores of the Numba CPU kernel's elements, one formulation per dtype.

The kernel's row loop (`rope_ref.backends.numba.rows`) reads every element through `widen`
and writes every result through `narrow`, so that one loop serves every dtype and LLVM
vectorises it for each (what it emits is described in docs/kernels/numba.md):

- float32 and float64 arrays: both are the identity; the rotation runs in their dtype.
- float16 arrays arrive as ``uint16`` views of their bits. `widen` reinterprets the bits
  as LLVM's ``half`` and extends them to ``float`` (exact), `narrow` truncates a float32 to
  ``half``: round to nearest even, overflow to infinity, NaN stays NaN (quiet). On x86 with
  F16C (every AVX2 processor) LLVM emits ``vcvtph2ps``/``vcvtps2ph`` on vectors of 8 or 16
  elements, as PyTorch and ggml do; on AArch64, ``fcvtl``/``fcvtn``. Elsewhere the same
  conversions are written in integer arithmetic (`_f16_bits_to_f32`, `_f32_to_f16_bits`).
- bfloat16 arrays arrive as ``int16`` views of their bits (the signedness tells the two
  16-bit formats apart at compile time). bfloat16 is the top half of a float32: `widen`
  shifts the bits left by 16; `narrow` rounds the float32 bits to nearest even and keeps
  the top half: add ``0x7FFF`` plus the lowest kept bit and drop the low 16 bits (a carry
  into the exponent rounds up to the next binade or to infinity, as it should); NaN stays
  NaN (quiet), by a select rather than a branch. Both are integer operations on vectors.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import binding as llvm_binding  # type: ignore[import-untyped]
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

__all__ = ["HARDWARE_F16", "narrow", "widen"]


def _hardware_f16() -> bool:
    """Whether LLVM converts ``half`` by instructions here (F16C on x86, AArch64)."""
    triple = llvm_binding.get_process_triple()
    if triple.startswith(("aarch64", "arm64")):
        return True
    if not triple.startswith(("x86_64", "i686", "i386")):
        return False
    try:
        features = llvm_binding.get_host_cpu_features()
    except RuntimeError:  # pragma: no cover - LLVM could not read the features
        return False
    return bool(features.get("f16c", False))


#: LLVM converts float16 with the processor's instructions (else: integer arithmetic).
HARDWARE_F16 = _hardware_f16()


# ----------------------------------------------------------------------------------------
# Bit casts and the hardware float16 conversions
# ----------------------------------------------------------------------------------------


def _f32_from_bits_typing(typingctx: Any, bits: Any) -> Any:  # pragma: no cover - numba
    """The float32 whose bit pattern is the uint32 `bits`."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.uint32), codegen


_f32_from_bits: Any = intrinsic(_f32_from_bits_typing)


def _bits_from_f32_typing(typingctx: Any, value: Any) -> Any:  # pragma: no cover - numba
    """The bit pattern (uint32) of the float32 `value`."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.IntType(32))

    return types.uint32(types.float32), codegen


_bits_from_f32: Any = intrinsic(_bits_from_f32_typing)


def _f16_to_f32_typing(typingctx: Any, bits: Any) -> Any:  # pragma: no cover - numba
    """float16 bits (uint16) to float32, exactly: LLVM's ``fpext half to float``."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

    return types.float32(types.uint16), codegen


_f16_to_f32: Any = intrinsic(_f16_to_f32_typing)


def _f32_to_f16_typing(typingctx: Any, value: Any) -> Any:  # pragma: no cover - numba
    """float32 to float16 bits, round to nearest even: LLVM's ``fptrunc float to half``."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))

    return types.uint16(types.float32), codegen


_f32_to_f16: Any = intrinsic(_f32_to_f16_typing)


def _bf16_to_f32_typing(typingctx: Any, bits: Any) -> Any:  # pragma: no cover - numba
    """bfloat16 bits (int16) to float32, exactly: the bits are the float32's top half."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        i32 = ir.IntType(32)
        wide = builder.shl(builder.zext(args[0], i32), ir.Constant(i32, 16))
        return builder.bitcast(wide, ir.FloatType())

    return types.float32(types.int16), codegen


_bf16_to_f32: Any = intrinsic(_bf16_to_f32_typing)


def _f32_to_bf16_typing(typingctx: Any, value: Any) -> Any:  # pragma: no cover - numba
    """float32 to bfloat16 bits (int16), round to nearest even; NaN stays a quiet NaN.

    Written in LLVM IR on 32-bit integers: numba widens integer arithmetic to 64 bits,
    which would halve the lanes of the vectors.
    """

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        i32 = ir.IntType(32)
        bits = builder.bitcast(args[0], i32)
        high = builder.lshr(bits, ir.Constant(i32, 16))
        odd = builder.and_(high, ir.Constant(i32, 1))
        rounded = builder.lshr(
            builder.add(builder.add(bits, ir.Constant(i32, 0x7FFF)), odd), ir.Constant(i32, 16)
        )
        nan = builder.fcmp_unordered("uno", args[0], args[0])
        quiet = builder.or_(high, ir.Constant(i32, 0x40))
        return builder.trunc(builder.select(nan, quiet, rounded), ir.IntType(16))

    return types.int16(types.float32), codegen


_f32_to_bf16: Any = intrinsic(_f32_to_bf16_typing)


# ----------------------------------------------------------------------------------------
# The same in integer arithmetic (no F16C)
# ----------------------------------------------------------------------------------------


@njit(inline="always", cache=True)
def _f16_bits_to_f32(h: np.uint16) -> Any:  # pragma: no cover - numba
    """float16 bits to float32, exactly, without half-precision instructions."""
    bits = np.uint32(h)
    sign = (bits & np.uint32(0x8000)) << np.uint32(16)
    exponent = (bits >> np.uint32(10)) & np.uint32(0x1F)
    mantissa = bits & np.uint32(0x3FF)
    if exponent == 0:  # zero or subnormal: mantissa * 2**-24, exact in float32
        value = np.float32(mantissa) * np.float32(5.960464477539063e-08)
        return _f32_from_bits(_bits_from_f32(value) | sign)
    if exponent == 0x1F:  # infinity or NaN (the payload kept, so NaN stays NaN)
        return _f32_from_bits(sign | np.uint32(0x7F800000) | (mantissa << np.uint32(13)))
    rebiased = (exponent + np.uint32(112)) << np.uint32(23)
    return _f32_from_bits(sign | rebiased | (mantissa << np.uint32(13)))


@njit(inline="always", cache=True)
def _f32_to_f16_bits(value: np.float32) -> Any:  # pragma: no cover - numba
    """float32 to float16 bits, round to nearest even, without half-precision instructions."""
    bits = _bits_from_f32(value)
    sign = (bits >> np.uint32(16)) & np.uint32(0x8000)
    magnitude = bits & np.uint32(0x7FFFFFFF)
    if magnitude >= 0x7F800000:  # inf or nan (nan stays quiet)
        return np.uint16(sign | 0x7C00 | (0x200 if magnitude > 0x7F800000 else 0))
    if magnitude >= 0x477FF000:  # at or above 65520: rounds to infinity
        return np.uint16(sign | 0x7C00)
    if magnitude < 0x38800000:  # below 2**-14: subnormal half, units of 2**-24
        return np.uint16(sign | np.uint32(np.rint(abs(value) * np.float32(16777216.0))))
    # Normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits.
    odd = (magnitude >> 13) & 1
    return np.uint16(sign | ((magnitude - 0x38000000 + 0xFFF + odd) >> 13))


# ----------------------------------------------------------------------------------------
# widen / narrow, chosen by type at compile time
# ----------------------------------------------------------------------------------------


def widen(element):  # type: ignore[no-untyped-def]  # pragma: no cover - numba overloads it
    """An element of the kernel's arrays as its compute dtype (float32 for 16 bits)."""
    raise NotImplementedError


def narrow(value, out):  # type: ignore[no-untyped-def]  # pragma: no cover - numba overloads it
    """`value` (compute dtype) as an element of array `out`, rounded once."""
    raise NotImplementedError


@overload(widen)
def _widen(element):  # type: ignore[no-untyped-def]  # pragma: no cover - numba typing
    if element == types.uint16:  # float16 bits
        if HARDWARE_F16:
            return lambda element: _f16_to_f32(element)  # noqa: PLW0108
        return lambda element: _f16_bits_to_f32(element)  # noqa: PLW0108
    if element == types.int16:  # bfloat16 bits: the top half of a float32
        return lambda element: _bf16_to_f32(element)  # noqa: PLW0108
    if isinstance(element, types.Float):
        return lambda element: element
    return None


@overload(narrow)
def _narrow(value, out):  # type: ignore[no-untyped-def]  # pragma: no cover - numba typing
    dtype = out.dtype
    if dtype == types.uint16:  # float16 bits
        if HARDWARE_F16:
            return lambda value, out: _f32_to_f16(value)
        return lambda value, out: _f32_to_f16_bits(value)
    if dtype == types.int16:  # bfloat16 bits
        return lambda value, out: _f32_to_bf16(value)
    if isinstance(dtype, types.Float):
        return lambda value, out: value
    return None
