"""`rope-ref bench`: the harness runs, and its derived numbers follow from its timings."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

import rope_ref as rr
from rope_ref.cli import main


def run_json(capsys, *argv: str) -> dict:
    assert main(["bench", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_bench_json_reports_consistent_numbers(capsys):
    only = ["reference", "numba"] if rr.available_backends()["numba"] is None else ["reference"]
    args = ["--shape", "2,8,3,16", "--dtype", "float32", "--dtype", "float64", "--rounds", "3"]
    for name in only:
        args += ["--only", name]
    report = run_json(capsys, *args)
    assert {"date", "cpu", "numpy"} <= set(report["machine"])
    results = report["results"]
    for dtype, itemsize in (("float32", 4), ("float64", 8)):
        rows = {r["name"]: r for r in results if r["case"]["dtype"] == dtype}
        baseline = next(r for r in rows.values() if r["kind"] == "baseline")
        assert set(rows) == {baseline["name"], *only}
        moved = 2 * 2 * 8 * 3 * 16 * itemsize  # x read once and the output written once
        for r in rows.values():
            assert r["case"]["shape"] == [2, 8, 3, 16]
            assert r["median_s"] > 0
            assert r["samples"] >= 1
            assert r["gb_per_s"] == pytest.approx(moved / r["median_s"] / 1e9)
            assert r["percent_of_copy"] == pytest.approx(100 * baseline["median_s"] / r["median_s"])
            assert r["speedup_vs_reference"] == pytest.approx(
                rows["reference"]["median_s"] / r["median_s"]
            )
            assert r["q1_s"] <= r["median_s"] <= r["q3_s"]
            assert r["spread"] == pytest.approx((r["q3_s"] - r["q1_s"]) / r["median_s"])
            assert r["unsteady"] == (r["spread"] > 0.25)


def test_bench_sweep_grows_the_sequence(capsys):
    report = run_json(capsys, "--sweep", "--sweep-max", "16", "--rounds", "1", "--only", "numba")
    lengths = sorted({r["case"]["shape"][1] for r in report["results"]})
    assert lengths == [1, 4, 16]


def test_bench_prints_a_table(capsys):
    assert main(["bench", "--shape", "1,4,2,8", "--rounds", "1", "--only", "reference"]) == 0
    out = capsys.readouterr().out
    assert "% of copy" in out
    assert "[1x4x2x8 float32 (cpu)]" in out
    assert "reference" in out


@pytest.mark.parametrize("shape", ["1,2,3", "1,2,3,0", "a,b,c,d"])
def test_bench_rejects_bad_shapes(capsys, shape):
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--shape", shape])
    assert exit_info.value.code == 2
    assert "--shape must be four positive integers" in capsys.readouterr().err


def test_gpu_preset_without_cupy_says_what_to_install(capsys):
    if rr.available_backends()["cupy"] is None:
        pytest.skip("CuPy is installed here")
    assert main(["bench", "--preset", "gpu-decode", "--rounds", "1"]) == 1
    assert "pip install 'cupy-cuda12x>=14' ml_dtypes" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--shape", "1,1,1,1"], "--shape must have an even head_dim D"),
        (["--shape", "1,1,2,7", "--dtype", "float64"], "--shape must have an even head_dim D"),
        (["--sequences", "0", "--preset", "decode-interleaved"], "must be a positive integer"),
    ],
)
def test_bench_refuses_bad_arguments_with_usage(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", *argv])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--preset", "decode", "--only", "nosuch"],
            "--only names no implementation timed here: 'nosuch'; choose from 'copy",
        ),
        (
            ["--shape", "100000,100000,32,128"],
            "shape 100000,100000,32,128 has 40,960,000,000,000 elements; the benchmark holds "
            "about 64 bytes per element",
        ),
        (["--sequences", "5"], "--sequences applies to --preset decode-interleaved; got [5]"),
    ],
)
def test_bench_refuses_cases_it_cannot_run_before_running_any(capsys, argv, message):
    assert main(["bench", *argv]) == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert captured.out == ""


def test_bench_decode_interleaved_reports_each_number_of_sequences(capsys):
    argv = ["--preset", "decode-interleaved", "--sequences", "1", "--sequences", "3"]
    report = run_json(capsys, *argv, "--rounds", "1")
    rows = [(r["case"]["sequences"], r["name"]) for r in report["results"]]
    backend = "numba" if rr.available_backends()["numba"] is None else "reference"
    names = [f"{backend} offset=", f"{backend} positions=", f"{backend} offset= past 2**62"]
    for n in (1, 3):
        assert [name for seqs, name in rows if seqs == n][1:] == names
    assert all(r["median_s"] > 0 for r in report["results"])


def test_sequences_in_turn_rotate_at_their_own_positions():
    """The decode-interleaved runner rotates call k as token k // n of sequence k % n."""
    from rope_ref._engine.fast_path import BLOCK
    from rope_ref.cli.bench.cpu import SEQUENCE_SPACING, _in_turn

    x = np.random.default_rng(0).standard_normal((1, 1, 2, 8)).astype(np.float32)
    spec = rr.RopeSpec(8)
    n = 3
    for by_positions in (False, True):
        run = _in_turn(n, "reference", 0, by_positions=by_positions)(x)  # one round ran
        for k in range(n, 4 * n):
            seq, token = k % n, k // n
            at = seq * SEQUENCE_SPACING + (seq * BLOCK) // n + token
            want = rr.apply_rope(x, spec, np.array([float(at)]), seq_axis=-3)
            np.testing.assert_array_equal(run(), want)


def test_gpu_host_preset_times_the_gpu_path_without_a_gpu(capsys):
    """The host work of a repeated decode call, NumPy stand-ins, launches recorded."""
    report = run_json(capsys, "--preset", "gpu-host", "--rounds", "2")
    rows = {r["name"]: r for r in report["results"]}
    assert set(rows) == {
        "apply_rope_qk, positions on the device",
        "apply_rope_qk, offset (default positions)",
        "stand-in floor: 2 outputs' addresses, read when made",
    }
    for r in rows.values():
        assert r["case"] == {
            "shape": [32, 1, 32, 128], "dtype": "bfloat16", "device": "host", "qk": True,
            "sequences": 0, "k_heads": 8, "device_positions": True,
        }  # fmt: skip
        assert r["median_s"] > 0
        assert r["samples"] == 2


def test_gqa_cases_count_the_bytes_of_both_tensors():
    from rope_ref.cli.bench.harness import Case

    case = Case((4, 4096, 32, 128), "bfloat16", "gpu", qk=True, k_heads=8)
    q_bytes, k_bytes = 4 * 4096 * 32 * 128 * 2, 4 * 4096 * 8 * 128 * 2
    assert case.moved == 2 * (q_bytes + k_bytes)  # each read once and written once
    assert case.label == "4x4096x32x128 bfloat16 q+k (32/8 heads) (gpu)"


def test_every_row_gets_enough_rounds_for_quartiles(capsys, monkeypatch):
    """Rows slower than SLOW_CALL_S stop after SLOW_ROUNDS rounds, never before."""
    from rope_ref.cli.bench import harness

    monkeypatch.setattr(harness, "SLOW_CALL_S", 0.0)  # every row counts as slow
    report = run_json(capsys, "--shape", "1,4,2,8", "--rounds", "9", "--only", "reference")
    assert {r["samples"] for r in report["results"]} == {harness.SLOW_ROUNDS}
    assert harness.SLOW_ROUNDS >= 5


def test_table_marks_unsteady_rows_and_explains_the_mark():
    from rope_ref.cli.bench import format_table
    from rope_ref.cli.bench.harness import Case, Result

    case = Case((1, 4, 2, 8), "float32")

    def row(name, q1, median, q3):
        return Result(case, name, "backend", median, 9, 1.0, 100.0, 1.0, q1_s=q1, q3_s=q3)

    text = format_table([row("steady", 0.9e-3, 1.0e-3, 1.1e-3), row("noisy", 1e-3, 2e-3, 3e-3)])
    lines = text.splitlines()
    steady = next(line for line in lines if "steady" in line and "unsteady" not in line)
    noisy = next(line for line in lines if "noisy" in line)
    assert "1.00 ms  " in steady
    assert "!" not in steady
    assert "2.00 ms !" in noisy
    assert "1.00 ms - 3.00 ms" in noisy
    assert lines[-1].startswith("! unsteady: the quartiles span more than 25% of the median")
    assert "unsteady" not in format_table([row("steady", 0.9e-3, 1.0e-3, 1.1e-3)])


def test_each_sample_follows_an_untimed_call_of_its_own_row(monkeypatch):
    """What one row leaves behind (freed memory, a busy cache, thread pools still
    spinning) is absorbed by a pause and the next row's untimed call, not by its timed
    sample."""
    from rope_ref.cli.bench import harness

    log: list[str] = []
    timed = harness._time_call

    def logging_time_call(run, device):
        log.append("timed")
        return timed(run, device)

    def row(name):
        def run():
            log.append(name)

        return run

    monkeypatch.setattr(harness, "_time_call", logging_time_call)
    monkeypatch.setattr(harness, "_idle", lambda: log.append("idle"))
    runners = {"copy": row("copy"), "peer": harness._batched(row("peer"), "cpu")}
    log.clear()
    samples = harness._interleaved(runners, harness.Case((1, 4, 2, 8), "float32"), 3, None)
    assert [len(s) for s in samples.values()] == [3, 3]
    # log: [idle, untimed call, "timed", the sample's calls] per sample, rows alternating
    starts = [i for i, entry in enumerate(log) if entry == "timed"]
    assert len(starts) == 6
    for i, start in enumerate(starts):
        name = "copy" if i % 2 == 0 else "peer"
        end = starts[i + 1] - 2 if i + 1 < len(starts) else len(log)
        assert log[start - 2] == "idle"  # other rows' threads stop
        assert log[start - 1] == name  # the untimed call
        sample = log[start + 1 : end]
        assert sample
        assert set(sample) == {name}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_cases_large_enough_for_the_threaded_kernel_run(capsys, dtype):
    """A 16-bit case of 1 MiB (8192 rows) is copied as bits (the baseline) and rotated by
    the kernel's threads, from NumPy and from torch tensors."""
    pytest.importorskip("numba")
    torch_row = "numba (torch tensor)"
    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes")
    with_torch = importlib.util.find_spec("torch") is not None
    only = ["--only", "numba", *(["--only", torch_row] if with_torch else [])]
    report = run_json(capsys, "--shape", "1,1024,8,64", "--dtype", dtype, "--rounds", "2", *only)
    rows = {r["name"]: r for r in report["results"]}
    assert rows["copy (memory)"]["median_s"] > 0
    assert rows["numba"]["median_s"] > 0
    if with_torch:
        assert rows[torch_row]["median_s"] > 0


def test_table_names_what_is_not_timed_here(capsys, monkeypatch):
    from rope_ref.cli.bench import cpu

    missing = {"reference": None, "numba": "needs 'numba': pip install 'rope-ref[numba]'"}
    monkeypatch.setattr(cpu, "available_backends", lambda: missing)
    monkeypatch.setattr(cpu, "_installed", lambda module: False)
    assert main(["bench", "--shape", "1,4,2,8", "--rounds", "2"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("not timed here: numba (needs 'numba': pip install")
    assert "PyTorch eager and torch.compile (torch is not installed)" in last
    assert "rotary-embedding-torch (not installed)" in last


def test_torch_compile_rows_of_sizes_eager_runs_on_one_thread_compile_for_one(monkeypatch):
    """Inductor's kernel is an OpenMP region at any size; at a decode shape the row is
    compiled for one thread (``cpp.threads=1``), as eager runs it, and says so."""
    torch = pytest.importorskip("torch")
    from rope_ref.cli.bench import cpu
    from rope_ref.cli.bench.rows import Case

    seen: list[dict] = []

    def compile_(fn, **options):
        seen.append(options)
        return fn

    monkeypatch.setattr(torch, "compile", compile_)
    x = np.zeros((1, 1, 32, 128), np.float32)
    for shape, one_thread in (((1, 1, 32, 128), True), ((1, 4096, 32, 128), False)):
        rows = {i.name: i for i in cpu.implementations(Case(shape, "float32"))}
        row = rows["torch.compile (HF-style)"]
        assert (row.note == cpu.ONE_THREAD_NOTE) is one_thread
        row.prepare(x)
        assert seen.pop()["options"] == ({"cpp.threads": 1} if one_thread else None)
