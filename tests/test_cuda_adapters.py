"""The PyTorch and JAX adapters of the CUDA kernel over a stand-in CuPy (no GPU).

JAX hands its buffers to the kernel through DLPack views; the views (and so the buffers)
must outlive the asynchronous launch until the stream is past it, as PyTorch's
``record_stream`` keeps a tensor: stand-ins record when each view is let go. bfloat16
through DLPack needs CuPy 14 with ml_dtypes: older CuPy gets a TypeError that says so.
"""

from __future__ import annotations

import gc
import sys
import weakref

import ml_dtypes
import numpy as np
import pytest

import rope_ref as rr
from tests.cuda_host import emulation, stub_cupy
from tests.cuda_host.cases import DTYPES, assert_error_model, random_x

arrays_module = emulation.backend_module("cuda.arrays")
call_module = emulation.backend_module("cuda.call")
tables_module = emulation.backend_module("cuda.tables")


@pytest.fixture
def cupy(monkeypatch):
    """A stand-in ``cupy`` in sys.modules; the adapters made for it are forgotten after."""
    module = stub_cupy.module()
    monkeypatch.setitem(sys.modules, "cupy", module)
    stub_cupy.Event.made.clear()
    arrays_module._adapter.cache_clear()
    yield module
    arrays_module._adapter.cache_clear()
    stub_cupy.Event.made.clear()


class View(np.ndarray):
    """A stand-in for the CuPy view of a JAX buffer: a NumPy view that can be watched."""


class JaxBuffer(np.ndarray):
    """A stand-in for a JAX array (its own type, served by the JAX adapter under test)."""


def jax_adapter(harness):
    """The JAX adapter, but its views are NumPy views and its launches the host harness."""
    base = arrays_module.HostStandIn

    class JaxStandIn(base):  # type: ignore[misc, valid-type]
        kind = "jax"

        def __init__(self):
            super().__init__(launch=harness.launch)
            self.views = []
            self.keep_alive = arrays_module._JaxArrays.keep_alive.__get__(self)
            self._held = arrays_module.Held(sys.modules["cupy"])

        def stream(self, a):
            return sys.modules["cupy"].cuda.get_current_stream()

        def launchable(self, a):
            view = np.asarray(a).view(View)
            self.views.append(weakref.ref(view))
            return view

        def result(self, a):
            return a

    return JaxStandIn()


def alive(refs):
    gc.collect()
    return sum(r() is not None for r in refs)


@pytest.mark.cuda_host
def test_jax_views_live_until_the_stream_is_past_the_launch(cupy, harness, np_rng):
    adapter = jax_adapter(harness)
    spec = rr.RopeSpec(head_dim=32)
    call_module.clear()
    tables_module.device_tables.clear()
    views = arrays_module.HostStandIn(launch=harness.launch)  # CuPy's adapter, for the views
    with arrays_module.stand_in(adapter, JaxBuffer), arrays_module.stand_in(views, View):
        x = random_x(np_rng, (2, 5, 3, 32), DTYPES["float32"])
        positions = np.arange(5).reshape(1, 5, 1)
        y = call_module._through_cupy(
            adapter, call_module.apply, x.view(JaxBuffer), spec, positions.view(JaxBuffer),
            0, -3, False, None, None,
        )  # fmt: skip
        assert_error_model(np.asarray(y), x, spec, positions)
        assert alive(adapter.views) == 2  # x's and the positions' views: the kernel reads them
        (event,) = stub_cupy.Event.made
        assert event.stream is cupy.cuda.get_current_stream()
        event.complete()  # the stream is past the launch
        assert alive(adapter.views) == 2  # let go at the next launch, not from a callback
        rr.apply_rope(x.view(JaxBuffer), spec, seq_axis=-3, backend="cupy")
        assert alive(adapter.views[:2]) == 0
    call_module.clear()
    tables_module.device_tables.clear()


@pytest.mark.cuda_host
def test_the_general_paths_jax_temporaries_live_until_the_launch_is_done(cupy, harness, np_rng):
    """The kernel contract's `rotate` given JAX-built cos/sin that nothing else holds."""
    adapter = jax_adapter(harness)
    launcher = emulation.launcher()
    x = random_x(np_rng, (2, 5, 3, 32), DTYPES["float32"])
    positions = np.arange(5).reshape(1, 5, 1)
    cos, sin = (t.astype(np.float32).view(JaxBuffer)
                for t in rr.rope_cos_sin(rr.RopeSpec(head_dim=32), positions))  # fmt: skip
    with arrays_module.stand_in(adapter, JaxBuffer):
        y = launcher.rotate(x.view(JaxBuffer), cos, sin, layout="half", rotary_start=0,
                            inverse=False)  # fmt: skip
        del cos, sin  # the caller's temporaries are gone
        assert alive(adapter.views) == 4  # x, cos, sin and out: held by the event
        stub_cupy.Event.made[0].complete()
        ones = np.ones((1, 5, 1, 16), np.float32).view(JaxBuffer)
        launcher.rotate(x.view(JaxBuffer), ones, ones, layout="half", rotary_start=0,
                        inverse=False)  # fmt: skip
        assert alive(adapter.views[:4]) == 0
    assert_error_model(np.asarray(y), x, rr.RopeSpec(head_dim=32), positions)


def test_nothing_is_held_for_a_graph_capture(cupy):
    held = arrays_module.Held(cupy)
    held.hold(["view"], stub_cupy.Stream(capturing=True))
    assert len(held) == 0
    assert stub_cupy.Event.made == []


@pytest.mark.parametrize(("version", "ok"), [("13.6.0", False), ("14.0.0", True)])
def test_bfloat16_through_dlpack_needs_cupy_14(monkeypatch, version, ok):
    torch = pytest.importorskip("torch")
    module = stub_cupy.module(version)
    received: list[object] = []
    module.from_dlpack = received.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy", module)
    adapter = arrays_module._TorchArrays()
    tensor = torch.zeros(4, dtype=torch.bfloat16)
    if ok:
        adapter.launchable(tensor)
        assert len(received) == 1
    else:
        with pytest.raises(TypeError, match=r"needs CuPy >= 14 and ml_dtypes.*got CuPy 13\.6"):
            adapter.launchable(tensor)
        assert received == []
    adapter.launchable(torch.zeros(4, dtype=torch.float16))  # other dtypes: any CuPy 13+
    jax_adapter_ = object.__new__(arrays_module._JaxArrays)
    jax_adapter_.xp = module
    bf16 = np.zeros(4, dtype=ml_dtypes.bfloat16)
    if not ok:
        with pytest.raises(TypeError, match="needs CuPy >= 14"):
            jax_adapter_.launchable(bf16)


def test_bfloat16_needs_ml_dtypes_too(monkeypatch):
    real = arrays_module.importlib.util.find_spec
    monkeypatch.setattr(arrays_module.importlib.util, "find_spec",
                        lambda name: None if name == "ml_dtypes" else real(name))  # fmt: skip
    with pytest.raises(TypeError, match=r"got CuPy 14\.2\.0 without ml_dtypes"):
        arrays_module.check_bfloat16(stub_cupy.module("14.2.0"))
