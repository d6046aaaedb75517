"""ONNX Runtime: the standard ``RotaryEmbedding`` (opset 23) and ``com.microsoft.RotaryEmbedding``.

Both ops rotate ``x`` with cos/sin caches the caller supplies: the standard op takes 4-D
``(batch, heads, seq, head_size)`` or 3-D ``(batch, seq, hidden)`` input (``num_heads`` set),
caches of ``(max_position + 1, rotary_dim / 2)`` rows indexed by ``position_ids`` or, without
ids, caches already gathered per token ``(batch, seq, rotary_dim / 2)``; the contrib op takes
``position_ids`` of shape ``(batch, seq)`` or a single start offset of shape ``(1,)``. The
``interleaved`` attribute pairs ``(2j, 2j + 1)``, else ``(j, j + rotary_dim / 2)``;
``rotary_embedding_dim`` rotates the first features only.

The caches are built the way the ops' users build them (ONNX Runtime's parity tests and the
model builder of onnxruntime-genai, after HF's rotary module): float32 inverse frequencies
``1 / base ** (arange(0, rotary_dim, 2) / rotary_dim)``, float32 positions, their float32
outer product, float32 cos/sin, cast to the input's dtype.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from rope_ref._core.spec import RopeSpec
from rope_ref.cli.survey.peers import HEAD_DIM, Entry, Group, _quiet_import, cache_length

__all__ = ["GROUP", "OrtConfig", "OrtEntry", "build_caches"]

#: Heads of the survey's inputs (their 3-D form is ``(batch, seq, HEADS * head_dim)``).
HEADS = 2


@dataclass(frozen=True)
class OrtEntry(Entry):
    """An entry whose op runs in `dtype`: the survey draws its inputs in that dtype."""

    dtype: str = "float32"


@dataclass(frozen=True)
class OrtConfig:
    """One way of calling one of the two ops."""

    contrib: bool = False  # com.microsoft.RotaryEmbedding, else the opset-23 op
    interleaved: bool = False
    dtype: str = "float32"
    rotary_dim: int | None = None  # rotary_embedding_dim; None rotates the whole head
    rank: int = 4  # 4: (batch, heads, seq, head_size); 3: (batch, seq, hidden)
    ids: str = "ids"  # "ids": (batch, seq) position_ids; "offset" (contrib): shape (1,);
    # "gathered" (opset 23): no position_ids, caches (batch, seq, rotary_dim / 2)
    base: float = 10000.0

    @property
    def rotated(self) -> int:
        """Features rotated (``rotary_embedding_dim``, or the whole head)."""
        return HEAD_DIM if self.rotary_dim is None else self.rotary_dim

    def settings(self) -> str:
        """The row's settings column."""
        parts = [
            f"{self.rank}-D",
            f"interleaved={int(self.interleaved)}",
            self.dtype,
            {
                "ids": "position_ids (batch, seq)",
                "offset": "position_ids (1,): start offset",
                "gathered": "no position_ids, caches (batch, seq, d/2)",
            }[self.ids],
        ]
        if self.rotary_dim is not None:
            parts.append(f"rotary_embedding_dim={self.rotary_dim}")
        if self.base != 10000.0:
            parts.append(f"base={self.base:g}")
        return ", ".join(parts)

    def spec(self) -> RopeSpec:
        """What the settings mean: the textbook RoPE of these caches."""
        return RopeSpec(
            HEAD_DIM,
            rotary_dim=self.rotated,
            base=self.base,
            layout="interleaved" if self.interleaved else "half",
        )


CONFIGS: tuple[OrtConfig, ...] = (
    OrtConfig(),
    OrtConfig(interleaved=True),
    OrtConfig(rank=3),
    OrtConfig(rotary_dim=32, base=500000.0),
    OrtConfig(rotary_dim=48, interleaved=True, rank=3),
    OrtConfig(ids="gathered"),
    OrtConfig(dtype="float16"),
    OrtConfig(dtype="float16", interleaved=True, rank=3),
    OrtConfig(contrib=True, rank=3),
    OrtConfig(contrib=True, interleaved=True),
    OrtConfig(contrib=True, ids="offset", rank=3),
    OrtConfig(contrib=True, rotary_dim=32, rank=3, base=500000.0),
    OrtConfig(contrib=True, interleaved=True, rotary_dim=48),
    OrtConfig(contrib=True, dtype="float16", rank=3),
    OrtConfig(contrib=True, dtype="float16", interleaved=True, ids="offset"),
)


def build_caches(
    rotary_dim: int, base: float, length: int, dtype: str
) -> tuple[np.ndarray, np.ndarray]:
    """The cos and sin caches of `length` rows, as the ops' users build them (float32 math).

    Parameters
    ----------
    rotary_dim : int
        Features rotated; the caches have ``rotary_dim // 2`` columns.
    base : float
        The RoPE base (``rope_theta``).
    length : int
        Rows: positions 0 to ``length - 1``.
    dtype : str
        The dtype the float32 values are cast to (the op's input dtype).

    Returns
    -------
    tuple of numpy.ndarray
        ``cos`` and ``sin``, each ``(length, rotary_dim // 2)``.

    Examples
    --------
    >>> cos, sin = build_caches(64, 10000.0, 3, "float16")
    >>> cos.shape, cos.dtype
    ((3, 32), dtype('float16'))
    >>> round(float(sin[1, 0]), 3), round(float(cos[2, 0]), 3)  # sin(1), cos(2)
    (0.841, -0.416)
    """
    exponents = np.arange(0, rotary_dim, 2, dtype=np.int64).astype(np.float32) / np.float32(
        rotary_dim
    )
    inv_freq = (np.float32(1.0) / np.power(np.float32(base), exponents)).astype(np.float32)
    t = np.arange(length, dtype=np.float32)
    freqs = np.outer(t, inv_freq).astype(np.float32)
    return np.cos(freqs).astype(dtype), np.sin(freqs).astype(dtype)


def _session(ort: Any, onnx: Any, config: OrtConfig) -> Any:
    """An inference session holding one RotaryEmbedding node with `config`'s attributes."""
    helper, proto = onnx.helper, onnx.TensorProto
    element = proto.FLOAT16 if config.dtype == "float16" else proto.FLOAT
    x, cos, sin = (helper.make_tensor_value_info(n, element, None) for n in ("x", "cos", "sin"))
    ids = helper.make_tensor_value_info("ids", proto.INT64, None)
    attributes: dict[str, int] = {"interleaved": int(config.interleaved)}
    if config.rank == 3 or config.rotary_dim is not None:
        attributes["num_heads"] = HEADS
    if config.rotary_dim is not None:
        attributes["rotary_embedding_dim"] = config.rotary_dim
    if config.contrib:
        inputs, domain = [x, ids, cos, sin], "com.microsoft"
        opsets = [helper.make_opsetid("", 21), helper.make_opsetid(domain, 1)]
    else:
        inputs, domain = [x, cos, sin], ""
        inputs += [] if config.ids == "gathered" else [ids]
        opsets = [helper.make_opsetid("", 23)]
    node = helper.make_node(
        "RotaryEmbedding", [i.name for i in inputs], ["y"], domain=domain, **attributes
    )
    y = helper.make_tensor_value_info("y", element, None)
    graph = helper.make_graph([node], "rope", inputs, [y])
    model = helper.make_model(graph, opset_imports=opsets)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def make_runner(config: OrtConfig) -> Any:
    """A survey runner: rotate ``x`` (batch, heads, seq, head_dim) at positions ``p``.

    ``p`` is ``(seq,)`` or per-batch ``(batch, seq)``; the offset form passes its first entry.
    """
    ort = _quiet_import("onnxruntime")
    session = _session(ort, _quiet_import("onnx"), config)

    def run(x: np.ndarray, p: np.ndarray) -> np.ndarray:
        b, h, s, d = x.shape
        x = x.astype(config.dtype)
        cos, sin = build_caches(config.rotated, config.base, cache_length(p), config.dtype)
        feeds: dict[str, np.ndarray] = {"cos": cos, "sin": sin}
        ids = np.ascontiguousarray(np.broadcast_to(p.astype(np.int64), (b, s)))
        if config.ids == "offset":
            feeds["ids"] = ids[0, :1]
        elif config.ids == "gathered":
            feeds["cos"], feeds["sin"] = cos[ids], sin[ids]
        else:
            feeds["ids"] = ids
        feeds["x"] = x if config.rank == 4 else x.transpose(0, 2, 1, 3).reshape(b, s, h * d)
        (y,) = session.run(None, feeds)
        if config.rank == 3:
            y = y.reshape(b, s, h, d).transpose(0, 2, 1, 3)
        return np.ascontiguousarray(y)

    return run


def _entries() -> Iterator[Entry]:
    for config in CONFIGS:
        peer = "com.microsoft.RotaryEmbedding" if config.contrib else "RotaryEmbedding (opset 23)"
        yield OrtEntry(
            f"ONNX Runtime {peer}",
            config.settings(),
            config.spec(),
            make_runner(config),
            positions="offset" if config.ids == "offset" else "ids",
            dtype=config.dtype,
        )


GROUP = Group("onnxruntime", ("onnxruntime", "onnx"), "pip install onnxruntime onnx", _entries)
