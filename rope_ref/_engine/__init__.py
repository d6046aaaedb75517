"""The public calls: arguments checked once, tables built or cached, a backend chosen.

Imports `rope_ref._core` and `rope_ref._config`; the kernels (`rope_ref.backends`)
are loaded by name.
"""
