# Copyright (c) 2026 llm-attention contributors. MIT licence: see LICENSE.
"""A key/value cache for generating one token at a time.

When a model generates, every new token attends to all the tokens before it. Their
keys and values do not change, so instead of projecting the whole sequence again at
each step, an attention layer keeps them here and projects only the new token.

Shape legend: ``B`` batch, ``H_kv`` key/value heads (``H`` in multi-head attention),
``T_max`` the most tokens the cache holds (the model's ``context_length``), ``T_new``
the tokens added in one call, ``d_h`` the width of one head.

Needs only torch. MIT licence: keep the first two lines of each file.
"""

from __future__ import annotations

import torch


def _check_size(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")


def kv_cache_bytes(
    *,
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    num_tokens: int,
    batch_size: int = 1,
    bytes_per_value: int = 2,
) -> int:
    r"""Memory that cached keys and values take, in bytes.

    $$2 \times L \times B \times T \times H_{kv} \times d_h
        \times \text{bytes per value}$$

    The 2 counts keys and values. ``bytes_per_value`` is 2 for float16 and bfloat16,
    4 for float32.
    """
    sizes = {
        "num_layers": num_layers,
        "num_kv_heads": num_kv_heads,
        "head_dim": head_dim,
        "num_tokens": num_tokens,
        "batch_size": batch_size,
        "bytes_per_value": bytes_per_value,
    }
    for name, value in sizes.items():
        _check_size(name, value)
    return (
        2 * num_layers * batch_size * num_tokens * num_kv_heads * head_dim
        * bytes_per_value
    )


class KVCache:
    """Keys and values of one attention layer, preallocated for ``context_length``.

    ``append`` writes the keys and values of new tokens after those already held and
    returns everything held so far; ``length`` is how many tokens that is, which is also
    the position of the next token. A padding mask given with a prompt is kept, so that
    later tokens keep ignoring the padded positions. ``has_padding`` says whether any
    token held is padding: while it is False, the flags are all True and a layer need
    not build a mask from them. It is decided from the masks given to ``append``: on
    an accelerator that reads one bool back from the device (a sync), once per append
    that brings a mask, until one brings padding. A prompt brings one; decoding steps,
    which bring none, cost none.

    Args:
        batch_size: ``B``, the number of sequences generated together.
        num_heads: ``H_kv``, the number of key/value heads of the layer.
        head_dim: ``d_h``, the width of one head.
        context_length: ``T_max``, the most tokens the cache can hold.
        dtype: dtype of the stored keys and values (the module's).
        device: device of the stored keys and values (the module's).
        value_dim: ``d_v``, the width of one value head, when it is not ``d_h``
            (values narrower than keys: MiMo-V2-Flash).

    Shapes:
        ``keys``, ``values``: ``(B, H_kv, T_max, d_h)`` storage (values ``d_v`` wide),
        zeros until written; ``key_padding``: ``(B, T_max)`` bool, True = a real token.
        ``append(keys, values, padding_mask=None)`` takes ``(B, H_kv, T_new, d_h)``
        twice and an optional ``(B, T_new)`` bool mask; it returns views of the first
        ``length`` positions: ``(B, H_kv, length, d_h)`` twice and ``(B, length)``.

    Raises:
        TypeError: an argument or input of the wrong type or dtype.
        ValueError: a wrong size, a batch size that changed, or more tokens than
            ``context_length``.
    """

    def __init__(
        self,
        batch_size: int,
        num_heads: int,
        head_dim: int,
        context_length: int,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
        value_dim: int | None = None,
    ) -> None:
        value_dim = head_dim if value_dim is None else value_dim
        for name, value in (
            ("batch_size", batch_size),
            ("num_heads", num_heads),
            ("head_dim", head_dim),
            ("context_length", context_length),
            ("value_dim", value_dim),
        ):
            _check_size(name, value)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
        shape = (batch_size, num_heads, context_length, head_dim)
        # (B, H_kv, T_max, d_h) and (B, H_kv, T_max, d_v), zeros until written
        self.keys = torch.zeros(shape, dtype=dtype, device=device)
        self.values = torch.zeros(*shape[:3], value_dim, dtype=dtype, device=device)
        self.key_padding = torch.ones(  # True = real token
            batch_size, context_length, dtype=torch.bool, device=device
        )  # (B, T_max)
        self.length = 0
        self.has_padding = False  # a plain Python flag: reading it costs no sync

    @property
    def context_length(self) -> int:
        return self.keys.shape[2]

    @property
    def nbytes(self) -> int:
        """Bytes of the key and value storage (the padding flags are not counted)."""
        return self.keys.nbytes + self.values.nbytes

    def reset(self) -> None:
        """Forget every token, to start a new sequence; the storage is kept."""
        self.length = 0
        self.has_padding = False
        self.key_padding.fill_(True)

    def _check_new(self, keys, values, padding_mask) -> None:
        batch, heads, _, head_dim = self.keys.shape
        value_dim = self.values.shape[-1]
        for name, tensor, head_dim in (("keys", keys, head_dim),
                                       ("values", values, value_dim)):
            if not isinstance(tensor, torch.Tensor):
                raise TypeError(
                    f"{name} must be a torch.Tensor, got {type(tensor).__name__}"
                )
            if tensor.dim() != 4:
                raise ValueError(
                    f"{name} must have shape (B, H_kv, T_new, d_h), "
                    f"got {tuple(tensor.shape)}"
                )
            if tensor.shape[0] != batch:
                raise ValueError(
                    f"{name} has batch size {tensor.shape[0]} but the cache holds "
                    f"{batch} sequences; make a new cache to change the batch size"
                )
            if (tensor.shape[1], tensor.shape[3]) != (heads, head_dim):
                raise ValueError(
                    f"{name} must have {heads} heads of width {head_dim}, "
                    f"got shape {tuple(tensor.shape)}"
                )
            if tensor.dtype != self.keys.dtype or tensor.device != self.keys.device:
                raise TypeError(
                    f"{name} must be {self.keys.dtype} on {self.keys.device} like the "
                    f"cache, got {tensor.dtype} on {tensor.device}"
                )
        if keys.shape[:3] != values.shape[:3]:
            raise ValueError(
                f"keys and values must have the same shape, got {tuple(keys.shape)} "
                f"and {tuple(values.shape)} (only their head widths may differ)"
            )
        num_new = keys.shape[2]
        if self.length + num_new > self.context_length:
            raise ValueError(
                f"the cache holds {self.length} tokens; adding {num_new} would make "
                f"{self.length + num_new}, more than "
                f"context_length={self.context_length}"
            )
        if padding_mask is None:
            return
        is_tensor = isinstance(padding_mask, torch.Tensor)
        if not is_tensor or padding_mask.dtype != torch.bool:
            raise TypeError(
                "padding_mask must be a bool torch.Tensor of shape (B, T_new) or None, "
                f"got {getattr(padding_mask, 'dtype', type(padding_mask).__name__)}"
            )
        if tuple(padding_mask.shape) != (batch, num_new):
            raise ValueError(
                f"padding_mask must have shape (B, T_new) = {(batch, num_new)}, "
                f"got {tuple(padding_mask.shape)}"
            )

    def append(
        self,
        keys: torch.Tensor,
        values: torch.Tensor,
        padding_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Store the new tokens' keys and values; return all held so far."""
        self._check_new(keys, values, padding_mask)
        start, end = self.length, self.length + keys.shape[2]
        self.keys[:, :, start:end] = keys  # (B, H_kv, T_new, d_h) into the storage
        self.values[:, :, start:end] = values  # (B, H_kv, T_new, d_v)
        if padding_mask is not None:
            self.key_padding[:, start:end] = padding_mask  # (B, T_new)
            self.has_padding = self.has_padding or not bool(padding_mask.all())
        self.length = end
        return (
            self.keys[:, :, :end],  # (B, H_kv, length, d_h)
            self.values[:, :, :end],  # (B, H_kv, length, d_v)
            self.key_padding[:, :end],  # (B, length)
        )
