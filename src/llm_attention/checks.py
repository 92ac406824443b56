# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""The argument and input checks that the attention modules share.

Each raises a ``TypeError`` or ``ValueError`` that names the argument, the value given
and what was expected, before any tensor work. They use ``raise``, never ``assert``, so
they hold under ``python -O`` too.

Shapes: ``B`` batch, ``T`` tokens, ``d_in`` input width.

Needs torch and the standard library only. MIT licence: copy freely, and keep the
first two lines.
"""

from __future__ import annotations

import numbers

import torch


def check_size(name: str, value: object) -> None:
    """A layer size must be a positive int (``True`` is an int, but not a size)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{name} must be a positive int, got {value!r} ({type(value).__name__})"
        )
    if value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value}")


def check_dropout(value: object) -> None:
    """A dropout rate must be a real number in ``[0, 1)``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"dropout must be a float in [0, 1), got {value!r} ({type(value).__name__})"
        )
    if not 0.0 <= value < 1.0:
        raise ValueError(f"dropout must be a float in [0, 1), got {value}")


def check_flag(name: str, value: object) -> None:
    """A switch must be ``True`` or ``False``, not merely truthy."""
    if not isinstance(value, bool):
        raise TypeError(
            f"{name} must be True or False, got {value!r} ({type(value).__name__})"
        )


def check_attention_arguments(
    d_in, d_out, context_length, dropout, num_heads, qkv_bias, causal, fast_path
) -> None:
    """The constructor arguments of a multi-head attention layer."""
    for name, value in (
        ("d_in", d_in),
        ("d_out", d_out),
        ("context_length", context_length),
        ("num_heads", num_heads),
    ):
        check_size(name, value)
    if d_out % num_heads != 0:
        raise ValueError(
            "num_heads must divide d_out so that every head gets d_out // num_heads "
            f"dimensions, got d_out={d_out}, num_heads={num_heads}"
        )
    check_dropout(dropout)
    flags = (("qkv_bias", qkv_bias), ("causal", causal), ("fast_path", fast_path))
    for name, value in flags:
        check_flag(name, value)


def check_inputs(
    x: object,
    padding_mask: object,
    d_in: int,
    context_length: int,
    weight: torch.Tensor,
) -> None:
    """``x`` must be a float ``(B, T, d_in)`` tensor with ``1 <= T <= context_length``,
    in ``weight``'s dtype and on its device; ``padding_mask`` None or a bool ``(B, T)``
    tensor on the same device (True = real token, False = padding)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            f"x must be a torch.Tensor of shape (B, T, d_in={d_in}), "
            f"got {type(x).__name__}"
        )
    if not x.is_floating_point():
        raise TypeError(f"x must hold floating-point numbers, got dtype {x.dtype}")
    if x.dim() != 3:
        hint = ""
        if x.dim() == 2:
            hint = " (one sequence? add a batch dimension: x.unsqueeze(0))"
        raise ValueError(
            f"x must have shape (B, T, d_in={d_in}) (3 dimensions), "
            f"got shape {tuple(x.shape)}{hint}"
        )
    batch, num_tokens, width = x.shape
    if width != d_in:
        raise ValueError(
            f"x must have last dimension d_in={d_in}, got shape {tuple(x.shape)}"
        )
    if batch == 0 or num_tokens == 0:
        raise ValueError(
            "x must have at least one sequence and one token, "
            f"got shape {tuple(x.shape)}"
        )
    if num_tokens > context_length:
        raise ValueError(
            f"x has {num_tokens} tokens, more than context_length={context_length}"
        )
    if x.dtype != weight.dtype:
        raise TypeError(
            f"x must have the module's dtype {weight.dtype}, got dtype {x.dtype} "
            "(use module.to(x.dtype))"
        )
    if x.device != weight.device:
        raise ValueError(
            f"x must be on the module's device {weight.device}, got device {x.device}"
        )
    if padding_mask is None:
        return
    if not isinstance(padding_mask, torch.Tensor):
        raise TypeError(
            "padding_mask must be a bool torch.Tensor of shape (B, T) or None, "
            f"got {type(padding_mask).__name__}"
        )
    if padding_mask.dtype != torch.bool:
        raise TypeError(
            "padding_mask must have dtype torch.bool (True = real token, "
            f"False = padding), got dtype {padding_mask.dtype}"
        )
    if tuple(padding_mask.shape) != (batch, num_tokens):
        raise ValueError(
            f"padding_mask must have shape (B, T) = {(batch, num_tokens)} to match x, "
            f"got shape {tuple(padding_mask.shape)}"
        )
    if padding_mask.device != x.device:
        raise ValueError(
            f"padding_mask must be on x's device {x.device}, "
            f"got device {padding_mask.device}"
        )


def rows_here(linear: torch.nn.Module) -> int:
    """The output features ``linear`` computes in this process: all of its rows or, when
    tensor parallelism split them over processes (``parallelize_module`` with
    ``ColwiseParallel``, whose weight is then a DTensor), this process's share."""
    weight = linear.weight
    return (weight.to_local() if hasattr(weight, "to_local") else weight).shape[0]


def held_heads(
    per_head: torch.Tensor, linear: torch.nn.Module, count: int
) -> torch.Tensor:
    """The entries of ``per_head`` ``(H, ...)``, one per head, for the ``count`` heads
    this process computes: all of them in one process; under tensor parallelism, where
    ``linear``'s rows were split by ``ColwiseParallel`` (process ``r`` holds the
    ``r``-th block of heads), this process's block. ``per_head`` is kept whole in every
    process, so each process's gradient covers its block: sum them across processes."""
    if per_head.shape[0] == count:
        return per_head  # (count, ...)
    place = linear.weight.device_mesh.get_local_rank()  # this process's block
    return per_head[place * count : (place + 1) * count]  # (count, ...)


def heads_here(
    num_heads: int, num_kv_heads: int, query_rows: int, key_rows: int, head_dim: int,
    query_width: int | None = None,
) -> tuple[int, int]:
    """``(H, H_kv)``: the query and key/value heads this process computes, from the rows
    of its query and key projections (``rows_here``); all of them in one process.

    ``query_width`` is the rows per query head (``head_dim``, or more when the query
    projection carries gates too). Raises ``ValueError`` unless the processes share out
    whole heads and each key/value head comes with its ``num_heads // num_kv_heads``
    query heads: the number of processes must divide ``num_kv_heads``.
    """
    query_width = query_width or head_dim
    heads, kv_heads = query_rows // query_width, key_rows // head_dim
    group = num_heads // num_kv_heads
    if query_rows % query_width or key_rows % head_dim or kv_heads == 0 or (
        heads != kv_heads * group
    ):
        raise ValueError(
            f"this process holds {query_rows} query rows and {key_rows} key rows: "
            f"expected whole heads ({query_width} query rows, {head_dim} key rows "
            f"each), {group} query heads per key/value head; the processes must "
            f"split num_kv_heads={num_kv_heads} evenly (and num_heads={num_heads} "
            "with them)"
        )
    return heads, kv_heads
