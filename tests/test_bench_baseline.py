"""`rope-ref bench`'s baseline is a memory copy of the same bytes; bad requests are refused."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import numpy as np
import pytest

from rope_ref.cli import main
from rope_ref.cli.bench import cpu, harness
from rope_ref.cli.bench.rows import Case, Impl


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_the_baseline_is_a_memory_copy_of_the_same_bytes(monkeypatch, dtype):
    """Every dtype is compared with ``np.copyto`` of unsigned views of its own width, into a
    preallocated array, not with an element-wise copy of its floats."""
    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes")
    impls = cpu.implementations(Case((1, 8, 2, 16), dtype))
    baseline = [i for i in impls if i.kind == "baseline"]
    assert [i.name for i in baseline] == ["copy (memory)"]
    x = np.random.default_rng(0).standard_normal((1, 8, 2, 16)).astype(harness._host_dtype(dtype))
    bits = x.view(np.dtype(f"u{x.itemsize}"))
    bits[0, 0, 0, :3] = [0x7C01, 0xFFFF, 0x8000] if x.itemsize == 2 else [1, 2, 3]  # odd bits
    seen: list[tuple[np.ndarray, np.ndarray]] = []
    copyto = np.copyto

    def spy(dst, src, **kwargs):
        seen.append((dst, src))
        copyto(dst, src, **kwargs)

    run = baseline[0].prepare(x)
    monkeypatch.setattr(np, "copyto", spy)
    run()
    unsigned = np.dtype(f"u{x.itemsize}")
    ((dst, src),) = seen
    assert (dst.dtype, src.dtype) == (unsigned, unsigned)
    assert np.shares_memory(src, x)
    assert not np.shares_memory(dst, x)
    assert dst.tobytes() == x.tobytes()


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("qk", [False, True])
def test_allocating_calls_have_a_copy_into_a_new_array_as_floor(dtype, qk):
    """``copy()`` of the same bytes on the calling thread: new memory each call, the bits of
    `x` (and of the keys) unchanged, as the rows that return a new array pay for it."""
    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes")
    impls = {i.name: i for i in cpu.implementations(Case((1, 8, 2, 16), dtype, qk=qk))}
    row = impls["copy (new array)"]
    assert row.kind == "floor"
    x = np.random.default_rng(0).standard_normal((1, 8, 2, 16)).astype(harness._host_dtype(dtype))
    run = row.prepare(x)
    first: Any = run()
    second: Any = run()
    assert len(first) == (2 if qk else 1)
    unsigned = np.dtype(f"u{x.itemsize}")
    assert first[0].dtype == unsigned
    assert first[0].tobytes() == x.tobytes()
    assert not np.shares_memory(first[0], x)
    assert not np.shares_memory(first[0], second[0])


def test_a_failing_peer_row_is_reported_and_the_table_still_printed(capsys, monkeypatch):
    def boom(x):
        msg = "division by zero"
        raise ZeroDivisionError(msg)

    real = cpu.implementations
    monkeypatch.setattr(
        cpu, "implementations", lambda case: [*real(case), Impl("broken peer", "peer", boom)]
    )
    assert main(["bench", "--shape", "1,1,1,2", "--rounds", "1", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["results"]}
    assert rows["broken peer"]["median_s"] is None
    assert rows["broken peer"]["note"] == "failed here: ZeroDivisionError: division by zero"
    assert rows["copy (memory)"]["median_s"] > 0


def test_a_backend_row_that_fails_is_not_hidden(monkeypatch):
    def boom(x):
        msg = "division by zero"
        raise ZeroDivisionError(msg)

    monkeypatch.setattr(cpu, "implementations", lambda case: [Impl("mine", "backend", boom)])
    with pytest.raises(ZeroDivisionError):
        harness.run_case(Case((1, 1, 1, 2), "float32"), rounds=1)


@pytest.mark.skipif(
    importlib.util.find_spec("rotary_embedding_torch") is None,
    reason="rotary-embedding-torch is not installed",
)
@pytest.mark.parametrize(("shape", "dtype"), [("1,1,1,2", "float32"), ("1,4,2,8", "bfloat16")])
def test_rotary_embedding_torch_on_small_shapes_does_not_end_the_run(capsys, shape, dtype):
    only = ["--only", "rotary-embedding-torch"]
    argv = ["bench", "--shape", shape, "--dtype", dtype, "--rounds", "1", "--json", *only]
    assert main(argv) == 0
    row = next(
        r for r in json.loads(capsys.readouterr().out)["results"]
        if r["name"] == "rotary-embedding-torch"
    )  # fmt: skip
    assert row["median_s"] is not None or row["note"].startswith("failed here: ")


@pytest.mark.parametrize("rounds", [str(10**20), "10001"])
def test_absurd_round_counts_are_refused(capsys, rounds):
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "--rounds", rounds])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "argument --rounds: must be at most 10,000" in err
    assert repr(rounds) in err


def test_a_misspelt_preset_gets_a_suggestion(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "--preset", "decod"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'decod'" in err
    assert "did you mean 'decode'?" in err


def test_a_preset_far_from_every_name_lists_them(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--preset", "zzzz"])
    err = capsys.readouterr().err
    assert "'prefill'" in err
    assert "did you mean" not in err
