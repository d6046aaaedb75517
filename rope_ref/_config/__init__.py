"""Specs from other libraries' configurations (HF transformers).

Imports `rope_ref._core` and `rope_ref.scaling`.
"""
