"""bfloat16 rows of the half layout through AVX512-BF16, rounded exactly as the loop rounds.

`rope_ref.backends.numba.convert` rounds a float32 to bfloat16 in integer arithmetic,
about eight vector operations per 8 results, which at decoding sizes (rows in the cache)
makes a bfloat16 call slower than a float32 one. AVX512-BF16's ``vcvtneps2bf16`` rounds
16 floats in one instruction, with the same rounding (to nearest even on the float32
bits), the same overflow to infinity and the same quiet NaN (the top half of the bits with
the quiet bit set), but it flushes subnormal inputs to zero. Here each vector of 16
results is rounded by the instruction, and a vector with a result whose exponent field is
zero (zero or subnormal) is rounded again by the integer formula instead, so that every
element is what `convert.narrow` gives: the results are bit-identical to the loop's.

The instruction is reached through LLVM's ``llvm.x86.avx512bf16.cvtneps2bf16.512``, whose
result is a vector of LLVM's ``bfloat`` type, which llvmlite's IR builder does not have:
`_BFloat` names it so that the intrinsic's declaration reads as LLVM expects.

Used by `rope_ref.backends.numba.rows._row` for bfloat16 rows whose features are
contiguous and whose pair count is a multiple of 16, where the processor has AVX512-BF16
(`HARDWARE_BF16`); elsewhere `vector_half_row` is compiled to False and the loop runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import binding as llvm_binding  # type: ignore[import-untyped]
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

__all__ = ["HARDWARE_BF16", "LANES", "vector_half_row"]

#: float32 results per instruction (one 512-bit vector).
LANES = 16


def _hardware_bf16() -> bool:
    """Whether the processor converts float32 to bfloat16 by AVX512-BF16 (x86)."""
    triple = llvm_binding.get_process_triple()
    if not triple.startswith("x86_64"):
        return False
    try:
        features = llvm_binding.get_host_cpu_features()
    except RuntimeError:  # pragma: no cover - LLVM could not read the features
        return False
    return bool(features.get("avx512bf16", False) and features.get("avx512f", False))


#: AVX512-BF16 is there (else `vector_half_row` is the constant False).
HARDWARE_BF16 = _hardware_bf16()


class _BFloat(ir.types.Type):  # type: ignore[misc]
    """LLVM's ``bfloat`` type, by name only (llvmlite's IR builder lacks it)."""

    null = "0.0"

    def _to_string(self) -> str:
        return "bfloat"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _BFloat)

    def __hash__(self) -> int:
        return hash("bfloat")


def vector_half_row(x, out, a, b, c, cos, sin, tu, first, n, sign):  # type: ignore[no-untyped-def]  # pragma: no cover - numba overloads it
    """Rotate row ``x[a, b, c]`` (half layout, `n` pairs from `first`) into `out`, if it can.

    Returns True when done, False when the row must take the loop (not bfloat16 bits, no
    AVX512-BF16, features not contiguous, or `n` not a multiple of `LANES`).
    """
    raise NotImplementedError


@overload(vector_half_row)
def _vector_half_row(x, out, a, b, c, cos, sin, tu, first, n, sign):  # type: ignore[no-untyped-def]  # pragma: no cover - numba typing
    if not (HARDWARE_BF16 and x.dtype == types.int16 and out.dtype == types.int16):
        return lambda x, out, a, b, c, cos, sin, tu, first, n, sign: False

    def implementation(x, out, a, b, c, cos, sin, tu, first, n, sign):  # type: ignore[no-untyped-def]
        if (
            n == 0
            or n % np.uint64(LANES) != 0  # (`_row` passes n as uint64: integer arithmetic)
            or x.strides[3] != 2
            or out.strides[3] != 2
            or cos.strides[1] != 4
            or sin.strides[1] != 4
        ):
            return False
        _rotate_row(x, out, a, b, c, cos, sin, tu, first, n, sign)
        return True

    return implementation


def _splat(builder: Any, value: Any, vector: ir.VectorType) -> Any:
    """`value` in every lane of a `vector`."""
    undefined = ir.Constant(vector, ir.Undefined)
    lane = builder.insert_element(undefined, value, ir.Constant(ir.IntType(32), 0))
    indices = ir.VectorType(ir.IntType(32), vector.count)
    return builder.shuffle_vector(lane, undefined, ir.Constant(indices, [0] * vector.count))


def _rotate_row_typing(typingctx, x, out, a, b, c, cos, sin, tu, first, n, sign):  # type: ignore[no-untyped-def]  # pragma: no cover - numba
    """The row's loop in LLVM IR, `LANES` pairs per step (see the module's docstring)."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        (x_type, out_type, _, _, _, cos_type, sin_type, _, _, _, _) = signature.args
        xv, ov, av, bv, cv, cosv, sinv, tuv, firstv, nv, signv = args
        i64 = ir.IntType(64)
        f32, i32, i16 = ir.FloatType(), ir.IntType(32), ir.IntType(16)
        floats, words, halves = (ir.VectorType(t, LANES) for t in (f32, i32, i16))

        def item(array_type: Any, value: Any, index: list[Any]) -> Any:
            array = context.make_array(array_type)(context, builder, value)
            return cgutils.get_item_pointer(
                context, builder, array_type, array, index, wraparound=False
            )

        x_row = item(x_type, xv, [av, bv, cv, firstv])
        out_row = item(out_type, ov, [av, bv, cv, firstv])
        zero = ir.Constant(i64, 0)
        cos_row = item(cos_type, cosv, [tuv, zero])
        sin_row = item(sin_type, sinv, [tuv, zero])
        sign_v = _splat(builder, signv, floats)
        sixteen = ir.Constant(words, [16] * LANES)
        exponent = ir.Constant(words, [0x7F800000] * LANES)
        zeros = ir.Constant(words, [0] * LANES)
        convert = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(ir.VectorType(_BFloat(), LANES), [floats]),
            "llvm.x86.avx512bf16.cvtneps2bf16.512",
        )

        def load(pointer: Any, offset: Any, vector: ir.VectorType, align: int) -> Any:
            address = builder.gep(pointer, [offset])
            return builder.load(builder.bitcast(address, vector.as_pointer()), align=align)

        def store(value: Any, pointer: Any, offset: Any) -> None:
            address = builder.gep(pointer, [offset])
            builder.store(value, builder.bitcast(address, halves.as_pointer()), align=2)

        def widened(bits: Any) -> Any:
            return builder.bitcast(builder.shl(builder.zext(bits, words), sixteen), floats)

        def exact(value: Any) -> Any:  # `convert._f32_to_bf16`, on a vector
            bits = builder.bitcast(value, words)
            high = builder.lshr(bits, sixteen)
            odd = builder.and_(high, ir.Constant(words, [1] * LANES))
            bias = builder.add(bits, ir.Constant(words, [0x7FFF] * LANES))
            rounded = builder.lshr(builder.add(bias, odd), sixteen)
            nan = builder.fcmp_unordered("uno", value, value)
            quiet = builder.or_(high, ir.Constant(words, [0x40] * LANES))
            return builder.trunc(builder.select(nan, quiet, rounded), halves)

        def flat(value: Any) -> Any:  # lanes whose exponent field is zero: zero or subnormal
            masked = builder.and_(builder.bitcast(value, words), exponent)
            return builder.icmp_unsigned("==", masked, zeros)

        before = builder.basic_block
        loop = builder.append_basic_block("bf16_row.loop")
        slow = builder.append_basic_block("bf16_row.exact")
        join = builder.append_basic_block("bf16_row.join")
        done = builder.append_basic_block("bf16_row.done")
        builder.branch(loop)

        builder.position_at_end(loop)
        j = builder.phi(i64)
        j.add_incoming(zero, before)
        j_n = builder.add(j, nv)
        u = widened(load(x_row, j, halves, 2))
        v = widened(load(x_row, j_n, halves, 2))
        cj = load(cos_row, j, floats, 4)
        sj = builder.fmul(sign_v, load(sin_row, j, floats, 4))
        first_out = builder.fsub(builder.fmul(u, cj), builder.fmul(v, sj))
        second_out = builder.fadd(builder.fmul(v, cj), builder.fmul(u, sj))
        fast_first = builder.bitcast(builder.call(convert, [first_out]), halves)
        fast_second = builder.bitcast(builder.call(convert, [second_out]), halves)
        any_flat = builder.or_(flat(first_out), flat(second_out))
        flagged = builder.icmp_unsigned("!=", builder.bitcast(any_flat, i16), ir.Constant(i16, 0))
        builder.cbranch(flagged, slow, join)

        builder.position_at_end(slow)
        exact_first, exact_second = exact(first_out), exact(second_out)
        builder.branch(join)

        builder.position_at_end(join)
        result_first = builder.phi(halves)
        result_first.add_incoming(fast_first, loop)
        result_first.add_incoming(exact_first, slow)
        result_second = builder.phi(halves)
        result_second.add_incoming(fast_second, loop)
        result_second.add_incoming(exact_second, slow)
        store(result_first, out_row, j)
        store(result_second, out_row, j_n)
        following = builder.add(j, ir.Constant(i64, LANES))
        j.add_incoming(following, join)
        builder.cbranch(builder.icmp_unsigned("<", following, nv), loop, done)

        builder.position_at_end(done)
        return context.get_dummy_value()

    return types.void(x, out, a, b, c, cos, sin, tu, first, n, sign), codegen


_rotate_row: Any = intrinsic(_rotate_row_typing)
