"""The PyTorch custom operators ``rope_ref::apply_rope``/``apply_rope_qk`` over both kernels."""
