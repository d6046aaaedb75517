"""Accelerated RoPE kernels, installed as ``rope_ref.backends``, one package per kernel.

Nothing here is imported eagerly: ``rope_ref`` loads a kernel module by name, through its
backend registry, the first time ``apply_rope(..., backend=...)`` asks for it.

- ``numba``: the CPU kernel (``numba.cpu``, with its row loops in ``numba.rows`` and the
  16-bit loads and stores in ``numba.convert``).
- ``cuda``: the CUDA kernel ``rope.cu``/``rope.cuh``, launched through CuPy by
  ``cuda.cupy_kernel``; its parts, none of which imports CuPy: ``cuda.plan`` (launch plans from
  array descriptors), ``cuda.arrays`` (CuPy, PyTorch and JAX arrays, streams, the launch),
  ``cuda.tables`` (tables resident on the device), ``cuda.capture`` (CUDA graph capture) and
  ``cuda.call`` (the short road from ``apply_rope``).
- ``exact``: the correctly rounded rotation (``exact.api``), from mpmath.
- ``torch_ops``: the PyTorch custom operators over both kernels (``torch_ops.operators``,
  ``torch_ops.cuda``), their autograd and vmap rules and the spec registry.

The kernel modules ``numba.cpu`` and ``cuda.cupy_kernel`` provide ``rotate(x, cos, sin, /, *,
layout, rotary_start, inverse, out)`` with the semantics of the reference backend.
"""
