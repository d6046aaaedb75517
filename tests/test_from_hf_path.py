"""RopeSpec.from_hf (and from_hf_layers) read a config.json from a path or a model directory.

Only regular files of at most 16 MiB are read; every refusal is a ValueError naming the path.
"""

from __future__ import annotations

import json
import os
import time

import pytest

import rope_ref as rr

CONFIG = {
    "model_type": "llama", "hidden_size": 256, "num_attention_heads": 4,
    "num_hidden_layers": 3, "rope_theta": 5e5,
    "rope_scaling": {"rope_type": "linear", "factor": 4.0},
}  # fmt: skip
LIMIT = 16 * 2**20  # the limit docs/api.md states, written here independently


@pytest.fixture
def model_dir(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(CONFIG), encoding="utf-8")
    return tmp_path


def test_a_file_or_a_directory_reads_as_the_dict(model_dir):
    expected = rr.RopeSpec.from_hf(CONFIG)
    assert expected.scaling is not None  # the file's values are really read
    file = model_dir / "config.json"
    for given in (file, str(file), model_dir, str(model_dir)):
        assert rr.RopeSpec.from_hf(given) == expected
        assert rr.RopeSpec.from_hf(given, layer=2) == expected
        assert rr.RopeSpec.from_hf_layers(given) == (expected,) * 3


def test_strict_applies_to_a_file(model_dir):
    (model_dir / "config.json").write_text(json.dumps({**CONFIG, "rope_thetaa": 1e6}))
    with pytest.raises(ValueError, match="unknown key 'rope_thetaa'"):
        rr.RopeSpec.from_hf(model_dir, strict=True)


def _refused(path, *words):
    with pytest.raises(ValueError, match="`config`") as info:
        rr.RopeSpec.from_hf(path)
    message = str(info.value)
    for word in words:
        assert word in message, message
    return message


def test_missing_paths_are_named(tmp_path):
    _refused(tmp_path / "nope.json", repr(str(tmp_path / "nope.json")), "does not exist")
    _refused(tmp_path, repr(str(tmp_path)), "holds no config.json")
    _refused('{"head_dim": 64}', "does not exist", "json.loads")  # a JSON string is no path
    _refused(str(tmp_path / ("a" * 300)), "cannot be read")


def test_a_device_is_refused_without_reading_it():
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero here")
    started = time.perf_counter()
    _refused("/dev/zero", "'/dev/zero'", "not a regular file")
    assert time.perf_counter() - started < 5.0


def test_a_fifo_is_refused_without_blocking(tmp_path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    _refused(tmp_path, repr(str(fifo)), "not a regular file")  # no writer: open must not wait


def test_an_oversized_file_is_refused(tmp_path):
    big = tmp_path / "config.json"
    with big.open("wb") as stream:
        stream.truncate(LIMIT + 1)  # sparse: no disk used
    _refused(big, repr(str(big)), f"{LIMIT:,} bytes")
    with big.open("r+b") as stream:
        stream.truncate(LIMIT)  # at the limit: read, then refused as JSON, not for its size
    _refused(big, "not valid JSON")


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"{not json", ["not valid JSON"]),
        (b"[1, 2]", ["must hold a JSON object", "list"]),
        (b'{"head_dim": 64, "x": "\xff"}', ["not UTF-8"]),
        (b"[" * 100_000 + b"]" * 100_000, ["nested too deeply"]),
    ],
)
def test_bad_contents_are_named(tmp_path, data, words):
    file = tmp_path / "config.json"
    file.write_bytes(data)
    _refused(file, repr(str(file)), *words)


def test_other_types_are_still_a_type_error():
    with pytest.raises(TypeError, match="`config`"):
        rr.RopeSpec.from_hf(b"config.json")
