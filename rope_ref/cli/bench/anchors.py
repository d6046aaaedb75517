"""The C++ RoPE kernels users run on CPUs, as anchor rows of `rope-ref bench`.

- *onnxruntime RotaryEmbedding*: ONNX Runtime's ``com.microsoft`` ``RotaryEmbedding``
  operator, one node in a session with as many intra-op threads as numba has, called with
  IO binding (input, position ids, cos/sin caches and a preallocated output bound once),
  so that a sample is the operator's run and not the copies of the Python API.
- *ggml rope_ext*: ggml's ``ggml_rope_ext`` (llama.cpp's kernel, NeoX mode for the half
  layout), through the ``ggml-python`` package: a graph of one operation computed with as
  many threads as numba has, on tensors made once.

Both read `x` as ``(batch, seq, heads, head_dim)``. Decode shapes (one token) rotate it at
position `DECODE_AT` given as a position-id array, as inference code calls them; longer
ones at positions ``0 .. seq - 1``. A row that cannot run here is skipped with its install
line (`Unavailable`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np

from rope_ref._core.frequencies import rope_cos_sin
from rope_ref._core.spec import RopeSpec
from rope_ref.cli.bench.rows import Case, Impl, Prepared, Unavailable

__all__ = ["GGML_INSTALL", "ORT_INSTALL", "anchor_rows"]

ORT_INSTALL = "pip install onnxruntime onnx"
GGML_INSTALL = "pip install ggml-python"
#: The position of a decode step's token.
DECODE_AT = 1000
ORT_ROW = "onnxruntime RotaryEmbedding"
GGML_ROW = "ggml rope_ext"


def anchor_rows(case: Case) -> list[Impl]:
    """The anchor rows for `case` (installed or not: absent ones say how to install)."""
    if case.qk or case.sequences:
        return []
    note = "position ids [[1000]]" if case.shape[1] == 1 else "IO binding"
    return [
        Impl(ORT_ROW, "peer", _onnxruntime(case), note),
        Impl(GGML_ROW, "peer", _ggml(case), "NeoX mode" if case.shape[1] > 1 else note),
    ]


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _positions(case: Case) -> np.ndarray:
    batch, seq = case.shape[:2]
    if seq == 1:
        return np.full((batch, 1), DECODE_AT, dtype=np.int64)
    return np.broadcast_to(np.arange(seq, dtype=np.int64), (batch, seq)).copy()


def _threads() -> int:
    try:
        import numba
    except ImportError:  # pragma: no cover - numba comes with the bench's set-up
        return 1
    return int(numba.get_num_threads())


# -- ONNX Runtime --------------------------------------------------------------------------


def _onnxruntime(case: Case) -> Callable[[np.ndarray], Prepared]:
    def prepare(x: np.ndarray) -> Prepared:
        if not (_installed("onnxruntime") and _installed("onnx")):
            msg = f"not installed: {ORT_INSTALL}"
            raise Unavailable(msg)
        if x.dtype not in (np.float32, np.float16):
            msg = f"ONNX Runtime's CPU RotaryEmbedding takes float32 and float16, not {x.dtype}"
            raise Unavailable(msg)
        import onnxruntime as ort  # type: ignore[import-untyped,import-not-found,unused-ignore]

        batch, seq, heads, dim = x.shape
        positions = _positions(case)
        cos, sin = rope_cos_sin(RopeSpec(dim), np.arange(int(positions.max()) + 1))
        session = ort.InferenceSession(
            _ort_model(x.dtype, heads).SerializeToString(),
            _ort_options(ort),
            providers=["CPUExecutionProvider"],
        )
        flat = np.ascontiguousarray(x).reshape(batch, seq, heads * dim)
        out = np.empty_like(flat)
        binding = session.io_binding()
        for name, value in (
            ("x", flat),
            ("position_ids", positions),
            ("cos_cache", cos.astype(x.dtype)),
            ("sin_cache", sin.astype(x.dtype)),
        ):
            binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(value))
        binding.bind_ortvalue_output("y", ort.OrtValue.ortvalue_from_numpy(out))

        def run() -> None:
            session.run_with_iobinding(binding)

        run.result = lambda: out.reshape(x.shape)  # type: ignore[attr-defined]
        return run

    return prepare


def _ort_options(ort: Any) -> Any:
    options = ort.SessionOptions()
    options.intra_op_num_threads = _threads()
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return options


def _ort_model(dtype: np.dtype[Any], heads: int) -> Any:
    """One ``com.microsoft`` RotaryEmbedding node: x (B, S, H*D), half layout."""
    from onnx import TensorProto, helper

    elem = TensorProto.FLOAT if dtype == np.float32 else TensorProto.FLOAT16
    node = helper.make_node(
        "RotaryEmbedding",
        ["x", "position_ids", "cos_cache", "sin_cache"],
        ["y"],
        domain="com.microsoft",
        interleaved=0,
        num_heads=heads,
    )
    graph = helper.make_graph(
        [node],
        "rope",
        [
            helper.make_tensor_value_info("x", elem, None),
            helper.make_tensor_value_info("position_ids", TensorProto.INT64, None),
            helper.make_tensor_value_info("cos_cache", elem, None),
            helper.make_tensor_value_info("sin_cache", elem, None),
        ],
        [helper.make_tensor_value_info("y", elem, None)],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets)


# -- ggml ----------------------------------------------------------------------------------


def _ggml(case: Case) -> Callable[[np.ndarray], Prepared]:
    def prepare(x: np.ndarray) -> Prepared:
        if not _installed("ggml"):
            msg = f"not installed: {GGML_INSTALL}"
            raise Unavailable(msg)
        if x.dtype not in (np.float32, np.float16):
            msg = f"ggml's CPU rope takes float32 and float16, not {x.dtype}"
            raise Unavailable(msg)
        from rope_ref.cli.bench.ggml_row import ggml_rope

        return ggml_rope(x, _positions(case)[0], _threads())

    return prepare
