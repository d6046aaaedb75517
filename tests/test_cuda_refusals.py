"""What the CUDA path refuses, run with NumPy stand-ins for device arrays (no GPU).

An `out` on another device, an `out` that overlaps itself, and, while a CUDA graph is being
captured, any call the kernel cannot take directly: each is refused with an error that
names it, before anything is launched or written. The JAX adapter reads the device's local
ordinal. Needs nvcc (the host emulation runs the launches that are allowed).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import rope_ref as rr
from tests.cuda_host import emulation
from tests.cuda_host.cases import DTYPES, assert_error_model, random_x

pytestmark = pytest.mark.cuda_host

arrays_module = emulation.backend_module("cuda.arrays")
call_module = emulation.backend_module("cuda.call")
tables_module = emulation.backend_module("cuda.tables")
SPEC = rr.RopeSpec(head_dim=16)
MOST_ROWS = tables_module.MAX_BYTES // (2 * 8 * 4)  # cos and sin, 8 float32 pairs a row


class TwoDevices(arrays_module.HostStandIn):  # type: ignore[misc, name-defined]
    """Stand-ins on device 0, but those whose memory lies in `second` (device 1)."""

    def __init__(self, launch):
        super().__init__(launch=launch)
        self.second = np.zeros(0)

    def device(self, a):
        return int(np.shares_memory(a, self.second))

    def geometry(self, a):
        return (a.shape, a.strides, a.dtype, self.device(a))


@pytest.fixture
def fresh():
    call_module.clear()
    tables_module.device_tables.clear()
    yield
    call_module.clear()
    tables_module.device_tables.clear()


@pytest.mark.parametrize("positions", [None, np.arange(5).reshape(1, 5, 1)])
def test_out_on_another_device_is_refused(fresh, harness, np_rng, positions):
    host = TwoDevices(launch=harness.launch)
    x = random_x(np_rng, (2, 5, 3, 16), DTYPES["float32"])
    host.second = out = np.full_like(x, 7.0)
    harness.launches.clear()
    with arrays_module.stand_in(host):
        with pytest.raises(ValueError, match=r"`out` must be on the device of `x` \(device 0\)"):
            rr.apply_rope(x, SPEC, positions, seq_axis=-3, backend="cupy", out=out)
        # the kernel contract says the same
        cos = np.ones((1, 5, 1, 8), np.float32)
        with pytest.raises(ValueError, match="`out` must be on the device of `x`"):
            rr.backends.cuda.cupy_kernel.rotate(x, cos, cos, layout="half", rotary_start=0,
                                         inverse=False, out=out)  # fmt: skip
    assert harness.launches == []
    np.testing.assert_array_equal(out, np.full_like(x, 7.0))  # nothing written


@pytest.mark.parametrize("positions", [None, np.arange(5).reshape(1, 5, 1)])
def test_an_out_that_overlaps_itself_is_refused(fresh, harness, np_rng, positions):
    x = random_x(np_rng, (2, 5, 3, 16), DTYPES["float32"])
    row = random_x(np_rng, (1, 5, 1, 16), DTYPES["float32"])
    expanded = np.broadcast_to(row, x.shape)  # stride 0 over batch and heads
    expanded.flags.writeable = True  # as torch's expand() gives a writable view
    before = row.copy()
    harness.launches.clear()
    with arrays_module.stand_in(arrays_module.HostStandIn(launch=harness.launch)):
        for out, source in ((expanded, expanded), (expanded, x)):
            with pytest.raises(ValueError, match="`out` must not overlap itself"):
                rr.apply_rope(source, SPEC, positions, seq_axis=-3, backend="cupy", out=out)
    np.testing.assert_array_equal(row, before)  # no element rotated twice, nor once
    assert harness.launches == []


def test_overlaps_itself_by_the_definition(np_rng):
    """Against a brute-force count of the byte ranges each element covers."""
    describe = emulation.backend_module("cuda.plan").describe_numpy
    overlaps_itself = emulation.backend_module("cuda.plan").overlaps_itself
    base = np.zeros(256, np.float32)
    for _ in range(300):
        ndim = int(np_rng.integers(1, 4))
        shape = tuple(int(n) for n in np_rng.integers(1, 4, size=ndim))
        strides = tuple(4 * int(s) for s in np_rng.integers(0, 9, size=ndim))
        view = np.lib.stride_tricks.as_strided(base[100:], shape, strides)
        starts = [sum(i * s for i, s in zip(index, strides, strict=True))
                  for index in np.ndindex(*shape)]  # fmt: skip
        touching = len(set(starts)) < len(starts)  # 4-byte steps: equal starts or apart
        if touching:
            assert overlaps_itself(describe(view)), (shape, strides)
        elif not overlaps_itself(describe(view)):
            assert len(set(starts)) == len(starts)


def capture_case(np_rng):
    return random_x(np_rng, (2, 5, 3, 16), DTYPES["float32"])


NTK = rr.RopeSpec(head_dim=16, scaling=rr.scaling.DynamicNTK(2.0, max_position=8))
XPOS = rr.RopeSpec(head_dim=16, xpos=rr.XPos())
CAPTURE_REFUSED = {  # the call, and what the error must say about it
    "xpos": (lambda x: rr.apply_rope(x, XPOS, seq_axis=-3, backend="cupy"),
             "its spec has xPos or sections"),
    "a role": (lambda x: rr.apply_rope(x, XPOS, seq_axis=-3, role="query", backend="cupy"),
               "a `role` or a `form` other than 'rotate_half'"),
    "another form": (lambda x: rr.apply_rope(x, SPEC, seq_axis=-3, form="complex",
                                             backend="cupy"),
                     "a `role` or a `form` other than 'rotate_half'"),
    "another form, q and k": (lambda x: rr.apply_rope_qk(x, x, SPEC, seq_axis=-3,
                                                         form="matrix", backend="auto"),
                              "a `role` or a `form`"),
    "host positions": (lambda x: rr.apply_rope(x, SPEC, [0, 1, 2, 3, 4], seq_axis=-3,
                                               backend="cupy"),
                       "its positions are not an array of x's kind on its device"),
    "fractional offset": (lambda x: rr.apply_rope(x, SPEC, seq_axis=-3, offset=0.5,
                                                  backend="cupy"),
                          "offset=0.5 is not an integer >= 0"),
    "past the table limit": (lambda x: rr.apply_rope(x, SPEC, seq_axis=-3, offset=MOST_ROWS,
                                                     backend="cupy"),
                             f"run past the {MOST_ROWS} rows of the device table cache"),
    "keys past the table limit": (lambda x: rr.apply_rope_qk(x[:, :1], x, SPEC, seq_axis=-3,
                                                             offset=MOST_ROWS - 2,
                                                             backend="cupy"),
                                  "run past the"),
    "length-dependent without seq_len": (
        lambda x: rr.apply_rope(x, NTK, np.arange(5).reshape(1, 5, 1), seq_axis=-3,
                                backend="cupy"),
        "no seq_len is given: pass seq_len"),
    "keys of another kind": (lambda x: rr.apply_rope_qk(x, x.tolist(), SPEC, seq_axis=-3,
                                                        backend="cupy"),
                             "`k` is not of q's kind"),
    "out of another kind": (lambda x: rr.apply_rope(x, SPEC, seq_axis=-3, out=x.tolist(),
                                                    backend="cupy"),
                            "its `out` is not an array of x's kind"),
}  # fmt: skip


@pytest.mark.parametrize("case", CAPTURE_REFUSED)
def test_a_capture_refuses_what_would_leave_the_kernel(fresh, harness, np_rng, case):
    x = capture_case(np_rng)
    host = arrays_module.HostStandIn(launch=harness.launch)
    with arrays_module.stand_in(host):
        rr.apply_rope(x, SPEC, seq_axis=-3, backend="cupy")  # the tables on the device
        if "table limit" in case:  # the largest cache there is, on the device
            rr.apply_rope(x, SPEC, seq_axis=-3, offset=MOST_ROWS - 8, backend="cupy")
        launched = len(harness.launches)
        host.capture = True
        host.upload = lambda *a: pytest.fail("a host-to-device copy during capture")
        call, why = CAPTURE_REFUSED[case]
        with pytest.raises(RuntimeError, match="cannot run inside a CUDA graph capture") as err:
            call(x)
        assert why in str(err.value)
        assert "A capture takes: positions on the device" in str(err.value)
        assert len(harness.launches) == launched  # nothing half-run


def test_a_capture_still_takes_what_the_kernel_takes(fresh, harness, np_rng):
    x = capture_case(np_rng)
    positions = np.arange(5).reshape(1, 5, 1) + 3
    host = arrays_module.HostStandIn(launch=harness.launch)
    with arrays_module.stand_in(host):
        rr.apply_rope(x, SPEC, positions, seq_axis=-3, backend="cupy")
        host.capture = True
        y = rr.apply_rope(x, SPEC, positions, seq_axis=-3, backend="cupy")
    assert_error_model(y, x, SPEC, positions)


def test_jax_device_is_the_local_ordinal():
    """In multi-process JAX, `device.id` is global; `local_hardware_id` is the CUDA ordinal."""
    adapter = object.__new__(arrays_module._JaxArrays)
    gpu = SimpleNamespace(id=5, local_hardware_id=1, platform="gpu")
    array = SimpleNamespace(devices=lambda: (gpu,))
    assert adapter.device(array) == 1
