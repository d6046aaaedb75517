"""What a timing depends on: the machine, its threads and the libraries' versions."""

from __future__ import annotations

import datetime as dt
import os
import platform
from typing import Any

__all__ = ["machine_description"]


def machine_description() -> dict[str, Any]:
    """Date, CPU, thread counts and library versions: what a timing depends on."""
    import numpy as np

    info: dict[str, Any] = {
        "date": dt.date.today().isoformat(),
        "cpu": _cpu_name(),
        "logical_cpus": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
    }
    try:
        import numba

        info["numba"] = numba.__version__
        info["numba_threads"] = numba.get_num_threads()
    except ImportError:
        pass
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
    except ImportError:
        pass
    from rope_ref.cli.bench.gpu import gpu_description

    return {**info, **gpu_description()}


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
