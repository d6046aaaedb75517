"""The results of `rope-ref check`'s child process, as data that cannot run code.

The child encodes each result of the target as one JSON object: its label, the name of
its stored dtype, its shape, and its values as the bytes of a ``.npy`` file (base64).
The checker decodes them with ``np.load(..., allow_pickle=False)`` and believes nothing it
has not checked: the dtype and the shape the bytes declare must be the ones announced,
the values are float16, float32 or float64 (bfloat16 travels as float32 whose low 16 bits
are zero), and the whole reply has a size limit. What comes back is a `HostResult`, which
the checker compares with its own oracle.
"""

from __future__ import annotations

import base64
import binascii
import io
from typing import Any

import numpy as np

from rope_ref.cli.check.conventions import Returned
from rope_ref.testing._compare import HostResult, check_actual, true_dtype
from rope_ref.testing._tolerance import host64

__all__ = ["MAX_REPLY_BYTES", "ReplyError", "decode_results", "encode_results", "labels_of"]

#: Most bytes of one reply of the child (the results of one call, encoded).
MAX_REPLY_BYTES = 256 * 2**20

#: How each floating dtype travels: the NumPy dtype of its bytes.
_CARRIER = {"float16": "float16", "float32": "float32", "float64": "float64", "bfloat16": "float32"}


class ReplyError(Exception):
    """A reply of the child that is not well-formed data (the checker trusts none of it)."""


def encode_results(results: list[Returned]) -> list[dict[str, Any]]:
    """The JSON-ready form of the target's `results` (run in the child).

    A result whose dtype is not floating travels as its dtype's name and shape only: the
    checker refuses it with the message `compare` gives.
    """
    encoded = []
    for r in results:
        shape = [int(n) for n in getattr(r.actual, "shape", ())]
        try:
            name = check_actual(r.actual)
        except (TypeError, ValueError):
            dtype = true_dtype(r.actual)
            encoded.append({"label": r.label, "dtype": str(dtype), "shape": shape})
            continue
        values = host64(r.actual).astype(_CARRIER[name])
        buffer = io.BytesIO()
        np.save(buffer, values, allow_pickle=False)
        npy = base64.b64encode(buffer.getvalue()).decode("ascii")
        encoded.append({"label": r.label, "dtype": name, "shape": shape, "npy": npy})
    return encoded


def decode_results(outputs: object, labels: tuple[tuple[str, ...], ...]) -> list[Returned]:
    """The results of a reply, each as a `HostResult`; `ReplyError` for anything else.

    `labels` lists the label sequences the calling convention can return.
    """
    if not isinstance(outputs, list) or not all(isinstance(o, dict) for o in outputs):
        msg = "the results are not a list of objects"
        raise ReplyError(msg)
    found = tuple(o.get("label") for o in outputs)
    if found not in labels:
        msg = f"the results are labelled {list(found)}; expected one of {[list(s) for s in labels]}"
        raise ReplyError(msg)
    return [Returned(str(o["label"]), _decode_one(o)) for o in outputs]


def _decode_one(o: dict[str, Any]) -> HostResult:
    name, shape = o.get("dtype"), o.get("shape")
    if not isinstance(name, str) or not isinstance(shape, list):
        msg = "a result has no dtype name or shape"
        raise ReplyError(msg)
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        msg = f"a result's shape is not a list of sizes: {shape!r}"
        raise ReplyError(msg)
    if name not in _CARRIER:  # not floating: compared by name, which fails
        if "npy" in o:
            msg = f"a result of dtype {name!r} carries values"
            raise ReplyError(msg)
        return HostResult(np.broadcast_to(np.zeros(()), tuple(shape)), name)
    npy = o.get("npy")
    if not isinstance(npy, str):
        msg = f"a {name} result carries no values"
        raise ReplyError(msg)
    try:
        values = np.load(io.BytesIO(base64.b64decode(npy, validate=True)), allow_pickle=False)
    except (ValueError, OSError, EOFError, binascii.Error) as err:
        msg = f"a result's values are not a .npy array: {err}"
        raise ReplyError(msg) from None
    if not isinstance(values, np.ndarray) or values.dtype != np.dtype(_CARRIER[name]):
        msg = f"a {name} result's values are not {_CARRIER[name]}"
        raise ReplyError(msg)
    if values.shape != tuple(shape):
        msg = f"a result's values have shape {values.shape}, not {tuple(shape)}"
        raise ReplyError(msg)
    if name == "bfloat16" and np.any(values.view(np.uint32) & np.uint32(0xFFFF)):
        msg = "a bfloat16 result's values are not bfloat16 numbers"
        raise ReplyError(msg)
    return HostResult(values.astype(np.float64), name)


def labels_of(convention: str, two_inputs: bool) -> tuple[tuple[str, ...], ...]:
    """The label sequences a result of `convention` comes back with."""
    if convention == "hf":
        return (("q", "k"),)
    if convention == "complex" and two_inputs:
        return (("xq", "xk"),)
    return (("x",),)
