"""Accelerated RoPE kernels, installed as ``rope_ref.backends``.

Nothing here is imported eagerly: ``rope_ref`` loads a kernel module by name, through its
backend registry, the first time ``apply_rope(..., backend=...)`` asks for it. The kernel
modules, ``numba_cpu`` and ``cupy_cuda``, provide ``rotate(x, cos, sin, /, *, layout,
rotary_start, inverse, out)`` with the semantics of the reference backend. The CUDA
kernel's parts live beside ``cupy_cuda``: ``cuda_plan`` (launch plans from array
descriptors), ``cuda_arrays`` (CuPy, PyTorch and JAX arrays, streams, the launch),
``cuda_tables`` (tables resident on the device) and ``cuda_call`` (the short road from
``apply_rope``); none of them imports CuPy.
"""
