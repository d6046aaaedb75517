"""Accelerated RoPE kernels, installed as ``rope_ref.backends``.

Nothing here is imported eagerly: ``rope_ref`` loads a kernel module by name, through its
backend registry, the first time ``apply_rope(..., backend=...)`` asks for it. Each module
provides ``rotate(x, cos, sin, /, *, layout, rotary_start, inverse, out)`` with the
semantics of the reference backend.
"""
