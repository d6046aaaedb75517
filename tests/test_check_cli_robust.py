"""`rope-ref check` cannot be fooled: inputs overwritten, in-place targets, exits, hangs,
and every bad option is a one-line usage error (exit 2, no traceback)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rope_ref.cli import main

REPO = Path(__file__).resolve().parent.parent
TARGETS = "tests.check_targets"
FAST = ["--examples", "10"]


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    monkeypatch.chdir(REPO)


def _check(capsys, *argv):
    status = main(["check", *argv])
    out = capsys.readouterr().out
    assert "Traceback" not in out
    return status, out


def _usage(capsys, *argv):
    """Exit status and stderr of a usage error, which prints nothing on stdout."""
    status = main(["check", *argv])
    captured = capsys.readouterr()
    assert captured.out == "", captured.out
    assert "Traceback" not in captured.err
    return status, captured.err


@pytest.mark.parametrize("dtype", ["float32", "float64"])  # float64: no conversion copy
@pytest.mark.parametrize(
    ("target", "convention"),
    [
        ("zeroes_input_plain", "plain"),
        ("zeroes_input_cos_sin", "cos_sin"),
        ("zeroes_inputs_hf", "hf"),
        ("zeroes_input_complex", "complex"),
    ],
)
def test_a_target_that_zeroes_its_input_fails(capsys, target, convention, dtype):
    if convention != "plain":
        pytest.importorskip("torch")
    argv = ["--convention", convention, "--dtype", dtype, *FAST]
    status, out = _check(capsys, f"{TARGETS}:{target}", *argv)
    assert status == 1, out
    assert "FAIL: not conformant" in out
    assert "diagnosis: zeros\n" in out


@pytest.mark.parametrize(
    ("target", "convention"),
    [("flash_in_place", "cos_sin"), ("hf_in_place", "hf")],
)
def test_in_place_targets(capsys, target, convention):
    pytest.importorskip("torch")
    if target.startswith("hf"):
        pytest.importorskip("transformers")
    argv = [f"{TARGETS}:{target}", "--convention", convention, *FAST]
    status, out = _check(capsys, *argv, "--in-place")
    assert status == 0, out
    assert "calling: torch arrays" in out
    assert ", in place" in out
    status, out = _check(capsys, *argv)  # without --in-place: None is not a result
    assert status == 1
    assert "got NoneType (if it rotates its input in place, pass --in-place)" in out


def test_a_target_that_exits_fails_with_a_message(capsys):
    status, out = _check(capsys, f"{TARGETS}:exits_zero", "--convention", "plain", *FAST)
    assert status == 1
    assert "FAIL: the checked function raised SystemExit: 0 (at check_targets.py:" in out


def test_a_module_that_exits_on_import(capsys, tmp_path):
    module = tmp_path / "exits_on_import.py"
    module.write_text("import sys\nsys.exit(3)\n")
    status, out = _check(capsys, f"{module}:rope", "--convention", "plain")
    assert status == 1
    assert "FAIL: importing the target raised SystemExit: 3 (at exits_on_import.py:2" in out


def test_a_hanging_target_times_out(capsys):
    argv = [f"{TARGETS}:hangs", "--convention", "plain", "--timeout", "0.5"]
    status, out = _check(capsys, *argv, *FAST)
    assert status == 1
    assert "FAIL: the checked function did not return within 0.5 s" in out


@pytest.mark.parametrize(
    ("options", "snippet"),
    [
        (["--max-position", str(10**30)], "--max-position must be between 0 and 2**53"),
        (["--max-position", "-1"], "--max-position must be between 0 and 2**53"),
        (["--head-dim", "10000000"], "--head-dim must be between 1 and 4096; got 10000000."),
        (["--timeout", "0"], "--timeout must be a positive number of seconds; got 0.0."),
        (["--timeout", "nan"], "--timeout must be a positive number"),
        (["--seed", str(2**70)], "--seed must fit in 64 bits"),
        (["--device", "cuda"], "--device is for torch tensors; --array numpy runs on cpu"),
        (["--hf-config", "{not json"], "--hf-config: the JSON string is not valid JSON"),
        (["--hf-config", "/no/such/config.json"], "'/no/such/config.json': file not found."),
        (["--hf-config", "[1, 2]"], "--hf-config must hold a JSON object; got list."),
        (["--hf-config", "x" * 5000], "cannot be read as a file (File name too long)"),
        (["--hf-config", '{"a": ' * 50000], "is nested too deeply to be a config"),
        (["--hf-config", "[" * 50000], "is nested too deeply to be a config"),
        (["--hf-config", "no-such-config"], "file not found (give a config.json path or a JSON"),
        (["--hf-config", '{"head_dim": 64}', "--base", "5"], "drop --base"),
        (["--positions", "offset", "--convention", "hf"], "--positions offset cannot be"),
        (["--array", "torch", "--convention", "hf"], "--array is for --convention plain"),
        (
            [
                "--convention",
                "hf",
                "--hf-config",
                '{"model_type": "qwen2_vl", "hidden_size": 512, "num_attention_heads": 4}',
            ],
            "a multi-axis spec (sections [16, 24, 24]) needs --convention plain",
        ),
        (
            [
                "--positions",
                "offset",
                "--hf-config",
                '{"model_type": "qwen2_vl", "hidden_size": 512, "num_attention_heads": 4}',
            ],
            "needs --convention plain with",
        ),
    ],
)
def test_bad_options_are_usage_errors(capsys, options, snippet):
    if "hf" in options:  # without torch, the missing torch is the first error
        pytest.importorskip("torch")
    argv = [f"{TARGETS}:correct_half", "--convention", "plain", *options]
    status, out = _usage(capsys, *argv)
    assert status == 2, out
    assert out.startswith("rope-ref check: error: ")
    assert snippet in out


def test_unreadable_config_files_are_usage_errors(capsys, tmp_path):
    latin = tmp_path / "config.json"
    latin.write_bytes(b'{"model_type": "caf\xe9"}')
    argv = [f"{TARGETS}:correct_half", "--convention", "plain"]
    status, out = _usage(capsys, *argv, "--hf-config", str(latin))
    assert status == 2, out
    assert out == (
        f"rope-ref check: error: --hf-config {str(latin)!r}: is not UTF-8 text (byte 19); a "
        "config.json is UTF-8 JSON.\n"
    )
    status, out = _usage(capsys, *argv, "--hf-config", str(tmp_path))
    assert status == 2, out
    assert "is a directory, not a config.json file." in out


@pytest.mark.parametrize(
    ("device", "snippet"),
    [
        ("bogus", "--device must be a torch device such as cpu or cuda:0; got 'bogus'."),
        ("cuda", "--device cuda: torch sees no CUDA device here."),
    ],
)
def test_bad_torch_devices_are_usage_errors(capsys, device, snippet):
    torch = pytest.importorskip("torch")
    if device == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    argv = [f"{TARGETS}:flash_apply_rotary_emb_torch", "--convention", "cos_sin"]
    status, out = _usage(capsys, *argv, "--device", device)
    assert status == 2, out
    assert snippet in out


def test_the_time_limit_gives_back_an_outer_alarm():
    import signal

    from rope_ref.cli.check.timeout import TargetTimeoutError, call_with_timeout

    if not hasattr(signal, "setitimer"):
        pytest.skip("no interval timers here")
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.append(True))
    try:
        signal.setitimer(signal.ITIMER_REAL, 30.0)
        assert call_with_timeout(lambda a, b: a + b, (1, 2), {}, 5.0) == 3
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 25.0 < left <= 30.0  # the outer alarm is still pending
        with pytest.raises(TargetTimeoutError):
            call_with_timeout(__import__("time").sleep, (2.0,), {}, 0.05)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert not fired


def test_the_time_limit_off_the_main_thread():
    import threading
    import time

    from rope_ref.cli.check.timeout import TargetTimeoutError, call_with_timeout

    outcome = {}

    def worker():
        outcome["sum"] = call_with_timeout(lambda a: a + 1, (1,), {}, 5.0)
        try:
            call_with_timeout(time.sleep, (1.0,), {}, 0.05)
        except TargetTimeoutError as err:
            outcome["timeout"] = err.seconds

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(10)
    assert outcome == {"sum": 2, "timeout": 0.05}
