"""Type aliases shared by the core and the kernels."""

from types import ModuleType
from typing import Any, Literal, TypeAlias

#: Any array of a namespace that follows the Python array API standard.
Array: TypeAlias = Any
#: An array-API namespace module (as returned by ``array_namespace``).
ArrayNamespace: TypeAlias = ModuleType
#: Which coordinates rotate together: ``(j, j + n_pairs)`` or ``(2j, 2j + 1)``.
Layout: TypeAlias = Literal["half", "interleaved"]
#: How a rotation is computed by the reference backend.
Form: TypeAlias = Literal["rotate_half", "complex", "matrix"]
#: How multi-axis pairs are assigned to position axes.
SectionOrder: TypeAlias = Literal["chunked", "interleaved"]
#: Names accepted by ``backend=``.
BackendName: TypeAlias = Literal["reference", "numba", "cupy", "auto", "exact"]
#: Names accepted by ``backend=`` of the table functions and `rope_ref.rerotate`.
TableBackend: TypeAlias = Literal["reference", "exact"]
#: Which side of attention an array is, for xPos.
Role: TypeAlias = Literal["query", "key"]

LAYOUTS: tuple[Layout, ...] = ("half", "interleaved")
FORMS: tuple[Form, ...] = ("rotate_half", "complex", "matrix")
SECTION_ORDERS: tuple[SectionOrder, ...] = ("chunked", "interleaved")
ROLES: tuple[Role, ...] = ("query", "key")
TABLE_BACKENDS: tuple[TableBackend, ...] = ("reference", "exact")
