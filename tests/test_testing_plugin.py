"""The pytest plugin: fixtures `rope_oracle` and `xp` for projects that install rope-ref."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

from rope_ref.testing import RopeOracle
from rope_ref.testing._plugin import NAMESPACES, namespace_names


def _pytest(tmp_path, files, *, xp="numpy"):
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    env = {**os.environ, "ROPE_REF_XP": xp}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        check=False,
    )


def test_an_outside_project_gets_both_fixtures(tmp_path):
    result = _pytest(
        tmp_path,
        {
            "test_kernel.py": """
            import rope_ref as rr

            def my_rope(x, spec):  # stands in for the project's kernel
                return rr.apply_rope(x, spec)

            def test_with_fixtures(xp, rope_oracle):
                spec = rr.RopeSpec(head_dim=8)
                x = xp.ones((3, 8), dtype=xp.float32)
                rope_oracle.assert_close(my_rope(x, spec), x, spec)

            def test_failure_is_diagnosed(xp, rope_oracle):
                spec = rr.RopeSpec(head_dim=8)
                x = xp.ones((3, 8), dtype=xp.float32)
                rope_oracle.assert_close(rr.apply_rope(x, spec, offset=1), x, spec)
            """
        },
        xp="numpy,array_api_strict",
    )
    out = result.stdout
    assert "2 failed, 2 passed" in out, out + result.stderr
    assert "test_with_fixtures[numpy]" not in out  # passed
    assert "Likely cause: offset" in out


def test_a_conftest_xp_overrides_the_plugin(tmp_path):
    result = _pytest(
        tmp_path,
        {
            "conftest.py": """
            import pytest

            @pytest.fixture(params=["mine"])
            def xp(request):
                return request.param
            """,
            "test_override.py": """
            def test_own_xp(xp):
                assert xp == "mine"
            """,
        },
    )
    assert "1 passed" in result.stdout, result.stdout + result.stderr


def test_namespace_names_follow_the_environment():
    assert namespace_names({"ROPE_REF_XP": "numpy, torch"}) == ("numpy", "torch")
    installed = namespace_names({})
    assert installed[0] == "numpy"
    assert set(installed) <= set(NAMESPACES)


def test_this_suite_uses_its_own_xp_fixture(request, xp):
    # tests/conftest.py defines `xp`; the plugin's must not replace it here.
    defs = request._fixturemanager.getfixturedefs("xp", request.node)
    assert defs[-1].func.__module__ != "rope_ref.testing._plugin"


def test_rope_oracle_fixture(rope_oracle):
    assert isinstance(rope_oracle, RopeOracle)
    assert repr(rope_oracle) == "RopeOracle()"


def test_plugin_loads_without_importing_heavy_modules():
    # The entry point's package (rope_ref.testing, hence rope_ref and NumPy) loads with it;
    # Hypothesis, torch and JAX must not.
    code = (
        "import sys, rope_ref.testing._plugin; "
        "print(sorted(m for m in ('hypothesis', 'torch', 'jax', 'dask') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs jax")
def test_the_jax_xp_leaves_float64_as_it_found_it(tmp_path):
    # the fixture turns float64 on for its test; a later test must see JAX's default again
    result = _pytest(
        tmp_path,
        {
            "test_order.py": """
            import jax
            import jax.numpy as jnp

            def test_first_with_xp(xp):
                assert xp.asarray([1.0], dtype=xp.float64).dtype == xp.float64

            def test_then_without():
                assert jax.config.jax_enable_x64 is False
                assert jnp.arange(3).dtype == jnp.int32
            """
        },
        xp="jax.numpy",
    )
    assert "2 passed" in result.stdout, result.stdout + result.stderr
