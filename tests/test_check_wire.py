"""What `rope-ref check`'s child sends back is read as data, and only as declared."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest

from rope_ref.cli.check.conventions import Returned
from rope_ref.cli.check.wire import ReplyError, decode_results, encode_results

X_ONLY = (("x",),)


def _npy(values: np.ndarray, *, allow_pickle: bool = False) -> str:
    buffer = io.BytesIO()
    np.save(buffer, values, allow_pickle=allow_pickle)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def test_results_travel_with_their_dtype_and_values():
    y = np.random.default_rng(0).standard_normal((2, 3, 8)).astype(np.float32)
    (back,) = decode_results(encode_results([Returned("x", y)]), X_ONLY)
    assert back.label == "x"
    assert back.actual.dtype == "float32"
    assert np.array_equal(back.actual.values, y.astype(np.float64))


def test_bfloat16_travels_as_float32_and_is_checked_to_be_bfloat16():
    torch = pytest.importorskip("torch")
    y = torch.linspace(-1, 1, 16, dtype=torch.bfloat16).reshape(2, 8)
    (back,) = decode_results(encode_results([Returned("x", y)]), X_ONLY)
    assert back.actual.dtype == "bfloat16"
    assert np.array_equal(back.actual.values, y.to(torch.float64).numpy())
    forged = {"label": "x", "dtype": "bfloat16", "shape": [2], "npy": _npy(np.float32([1.1, 2]))}
    with pytest.raises(ReplyError, match="not bfloat16 numbers"):
        decode_results([forged], X_ONLY)


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        ("not a list", "not a list of objects"),
        ([{"label": "q", "dtype": "float32", "shape": [1]}], "labelled"),
        ([{"label": "x", "dtype": "float32", "shape": [1], "npy": "!!"}], "not a .npy"),
        ([{"label": "x", "dtype": "float32", "shape": [2], "npy": _npy(np.zeros(2))}], "float32"),
        ([{"label": "x", "dtype": "float64", "shape": [3], "npy": _npy(np.zeros(2))}], "shape"),
        ([{"label": "x", "dtype": "float64", "shape": [True]}], "not a list of sizes"),
        ([{"label": "x", "dtype": "int64", "shape": [2], "npy": _npy(np.zeros(2))}], "carries"),
        ([{"label": "x", "dtype": "float64", "shape": [2]}], "carries no values"),
    ],
)
def test_a_reply_that_is_not_the_declared_data_is_refused(reply, says):
    with pytest.raises(ReplyError, match=says):
        decode_results(reply, X_ONLY)


def test_a_pickle_in_the_values_is_never_loaded(tmp_path):
    marker = tmp_path / "loaded"

    class Marker:
        def __reduce__(self):
            return (marker.touch, ())

    objects = np.array([Marker()], dtype=object)
    reply = [
        {"label": "x", "dtype": "float64", "shape": [1], "npy": _npy(objects, allow_pickle=True)}
    ]
    with pytest.raises(ReplyError):
        decode_results(reply, X_ONLY)
    assert not marker.exists()


def test_a_result_of_an_integer_dtype_is_named_not_sent():
    (encoded,) = encode_results([Returned("x", np.zeros((2, 4), dtype=np.int64))])
    assert encoded == {"label": "x", "dtype": "int64", "shape": [2, 4]}
    (back,) = decode_results([encoded], X_ONLY)
    assert back.actual.dtype == "int64"
    assert back.actual.shape == (2, 4)
