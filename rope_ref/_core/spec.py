"""`RopeSpec`: what a rotary embedding is, validated once at construction."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, Protocol, cast, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from rope_ref._core.aliases import LAYOUTS, SECTION_ORDERS, Layout, SectionOrder
from rope_ref._core.validation import check_choice, check_int, check_real

__all__ = [
    "MAX_HEAD_DIM",
    "RopeSpec",
    "ScalingRule",
    "XPosRule",
    "check_spec",
    "install_hf_converters",
]

#: Largest `RopeSpec.head_dim`. The default frequencies are computed to 50 digits (about
#: 80 us per pair: 3 s at this size, then cached) and tables take 8 bytes per pair and
#: position; rotary heads in use have 32 to 512 features.
MAX_HEAD_DIM = 1 << 16


class _HfConverters(Protocol):
    """What `install_hf_converters`' loader returns (`rope_ref._config.hf`)."""

    def spec_from_hf(
        self,
        config: object,
        *,
        layer_type: str | None = None,
        section_order: SectionOrder | Sequence[int] | None = None,
        strict: bool = False,
    ) -> RopeSpec: ...

    def spec_of_layer(
        self,
        config: object,
        layer: object,
        *,
        section_order: SectionOrder | Sequence[int] | None = None,
        strict: bool = False,
    ) -> RopeSpec: ...

    def specs_per_layer(
        self, config: object, *, strict: bool = False
    ) -> tuple[RopeSpec | None, ...]: ...

    def spec_to_hf(
        self, spec: RopeSpec, *, max_position_embeddings: int | None = None
    ) -> dict[str, Any]: ...


#: Loads the HF config converters. The package installs it on import
#: (`install_hf_converters`), so the core imports nothing of the layers above it.
_hf_converters: Callable[[], Any] | None = None


def install_hf_converters(loader: Callable[[], Any]) -> None:
    """Give `RopeSpec.from_hf` and `RopeSpec.to_hf` their implementation.

    `loader` returns an object with ``spec_from_hf`` and ``spec_to_hf``; it is called on
    each use (importing on first use keeps ``import rope_ref`` light).

    Examples
    --------
    >>> from rope_ref._core import spec
    >>> spec._hf_converters is not None  # installed by ``import rope_ref``
    True
    """
    global _hf_converters  # noqa: PLW0603 - the one hook of this module
    _hf_converters = loader


def _hf() -> _HfConverters:
    if _hf_converters is None:  # pragma: no cover - `import rope_ref` installs it
        msg = "the HF converters are not installed; import rope_ref first."
        raise RuntimeError(msg)
    return cast("_HfConverters", _hf_converters())


@runtime_checkable
class ScalingRule(Protocol):
    """What `RopeSpec.scaling` must provide (the classes of `rope_ref.scaling` do).

    A rule is a frozen, hashable value that rescales the default inverse frequencies and
    states the attention factor multiplied into cos and sin.
    """

    def inv_freq(
        self, inv_freq: NDArray[np.float64], *, base: float, rotary_dim: int, seq_len: float | None
    ) -> NDArray[np.float64]:
        """Return the scaled float64 inverse frequencies, shape ``(rotary_dim // 2,)``."""
        ...

    def attention_factor(self, *, seq_len: float | None) -> float:
        """Return the factor applied to cos and sin: finite and positive (1.0 for most rules)."""
        ...


@runtime_checkable
class XPosRule(Protocol):
    r"""What `RopeSpec.xpos` must provide.

    Queries are scaled by :math:`\zeta_j^{(p - c)/s}` and keys by its inverse, with
    :math:`\zeta_j` from `zeta`, the centre :math:`c` from `center` and :math:`s` =
    `scale_base`.
    """

    @property
    def scale_base(self) -> float:
        """Positions over which the scale changes by a factor of zeta (xPos's "scale_base")."""
        ...

    def zeta(self, rotary_dim: int) -> NDArray[np.float64]:
        """Return the per-pair decay bases, float64, shape ``(rotary_dim // 2,)``."""
        ...

    def center(self, seq_len: float) -> float:
        """Return the position at which the scale is 1."""
        ...


@dataclass(frozen=True)
class RopeSpec:
    r"""A rotary position embedding: which features rotate, how they pair, how fast.

    Frozen, hashable and validated at construction, so a spec that exists is valid.

    Parameters
    ----------
    head_dim : int
        Number of features per head (the last axis of ``x``), at most 65536
        (`MAX_HEAD_DIM`: see Limits in the API reference).
    rotary_dim : int, optional
        Number of rotated features; even, and ``rotary_start + rotary_dim <= head_dim``.
        Defaults to ``head_dim - rotary_start``.
    rotary_start : int, default 0
        First rotated feature. Features outside
        ``[rotary_start, rotary_start + rotary_dim)`` pass through bit-identical.
    base : float, default 10000.0
        Frequency base :math:`b > 1`; :math:`\theta_j = b^{-2j/d}` with :math:`d` =
        `rotary_dim`.
    layout : {"half", "interleaved"}, default "half"
        ``"half"`` rotates pairs ``(j, j + n_pairs)`` (GPT-NeoX, HF LLaMA, vLLM neox, MLX
        ``traditional=False``); ``"interleaved"`` rotates ``(2j, 2j + 1)`` (RoFormer, Meta
        LLaMA, GPT-J, MLX ``traditional=True``, rotary-embedding-torch). Offsets are relative
        to `rotary_start`.
    output_layout : {"half", "interleaved"}, optional
        The order in which the rotated pairs are written, when it differs from `layout`
        (the order they are read in). ``layout="interleaved", output_layout="half"`` reads
        pairs ``(2j, 2j + 1)`` and writes them to ``(j, j + n_pairs)`` (DeepSeek-V3 and
        Mistral 4 with ``rope_interleave=True``, Megatron's MLA). None (the default), or
        the value of `layout`, writes them where they were read.
    scaling : ScalingRule, optional
        A context-extension rule (see `rope_ref.scaling`); it rescales the inverse frequencies
        (the default ones, or `freqs` when given) and may set an attention factor.
    freqs : sequence of float, optional
        Custom inverse frequencies (radians per position), one per pair, finite and
        non-negative. `base` must then be left at its default, unless `scaling` is given:
        the rule takes `freqs` as its input and `base` feeds only what the rule computes
        from the base (YaRN's ramp ends, as ggml's ``freq_factors`` with YaRN).
    xpos : XPosRule, optional
        Length-extrapolatable decay (xPos); queries and keys are scaled oppositely.
    sections : sequence of int, optional
        Multi-axis RoPE (M-RoPE, axial vision RoPE): the number of pairs driven by each
        position axis; positive, summing to ``n_pairs``. Positions then carry a trailing axis
        of length ``len(sections)``. May be left out when `section_order` is a pair map:
        each axis's count is then read from the map.
    section_order : {"chunked", "interleaved"} or sequence of int, default "chunked"
        Which position axis each pair follows. ``"chunked"`` gives axis ``a`` a contiguous
        block of pairs (Qwen2-VL); ``"interleaved"`` gives pair ``j`` to axis
        ``j % n_axes`` while that axis has pairs left, the rest to axis 0 (Qwen3-VL). A
        sequence of ``n_pairs`` axis indices is the pair-to-axis map itself, for orders
        the two names do not cover (Ernie 4.5-VL's and Bailing's ``h, w, h, w, ..., t``,
        openPangu's, ggml's IMROPE with a fourth position): pair ``j`` follows axis
        ``section_order[j]``, and axis ``a`` has ``section_order.count(a)`` pairs (at least
        one each). A map equal to one of the two named orders is stored as that name, so
        specs that rotate alike compare equal. `pair_axes` gives any spec's map.

    Raises
    ------
    TypeError
        If a field has the wrong type (e.g. a float `head_dim`, or a scaling rule's class
        such as ``scaling=rope_ref.scaling.Linear`` instead of an instance).
    ValueError
        If a field has a bad value; the message names the field and the value received.

    Notes
    -----
    Pair :math:`j` rotates by the angle :math:`\phi = p\,\theta_j` at position :math:`p`:

    .. math::
        (a, b) \mapsto (a\cos\phi - b\sin\phi,\; b\cos\phi + a\sin\phi).

    Examples
    --------
    >>> import rope_ref as rr
    >>> spec = rr.RopeSpec(head_dim=128)
    >>> spec.rotary_dim, spec.n_pairs, spec.layout
    (128, 64, 'half')
    >>> rr.RopeSpec(head_dim=64, rotary_dim=32, layout="interleaved").rotary_stop
    32
    >>> rr.RopeSpec(head_dim=8, section_order=(1, 2, 0, 0)).sections  # pairs per axis
    (2, 1, 1)
    >>> rr.RopeSpec(head_dim=8, rotary_dim=7)
    Traceback (most recent call last):
    ...
    ValueError: `rotary_dim` must be even; got 7.
    """

    head_dim: int
    _: KW_ONLY
    rotary_dim: int | None = None
    rotary_start: int = 0
    base: float = 10000.0
    layout: Layout = "half"
    output_layout: Layout | None = None
    scaling: ScalingRule | None = None
    freqs: Sequence[float] | None = None
    xpos: XPosRule | None = None
    sections: Sequence[int] | None = None
    section_order: SectionOrder | Sequence[int] = "chunked"

    def __post_init__(self) -> None:
        head_dim = check_int("head_dim", self.head_dim, minimum=1)
        if head_dim > MAX_HEAD_DIM:
            msg = (
                f"`head_dim` must be at most {MAX_HEAD_DIM} (the limit of rope_ref: frequencies "
                f"are computed to 50 digits per pair and tables grow with it); got {head_dim}."
            )
            raise ValueError(msg)
        start = check_int("rotary_start", self.rotary_start, minimum=0)
        if start >= head_dim:
            msg = f"`rotary_start` must be less than `head_dim` ({head_dim}); got {start}."
            raise ValueError(msg)
        rotary_dim = _check_rotary_dim(self.rotary_dim, head_dim, start)
        base = check_real("base", self.base)
        if base <= 1.0:
            msg = f"`base` must be greater than 1; got {base!r}."
            raise ValueError(msg)
        self._set("head_dim", head_dim)
        self._set("rotary_start", start)
        self._set("rotary_dim", rotary_dim)
        self._set("base", base)
        self._set("layout", check_choice("layout", self.layout, LAYOUTS))
        if self.output_layout is not None:
            written = check_choice("output_layout", self.output_layout, LAYOUTS)
            self._set("output_layout", None if written == self.layout else written)
        self._set("freqs", _check_freqs(self.freqs, rotary_dim // 2))
        if self.freqs is not None and base != 10000.0 and self.scaling is None:
            msg = (
                "`freqs` replaces `base`; leave it at its default (a `scaling` rule given "
                f"with `freqs` may read it); got base={base!r}."
            )
            raise ValueError(msg)
        _check_scaling(self.scaling, rotary_dim)
        _check_xpos(self.xpos)
        sections, order = check_multi_axis(self.sections, self.section_order, rotary_dim // 2)
        self._set("sections", sections)
        self._set("section_order", order)

    def _set(self, name: str, value: object) -> None:
        object.__setattr__(self, name, value)

    @classmethod
    def from_hf(
        cls,
        config: object,
        *,
        layer_type: str | None = None,
        layer: int | None = None,
        section_order: SectionOrder | Sequence[int] | None = None,
        strict: bool = False,
    ) -> RopeSpec:
        """The spec of a Hugging Face transformers config (a config.json dict or object).

        How the model applies RoPE comes from its ``model_type``: a table records, for each
        transformers model family, the pair layout (``rotate_half`` or pairs
        ``(2j, 2j + 1)``), interleaved pairs written in half order (``rope_interleave``),
        head-size and legacy keys, and M-RoPE defaults, with the transformers code each entry
        was read from (``rope_ref._config.families``).

        Reads the current ``rope_parameters`` format and the legacy ``rope_theta`` +
        ``rope_scaling`` one; ``head_dim`` (else ``hidden_size // num_attention_heads``),
        ``partial_rotary_factor``, ``max_position_embeddings``,
        ``original_max_position_embeddings`` and ``mrope_section`` (Qwen-VL model types
        without one get their HF rotary module's default). Nested VL configs are read
        from their ``text_config``; ``rope_type="axial"`` (Qwen-VL vision towers) gives
        the axial spec of `rope_ref.axial_freqs`.

        Parameters
        ----------
        config : mapping, transformers.PretrainedConfig, str or os.PathLike
            The model configuration, or the path of its config.json (or of a model
            directory holding one; a regular file of at most 16 MiB).
        layer_type : str, optional
            For configs with one RoPE per layer type (Gemma 3/4): which one, e.g.
            ``"full_attention"``.
        layer : int, optional
            The spec of this layer (counted from 0), as `from_hf_layers` gives it: its
            layer type from the config's ``layer_types``, and a ValueError for a layer
            without RoPE (Llama 4's and SmolLM3's ``no_rope_layers``). Not with
            `layer_type`.
        section_order : {"chunked", "interleaved"} or sequence of int, optional
            M-RoPE pair assignment (a name or a pair-to-axis map, as for `RopeSpec`). By
            default ``"interleaved"`` for Qwen3-VL configs (or an ``mrope_interleaved``
            flag), the family's map where it has one (Ernie 4.5-VL, vLLM's
            ``rope_type="openpangu"``), and ``"chunked"`` otherwise (Qwen2/2.5-VL).
        strict : bool, default False
            An unknown key in the RoPE parameters (or a config key naming RoPE that from_hf
            does not know) is a ValueError rather than a UserWarning; both name the key and
            the nearest known one.

        Returns
        -------
        RopeSpec
            The family's layout (HF's ``rotate_half`` unless the table says otherwise),
            rotating the first ``rotary_dim`` features.

        Raises
        ------
        TypeError
            If a config value has the wrong type (a string for a number, a float for an
            integer key, a number for a flag); the message names the key and where it was
            read, e.g. ``config.rope_parameters``.
        ValueError
            If the config describes no RoPE (ALiBi: MPT, Bloom, Falcon with ``alibi``) or
            a rotation no spec states (the message says why), a config value is out of
            range (``rope_theta <= 1``, a fractional or zero
            integer, NaN), the config has no usable head size, an unknown ``rope_type``, an
            odd rotary dimension, or parameters the scaling rule rejects; or if a path
            names no config.json, or one that is not a regular file of at most 16 MiB
            holding a JSON object (the message names the path). A missing or None value
            takes its default; 0, ``""`` and False are values, never "absent".

        See Also
        --------
        to_hf : the inverse.

        Examples
        --------
        >>> import rope_ref as rr
        >>> config = {"hidden_size": 4096, "num_attention_heads": 32,
        ...           "max_position_embeddings": 131072,
        ...           "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0,
        ...                               "factor": 8.0, "low_freq_factor": 1.0,
        ...                               "high_freq_factor": 4.0,
        ...                               "original_max_position_embeddings": 8192}}
        >>> spec = rr.RopeSpec.from_hf(config)
        >>> spec.head_dim, spec.base, spec.scaling
        (128, 500000.0, Llama3(factor=8.0, original_max_position=8192, low_freq_factor=1.0, \
high_freq_factor=4.0))
        >>> smollm3 = {"model_type": "smollm3", "head_dim": 64, "num_hidden_layers": 4,
        ...            "no_rope_layers": [1, 1, 1, 0]}  # layer 3 applies no RoPE
        >>> rr.RopeSpec.from_hf(smollm3, layer=0).rotary_dim
        64
        """
        if layer is not None:
            if layer_type is not None:
                msg = (
                    "give `layer` or `layer_type`, not both (a layer's type comes from the "
                    f"config's layer_types); got layer={layer!r}, layer_type={layer_type!r}."
                )
                raise ValueError(msg)
            return _hf().spec_of_layer(config, layer, section_order=section_order, strict=strict)
        return _hf().spec_from_hf(
            config, layer_type=layer_type, section_order=section_order, strict=strict
        )

    @classmethod
    def from_hf_layers(cls, config: object, *, strict: bool = False) -> tuple[RopeSpec | None, ...]:
        """The spec of each layer of a Hugging Face config; None for a layer without RoPE.

        Layers follow ``layer_types`` (one RoPE per type, as `from_hf` with `layer_type`)
        and the family's per-layer flags (Llama 4's and SmolLM3's ``no_rope_layers``: 0
        marks a layer without RoPE; absent, every ``no_rope_layer_interval``-th layer).

        Parameters
        ----------
        config : mapping, transformers.PretrainedConfig, str or os.PathLike
            The model configuration (or a path, as for `from_hf`); it gives
            ``num_hidden_layers`` or ``layer_types``.
        strict : bool, default False
            As for `from_hf`.

        Returns
        -------
        tuple of (RopeSpec or None)
            One entry per layer.

        Raises
        ------
        ValueError
            As `from_hf`; also when the config gives no layer count, or per-layer flags
            that are not a list of 0/1 of one entry per layer.

        Examples
        --------
        >>> import rope_ref as rr
        >>> config = {"model_type": "smollm3", "head_dim": 64, "num_hidden_layers": 4,
        ...           "no_rope_layers": [1, 1, 1, 0]}
        >>> [spec is not None for spec in rr.RopeSpec.from_hf_layers(config)]
        [True, True, True, False]
        """
        return _hf().specs_per_layer(config, strict=strict)

    def to_hf(self, *, max_position_embeddings: int | None = None) -> dict[str, object]:
        """Hugging Face config.json entries of this spec (current ``rope_parameters`` format).

        Parameters
        ----------
        max_position_embeddings : int, optional
            Written when given; a `rope_ref.scaling.DynamicNTK` rule writes its own.

        Returns
        -------
        dict
            ``head_dim``, ``rope_parameters`` (``rope_type``, ``rope_theta``, the rule's
            parameters, ``partial_rotary_factor`` when ``rotary_dim < head_dim``,
            ``mrope_section``), ``rope_interleave`` for interleaved pairs written in half
            order, and, when known, ``max_position_embeddings``.

        Raises
        ------
        TypeError
            If `max_position_embeddings` is not an integer (bool and strings included).
        ValueError
            If `max_position_embeddings` is fractional or not from 1 to 2**53, or HF cannot
            express the spec: the interleaved layout (unless written in half order),
            ``rotary_start != 0``, custom `freqs`,
            xPos, interleaved sections other than Qwen3-VL's three, a pair-to-axis map other
            than vLLM's openPangu and Bailing orders (written as their ``rope_type``), a
            rule with no HF type
            (`rope_ref.scaling.NTKAware`), or a fractional length that HF stores as an
            integer (``original_max_position``, `DynamicNTK`'s ``max_position``). What it
            returns, `from_hf` reads back.

        Examples
        --------
        >>> import rope_ref as rr
        >>> spec = rr.RopeSpec(head_dim=64, scaling=rr.scaling.Linear(2.0))
        >>> spec.to_hf()
        {'head_dim': 64, 'rope_parameters': {'rope_type': 'linear', 'rope_theta': 10000.0, \
'factor': 2.0}}
        >>> rr.RopeSpec.from_hf(spec.to_hf()) == spec
        True
        """
        return _hf().spec_to_hf(self, max_position_embeddings=max_position_embeddings)

    @property
    def written_layout(self) -> Layout:
        """The layout the rotated pairs are written in: `output_layout`, else `layout`."""
        return self.output_layout or self.layout

    @property
    def n_pairs(self) -> int:
        """Number of rotated pairs, ``rotary_dim // 2``."""
        return self._rotary_dim // 2

    @property
    def _rotary_dim(self) -> int:
        """`rotary_dim` as an int: it is resolved at construction, so never None."""
        return int(self.rotary_dim or 0)

    @property
    def rotary_stop(self) -> int:
        """One past the last rotated feature, ``rotary_start + rotary_dim``."""
        return self.rotary_start + self._rotary_dim

    @property
    def n_axes(self) -> int:
        """Number of position axes: ``len(sections)``, or 1 for ordinary RoPE."""
        return 1 if self.sections is None else len(self.sections)

    @property
    def position_axes(self) -> int | None:
        """Length of the trailing axis of positions: ``len(sections)``, or None (no axis)."""
        return None if self.sections is None else len(self.sections)


def check_spec(spec: object) -> RopeSpec:
    """Return `spec` if it is a RopeSpec, else raise TypeError naming it."""
    if not isinstance(spec, RopeSpec):
        msg = f"`spec` must be a RopeSpec; got {type(spec).__name__}."
        raise TypeError(msg)
    return spec


def _check_rotary_dim(value: object, head_dim: int, start: int) -> int:
    if value is None:
        rotary_dim = head_dim - start
        if rotary_dim % 2:
            msg = (
                f"`rotary_dim` must be even; got {rotary_dim} "
                f"(the default, head_dim - rotary_start = {head_dim} - {start})."
            )
            raise ValueError(msg)
        return rotary_dim
    rotary_dim = check_int("rotary_dim", value, minimum=2)
    if rotary_dim % 2:
        msg = f"`rotary_dim` must be even; got {rotary_dim}."
        raise ValueError(msg)
    if start + rotary_dim > head_dim:
        msg = (
            f"`rotary_dim` must not exceed head_dim - rotary_start ({head_dim - start}); "
            f"got {rotary_dim}."
        )
        raise ValueError(msg)
    return rotary_dim


def _check_freqs(value: object, n_pairs: int) -> tuple[float, ...] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence | np.ndarray):
        msg = f"`freqs` must be a sequence of {n_pairs} real numbers; got {value!r}."
        raise TypeError(msg)
    freqs = tuple(check_real("freqs", f) for f in np.asarray(value, dtype=object).ravel())
    if np.ndim(value) != 1 or len(freqs) != n_pairs:
        msg = f"`freqs` must have one entry per pair ({n_pairs}); got shape {np.shape(value)}."
        raise ValueError(msg)
    if any(f < 0.0 for f in freqs):
        msg = f"`freqs` must be non-negative; got {min(freqs)!r}."
        raise ValueError(msg)
    return freqs


def _check_scaling(value: object, rotary_dim: int) -> None:
    if value is None:
        return
    if isinstance(value, type):  # the class passes the Protocol check: its methods exist
        msg = (
            "`scaling` must be an instance of a scaling rule (e.g. rope_ref.scaling.Linear(2.0)); "
            f"got the class {value.__name__}."
        )
        raise TypeError(msg)
    if not isinstance(value, ScalingRule):
        msg = (
            "`scaling` must be a scaling rule with inv_freq() and attention_factor() "
            f"(see rope_ref.scaling); got {value!r}."
        )
        raise TypeError(msg)
    _check_hashable("scaling", value)
    check = getattr(value, "check_rotary_dim", None)
    if callable(check):  # optional: rules whose parameters depend on rotary_dim (LongRoPE)
        check(rotary_dim)


def _check_xpos(value: object) -> None:
    if value is None:
        return
    if isinstance(value, type):  # the class passes the Protocol check, as for `scaling`
        msg = (
            "`xpos` must be an instance of an xPos rule (e.g. rope_ref.XPos()); "
            f"got the class {value.__name__}."
        )
        raise TypeError(msg)
    if not isinstance(value, XPosRule):
        msg = f"`xpos` must be an xPos rule with scale_base, zeta() and center(); got {value!r}."
        raise TypeError(msg)
    scale_base = check_real("xpos.scale_base", value.scale_base)
    if scale_base <= 0.0:
        msg = f"`xpos.scale_base` must be positive; got {scale_base!r}."
        raise ValueError(msg)
    _check_hashable("xpos", value)


def _check_hashable(name: str, value: object) -> None:
    try:
        hash(value)
    except TypeError:
        msg = f"`{name}` must be hashable (a frozen value); got {type(value).__name__}."
        raise TypeError(msg) from None


def check_multi_axis(
    sections: object, order: object, n_pairs: int
) -> tuple[tuple[int, ...] | None, SectionOrder | tuple[int, ...]]:
    """`sections` and `section_order` checked together: (sections, order) as stored.

    A pair map equal to a named order is returned as that name; `sections` left out next to
    a pair map are the map's counts.

    Examples
    --------
    >>> check_multi_axis(None, (1, 2, 1, 2, 0, 0), 6)
    ((2, 2, 2), (1, 2, 1, 2, 0, 0))
    >>> check_multi_axis((2, 2), (0, 0, 1, 1), 4)
    ((2, 2), 'chunked')
    """
    if isinstance(order, str) or order is None:
        named = check_choice("section_order", order, SECTION_ORDERS)
        return _check_sections(sections, n_pairs, named), named
    axes = _check_pair_map(order, n_pairs)
    counts = tuple(axes.count(a) for a in range(max(axes) + 1))
    if 0 in counts:
        msg = (
            f"`section_order` must give every axis from 0 to {len(counts) - 1} at least one "
            f"pair; axis {counts.index(0)} follows none in {axes}."
        )
        raise ValueError(msg)
    given = counts if sections is None else _check_sections(sections, n_pairs, "chunked")
    if given != counts:
        msg = (
            f"`sections` must count the pairs of each axis of `section_order` ({counts}), or "
            f"be left out; got {given}."
        )
        raise ValueError(msg)
    for named in SECTION_ORDERS:
        if _fits(counts, n_pairs, named) and named_axes(counts, n_pairs, named) == axes:
            return counts, named
    return counts, axes


def named_axes(sections: tuple[int, ...], n_pairs: int, order: SectionOrder) -> tuple[int, ...]:
    """The pair-to-axis map of a named order (``"chunked"``, ``"interleaved"``)."""
    if order == "chunked":
        return tuple(a for a, size in enumerate(sections) for _ in range(size))
    axes = [0] * n_pairs
    n_axes = len(sections)
    for axis, size in enumerate(sections[1:], start=1):
        for j in range(axis, n_axes * size, n_axes):
            axes[j] = axis
    return tuple(axes)


def _fits(sections: tuple[int, ...], n_pairs: int, order: str) -> bool:
    """Whether the interleaved order can hold `sections` (the chunked one always can)."""
    n_axes = len(sections)
    return order == "chunked" or all(
        axis + n_axes * (size - 1) < n_pairs for axis, size in enumerate(sections[1:], start=1)
    )


def _check_pair_map(value: object, n_pairs: int) -> tuple[int, ...]:
    if not isinstance(value, Sequence | np.ndarray) or np.ndim(value) != 1:
        msg = (
            "`section_order` must be 'chunked', 'interleaved' or a sequence of axis indices, "
            f"one per pair; got {value!r}."
        )
        raise TypeError(msg)
    axes = tuple(check_int("section_order", a, minimum=0) for a in value)
    if len(axes) != n_pairs:
        msg = (
            f"`section_order` must name the axis of each of the {n_pairs} pairs "
            f"(rotary_dim // 2); got {len(axes)} entries."
        )
        raise ValueError(msg)
    return axes


def _check_sections(value: object, n_pairs: int, order: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence | np.ndarray):
        msg = f"`sections` must be a sequence of positive integers; got {value!r}."
        raise TypeError(msg)
    sections = tuple(check_int("sections", s, minimum=1) for s in value)
    if not sections:
        msg = "`sections` must name at least one axis; got ()."
        raise ValueError(msg)
    if sum(sections) != n_pairs:
        msg = (
            f"`sections` must sum to n_pairs = rotary_dim // 2 ({n_pairs}); "
            f"got {sections} (sum {sum(sections)})."
        )
        raise ValueError(msg)
    n_axes = len(sections)
    for axis, size in enumerate(sections[1:], start=1):
        last = axis + n_axes * (size - 1)
        if order == "interleaved" and last >= n_pairs:
            msg = (
                f"`sections` must fit the interleaved order: axis {axis} with {size} pairs "
                f"needs pair index {last}, but there are {n_pairs} pairs; got {sections}."
            )
            raise ValueError(msg)
    return sections
