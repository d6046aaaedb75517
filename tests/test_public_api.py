"""What `import rope_ref` exposes, and what it must not pull in."""

from __future__ import annotations

import importlib.util
import inspect
import subprocess
import sys

import rope_ref as rr


def test_all_lists_exactly_the_public_names():
    public = {name for name in dir(rr) if not name.startswith("_")} | {"__version__"}
    modules = {name for name in public if inspect.ismodule(getattr(rr, name))}
    assert set(rr.__all__) == public - modules


def test_every_public_function_has_a_runnable_example():
    for name in rr.__all__:
        obj = getattr(rr, name)
        if callable(obj) and not isinstance(obj, type):
            assert ">>>" in (obj.__doc__ or ""), name


def test_import_pulls_in_no_kernel_or_test_dependency():
    code = (
        "import sys, rope_ref; "
        "print(sorted(m for m in ('numba', 'cupy', 'hypothesis', 'torch', 'jax', 'dask') "
        "if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_backends_package_resolves_through_the_package_dir_mapping():
    assert importlib.util.find_spec("rope_ref.backends") is not None


def test_reference_backend_is_always_available():
    backends = rr.available_backends()
    assert backends["reference"] is None
    assert set(backends) == {"reference", "numba", "cupy", "exact"}
    for reason in backends.values():
        assert reason is None or isinstance(reason, str)


def test_signatures_follow_the_design_contract():
    sig = inspect.signature(rr.apply_rope)
    params = sig.parameters
    assert params["x"].kind is inspect.Parameter.POSITIONAL_ONLY
    assert params["spec"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert params["positions"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    keyword_only = [n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    assert keyword_only == [
        "offset",
        "seq_axis",
        "inverse",
        "seq_len",
        "form",
        "backend",
        "out",
        "role",
    ]
    assert params["backend"].default == "reference"


def test_scaling_is_lazy_and_its_public_names_have_examples():
    code = "import sys, rope_ref; print('rope_ref.scaling' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
    scaling = rr.scaling
    public = {name for name in dir(scaling) if not name.startswith("_")}
    assert set(scaling.__all__) == {n for n in public if not inspect.ismodule(getattr(scaling, n))}
    for name in scaling.__all__:
        assert ">>>" in (getattr(scaling, name).__doc__ or ""), name
    for name in ("from_hf", "to_hf"):
        assert ">>>" in (getattr(rr.RopeSpec, name).__doc__ or ""), name


def test_dir_shows_only_the_public_names():
    submodules = {"analysis", "attention", "scaling", "testing"}
    assert dir(rr) == sorted({*rr.__all__, *submodules})
    assert not [name for name in dir(rr) if name.startswith("_") and name != "__version__"]
