"""ggml's ``ggml_rope_ext`` as a `rope-ref bench` row (`rope_ref.cli.bench.anchors`).

Kept apart because it needs ``ggml`` (the ``ggml-python`` package), imported on call so that
the module loads (and its docs build and doctests collect) without it.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from rope_ref.cli.bench.rows import Prepared

__all__ = ["ggml_rope"]

#: Bytes for the context beyond the input and the output (graph, tensor headers).
SLACK = 16 << 20


def ggml_rope(x: np.ndarray, positions: np.ndarray, threads: int) -> Prepared:
    """A call that rotates `x` ``(batch, seq, heads, head_dim)`` at `positions` (seq,).

    One graph of ``ggml_rope_ext`` in NeoX mode (the half layout), base 10000, no
    scaling, on tensors made and filled once; each call computes it with `threads`.
    """
    import ggml  # type: ignore[import-not-found,unused-ignore]
    import ggml.utils  # type: ignore[import-not-found,unused-ignore]

    batch, seq, heads, dim = x.shape
    kind = ggml.GGML_TYPE_F32 if x.dtype == np.float32 else ggml.GGML_TYPE_F16
    params = ggml.ggml_init_params(
        mem_size=2 * x.nbytes + 4 * seq + SLACK, mem_buffer=None, no_alloc=False
    )
    ctx = ggml.ggml_init(params)
    a = ggml.ggml_new_tensor_4d(ctx, kind, dim, heads, seq, batch)
    p = ggml.ggml_new_tensor_1d(ctx, ggml.GGML_TYPE_I32, seq)
    ggml.utils.to_numpy(a)[...] = x
    ggml.utils.to_numpy(p)[...] = positions.astype(np.int32)
    y = ggml.ggml_rope_ext(
        ctx, a, p, None, dim, ggml.GGML_ROPE_TYPE_NEOX, 0, 10000.0, 1.0, 0.0, 1.0, 32.0, 1.0
    )
    graph = ggml.ggml_new_graph(ctx)
    ggml.ggml_build_forward_expand(graph, y)

    def run() -> Any:
        return ggml.ggml_graph_compute_with_ctx(ctx, graph, threads)

    run.result = lambda: ggml.utils.to_numpy(y)  # type: ignore[attr-defined]
    weakref.finalize(run, ggml.ggml_free, ctx)
    return run
