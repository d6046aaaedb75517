"""The mathematics: specs, positions, float64 angles and tables, the reference rotation.

Imports nothing of rope_ref outside this package.
"""
