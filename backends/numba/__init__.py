"""The Numba CPU kernel: entry points (``cpu``), row loops (``rows``), 16-bit loads/stores."""
