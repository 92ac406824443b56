# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Scaled rotary angles: the speeds ``theta_i`` of a model trained on short texts,
stretched so that it reads longer ones, and partial rotary.

Shapes: ``d_h`` one head's width, ``d_rot = int(d_h * partial_rotary_factor)`` the
dimensions that turn (even), ``d_rot / 2`` pairs, one speed each.

Plain RoPE turns pair ``i`` by ``m * theta_i`` at position ``m``, with
``theta_i = base ** (-2 i / d_rot)``. Its wavelength ``2 pi / theta_i`` is the number of
positions one full turn takes. A model trained on ``L`` tokens (``L`` is
``original_max_position_embeddings``) has seen every angle of the pairs whose
wavelength is shorter than ``L``, and only part of a turn of the slower ones. Each
``rope_type`` divides some speeds by ``factor``, so that ``factor * L`` positions turn
the slow pairs no further than ``L`` did in training:

- ``linear`` (position interpolation; Gemma 3's full layers): every speed / ``factor``.
- ``llama3`` (Llama 3.1 and later): pairs with wavelength ``> L / low_freq_factor``
  are divided by ``factor``, those ``< L / high_freq_factor`` are kept, and the ones
  between blend the two smoothly.
- ``yarn`` (gpt-oss, DeepSeek-V3, long-context Qwen): the same idea with the bounds
  set in turns per ``L`` (``beta_fast``, ``beta_slow``), and an ``attention_factor``
  on the tables, ``0.1 ln(factor) + 1`` by default: every score, at every position,
  times its square (1.81 for gpt-oss). With ``mscale`` and ``mscale_all_dim``, their
  two factors' ratio (1.0 for DeepSeek-V3, whose scale takes the correction).

``proportional`` (Gemma 4's global layers) is partial rotary of another kind: the
first ``int(partial_rotary_factor * d_h // 2)`` pairs of the whole head keep the
speeds they would have in a fully turned head, ``base ** (-2 i / d_h)``, and the other
pairs get speed 0, so they never turn. Its table covers the whole head (``d_h / 2``
speeds, pairs ``(i, i + d_h / 2)``), where ``partial_rotary_factor`` elsewhere turns
only the first ``d_rot`` dimensions, as a head of their own.

``rope_frequencies`` returns ``(inv_freq, attention_factor)`` for
``rope.RotaryEmbedding``, equal to transformers' ``ROPE_INIT_FUNCTIONS`` (tested).

Needs only torch. MIT licence: keep the first two lines of each file.
"""

from __future__ import annotations

import math
import numbers

import torch

# rope_type -> (required parameters, optional parameters with their defaults)
ROPE_PARAMETERS = {
    "default": ((), {}),
    "linear": (("factor",), {}),
    "llama3": (
        ("factor", "low_freq_factor", "high_freq_factor",
         "original_max_position_embeddings"),
        {},
    ),
    "yarn": (
        ("factor", "original_max_position_embeddings"),
        dict(beta_fast=32.0, beta_slow=1.0, truncate=True, attention_factor=None,
             mscale=None, mscale_all_dim=None),
    ),
    "proportional": ((), dict(factor=1.0)),
}


def _check_positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")


def rotary_dim(head_dim: int, partial_rotary_factor: float = 1.0) -> int:
    """``d_rot = int(d_h * partial_rotary_factor)``: the dimensions that turn."""
    if isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim < 2:
        raise ValueError(f"head_dim must be an int >= 2, got {head_dim!r}")
    _check_positive("partial_rotary_factor", partial_rotary_factor)
    if partial_rotary_factor > 1:
        raise ValueError(
            f"partial_rotary_factor must be in (0, 1], got {partial_rotary_factor}"
        )
    dim = int(head_dim * partial_rotary_factor)  # truncated, as transformers does
    if dim < 2 or dim % 2 != 0:
        raise ValueError(
            "head_dim * partial_rotary_factor must leave an even number >= 2 of "
            f"dimensions to turn, got int({head_dim} * {partial_rotary_factor}) = {dim}"
        )
    return dim


# --8<-- [start:llama3]
def llama3_frequencies(
    inv_freq: torch.Tensor,
    factor: float,
    low_freq_factor: float,
    high_freq_factor: float,
    original_max_position_embeddings: int,
) -> torch.Tensor:
    """Llama 3.1's stretch: slow pairs / ``factor``, fast pairs kept, a blend between.
    ``inv_freq`` ``(d_rot / 2,)`` in, the same shape out."""
    length = original_max_position_embeddings  # L, the training length
    wavelength = 2 * math.pi / inv_freq  # (d_rot / 2,): positions per full turn
    slow = wavelength > length / low_freq_factor  # never a full turn in training
    fast = wavelength < length / high_freq_factor  # many turns in training
    # 0 at the slow bound, 1 at the fast bound: how much of the original speed to keep
    span = high_freq_factor - low_freq_factor  # 0: the bounds meet, nothing to blend
    keep = (length / wavelength - low_freq_factor) / span if span else 1.0
    blended = (1 - keep) * inv_freq / factor + keep * inv_freq  # (d_rot / 2,)
    scaled = torch.where(slow, inv_freq / factor, blended)  # (d_rot / 2,)
    return torch.where(fast, inv_freq, scaled)  # (d_rot / 2,)
# --8<-- [end:llama3]


def yarn_attention_factor(factor: float, mscale: float = 1.0) -> float:
    """``0.1 * mscale * ln(factor) + 1`` (1 when ``factor <= 1``)."""
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


# --8<-- [start:proportional]
def proportional_frequencies(
    head_dim: int, base: float, partial_rotary_factor: float, factor: float = 1.0
) -> torch.Tensor:
    """Gemma 4's speeds: the first ``int(partial_rotary_factor * d_h // 2)`` pairs turn
    at ``base ** (-2 i / d_h)`` (the whole head's exponents), the rest at speed 0;
    all divided by ``factor``. Returns ``(d_h / 2,)``."""
    turning = int(partial_rotary_factor * head_dim // 2)  # pairs that turn
    pair = torch.arange(0, 2 * turning, 2, dtype=torch.float32)  # (turning,): 2i
    speeds = 1.0 / (base ** (pair / head_dim))  # (turning,): a full head's speeds
    still = torch.zeros(head_dim // 2 - turning)  # (d_h / 2 - turning,): never turn
    return torch.cat((speeds, still)) / factor  # (d_h / 2,)
# --8<-- [end:proportional]


# --8<-- [start:yarn]
def yarn_frequencies(
    inv_freq: torch.Tensor,
    base: float,
    factor: float,
    original_max_position_embeddings: int,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
    truncate: bool = True,
) -> torch.Tensor:
    """YaRN's stretch: pairs that turn more than ``beta_fast`` times in ``L``
    positions are kept, those that turn fewer than ``beta_slow`` times are divided by
    ``factor``, with a linear ramp between. ``(d_rot / 2,)`` in and out."""
    num_pairs = inv_freq.numel()  # d_rot / 2
    dim = 2 * num_pairs  # d_rot

    def pair_turning(turns: float) -> float:  # the pair that turns `turns` times in L
        length = original_max_position_embeddings
        return dim * math.log(length / (turns * 2 * math.pi)) / (2 * math.log(base))

    low, high = pair_turning(beta_fast), pair_turning(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # a ramp of width zero would divide by zero
    ramp = (torch.arange(num_pairs, dtype=torch.float32) - low) / (high - low)
    keep = 1 - ramp.clamp(0, 1).to(inv_freq.device)  # (d_rot / 2,): 1 = original speed
    return inv_freq / factor * (1 - keep) + inv_freq * keep  # (d_rot / 2,)
# --8<-- [end:yarn]


def rope_frequencies(
    head_dim: int,
    base: float = 10000.0,
    *,
    rope_type: str = "default",
    partial_rotary_factor: float = 1.0,
    **parameters: float | int | bool | None,
) -> tuple[torch.Tensor, float]:
    """The speeds of ``rope_type`` and the factor the tables are multiplied by.

    Args:
        head_dim: ``d_h``.
        base: ``rope_theta``.
        rope_type: ``"default"``, ``"linear"``, ``"llama3"``, ``"yarn"`` or
            ``"proportional"``.
        partial_rotary_factor: the fraction of each head that turns (Qwen3-Next: 0.25;
            with ``"proportional"``, Gemma 4's global layers: 0.25 of the pairs).
        parameters: the type's own, as in a config's ``rope_parameters``:
            ``factor``; ``low_freq_factor``, ``high_freq_factor`` and
            ``original_max_position_embeddings`` (llama3); ``beta_fast``, ``beta_slow``,
            ``truncate``, ``attention_factor``, ``mscale``, ``mscale_all_dim`` (yarn).

    Returns:
        ``inv_freq`` ``(d_rot / 2,)`` float32 (``(d_h / 2,)`` for ``"proportional"``,
        zeros for the pairs that do not turn) and ``attention_factor`` (1.0 but for
        yarn).

    Raises:
        ValueError: a rope type or a parameter this module does not implement, a
            missing parameter, or a value out of range; never a different rotation.
    """
    if rope_type not in ROPE_PARAMETERS:
        raise ValueError(
            f"rope_type {rope_type!r} is not implemented; expected one of "
            f"{', '.join(map(repr, ROPE_PARAMETERS))}"
        )
    required, optional = ROPE_PARAMETERS[rope_type]
    unknown = sorted(set(parameters) - set(required) - set(optional))
    if unknown:
        raise ValueError(
            f"rope_type {rope_type!r} has no parameter {', '.join(unknown)}; it takes "
            f"{', '.join((*required, *optional)) or 'none'}"
        )
    missing = [name for name in required if parameters.get(name) is None]
    if missing:
        raise ValueError(f"rope_type {rope_type!r} needs {', '.join(missing)}")
    if isinstance(base, bool) or not isinstance(base, numbers.Real) or base <= 1:
        raise ValueError(f"base must be a number greater than 1, got {base!r}")
    p = {**optional, **parameters}
    for name in required:
        _check_positive(name, p[name])
    if rope_type == "proportional":  # the whole head's table, some pairs standing still
        _check_positive("factor", p["factor"])
        rotary_dim(head_dim)  # head_dim must be an even int >= 2
        _check_positive("partial_rotary_factor", partial_rotary_factor)
        if partial_rotary_factor > 1:
            raise ValueError(
                f"partial_rotary_factor must be in (0, 1], got {partial_rotary_factor}"
            )
        return proportional_frequencies(
            head_dim, base, partial_rotary_factor, p["factor"]
        ), 1.0
    dim = rotary_dim(head_dim, partial_rotary_factor)  # d_rot
    pair = torch.arange(0, dim, 2, dtype=torch.float32)  # (d_rot / 2,): 2i
    inv_freq = 1.0 / (base ** (pair / dim))  # (d_rot / 2,): theta_i
    if rope_type == "linear":
        return inv_freq / p["factor"], 1.0
    if rope_type == "llama3":
        if p["high_freq_factor"] < p["low_freq_factor"]:
            raise ValueError(
                "high_freq_factor must be at least low_freq_factor, got "
                f"{p['high_freq_factor']} and {p['low_freq_factor']}"
            )
        return llama3_frequencies(inv_freq, **p), 1.0
    if rope_type == "yarn":
        factor = p["factor"]
        attention_factor = p["attention_factor"]
        if attention_factor is None and p["mscale"] and p["mscale_all_dim"]:
            attention_factor = yarn_attention_factor(factor, p["mscale"]) / (
                yarn_attention_factor(factor, p["mscale_all_dim"])
            )
        elif attention_factor is None:
            attention_factor = yarn_attention_factor(factor)
        inv_freq = yarn_frequencies(
            inv_freq, base, factor, p["original_max_position_embeddings"],
            p["beta_fast"] or 32.0, p["beta_slow"] or 1.0, p["truncate"],
        )
        return inv_freq, float(attention_factor)
    return inv_freq, 1.0
