# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Sliding-window attention: each token attends to at most the last ``window`` tokens.

Shapes: ``B`` batch, ``H_kv`` key/value heads, ``W = window``, ``T`` tokens (new
tokens, with a cache), ``T_k`` keys attended to, ``d_h`` one head's width.

The query at position ``p`` may attend the key at position ``k`` when
``0 <= p - k < window``: itself and the ``window - 1`` tokens before it (the rule of
Mistral and of the local layers of Gemma). One layer sees ``window`` tokens back;
a stack of ``L`` layers passes information up to ``L * (window - 1)`` tokens back.

Since no token ever looks further back than the window, a cache needs to keep only
the last ``window`` keys and values: ``RollingKVCache`` does that, so its memory stops
growing at the window however long the text.

Needs only torch. MIT licence: keep the first two lines of each file.
"""

from __future__ import annotations

import torch


def check_window(window: object) -> None:
    """Raise a clear error unless ``window`` is None or an int of at least 1."""
    if window is None:
        return
    if isinstance(window, bool) or not isinstance(window, int):
        raise TypeError(
            f"window must be an int >= 1 or None, got {window!r} "
            f"({type(window).__name__})"
        )
    if window < 1:
        raise ValueError(
            f"window must be at least 1 (a token attends to itself), got {window}"
        )


def _check_size(name: str, value: object) -> None:
    # The rule and words of kv_cache.py, kept here: this module needs only torch.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")


# --8<-- [start:mask]
def sliding_window_mask(num_tokens: int, window: int) -> torch.Tensor:
    """True where a query may not attend a key: the future, and keys ``window`` or more
    positions back. ``(T, T)`` bool."""
    check_window(window)
    position = torch.arange(num_tokens)  # (T,)
    distance = position[:, None] - position[None, :]  # (T, T): query minus key
    return (distance < 0) | (distance >= window)  # (T, T)
# --8<-- [end:mask]


class RollingKVCache:
    """Keys and values of the last ``window`` tokens of one attention layer.

    Like ``KVCache`` in ``kv_cache.py``, ``append`` takes the new tokens' keys and
    values and returns the keys a query may need: those held plus the new ones, at
    most ``window + T`` of them; it then keeps only the last ``window``. ``length``
    counts every token seen (the position of the next one); the returned keys sit at
    positions ``length - T_k .. length - 1``. ``has_padding`` says, as ``KVCache``'s
    does, whether a padding flag False was ever appended.

    Until the window is full, new tokens are written after those held and views are
    returned, as ``KVCache`` does. Once it is full, the held and the new tokens are
    copied into one new tensor, which is returned; its last ``window`` tokens then
    become the storage (a view): one copy of the window per call.

    Args:
        batch_size: ``B``.
        num_heads: ``H_kv``, the key/value heads of the layer.
        head_dim: ``d_h``.
        window: ``W``, the tokens kept.
        dtype: dtype of the stored keys and values (the layer's).
        device: device of the stored keys and values (the layer's).
        value_dim: ``d_v``, the width of one value head, when it is not ``d_h``.

    Shapes:
        ``keys``, ``values``: ``(B, H_kv, W, d_h)`` storage (values ``d_v`` wide),
        oldest first;
        ``key_padding``: ``(B, W)`` bool, True = real token.
        ``append(keys, values, padding_mask=None)``: ``(B, H_kv, T, d_h)`` twice and
        ``(B, T)``; returns ``(B, H_kv, T_k, d_h)`` twice and ``(B, T_k)``.

    Raises:
        TypeError: an argument or input of the wrong type or dtype.
        ValueError: a wrong size, or keys and values of different shapes.
    """

    def __init__(
        self,
        batch_size: int,
        num_heads: int,
        head_dim: int,
        window: int,
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
            ("window", window),  # no None here: a rolling cache needs a window
            ("value_dim", value_dim),
        ):
            _check_size(name, value)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
        shape = (batch_size, num_heads, window, head_dim)
        self.keys = torch.zeros(shape, dtype=dtype, device=device)  # (B, H_kv, W, d_h)
        self.values = torch.zeros(
            *shape[:3], value_dim, dtype=dtype, device=device
        )  # (B, H_kv, W, d_v)
        self.key_padding = torch.ones(
            batch_size, window, dtype=torch.bool, device=device
        )  # (B, W), True = real token
        self.window = window
        self.length = 0  # tokens seen so far
        self.held = 0  # tokens held: min(length, window)
        self.has_padding = False  # a plain Python flag: reading it costs no sync

    @property
    def nbytes(self) -> int:
        """Bytes of the held keys and values: the window's. The storage under them
        holds at most twice the window (a view of one call's join; a longer call's
        window is copied out)."""
        return self.keys.nbytes + self.values.nbytes

    def reset(self) -> None:
        """Forget every token, to start a new sequence; the storage is kept."""
        self.length = self.held = 0
        self.has_padding = False
        self.key_padding.fill_(True)

    def _check_new(self, keys, values, padding_mask) -> None:
        """Raise the errors ``KVCache`` raises for the same mistakes, before any tensor
        work; only the overflow has no counterpart (old tokens are dropped)."""
        batch, heads, _, head_dim = self.keys.shape
        value_dim = self.values.shape[-1]
        for name, tensor, head_dim in (("keys", keys, head_dim),
                                       ("values", values, value_dim)):
            if not isinstance(tensor, torch.Tensor):
                raise TypeError(
                    f"{name} must be a torch.Tensor, got {type(tensor).__name__}"
                )
            sizes = tensor.shape[:2] + tensor.shape[3:]  # (B, H_kv, d_h) when 4-d
            if tensor.dim() != 4 or sizes != (batch, heads, head_dim):
                raise ValueError(
                    f"{name} must have shape (B, H_kv, T, d_h) = "
                    f"({batch}, {heads}, T, {head_dim}), got {tuple(tensor.shape)}"
                )
            if tensor.dtype != self.keys.dtype or tensor.device != self.keys.device:
                raise TypeError(
                    f"{name} must be {self.keys.dtype} on {self.keys.device} like the "
                    f"cache, got {tensor.dtype} on {tensor.device}"
                )
        if keys.shape[:3] != values.shape[:3]:  # else unequal lengths would be held
            raise ValueError(
                f"keys and values must have the same shape, got {tuple(keys.shape)} "
                f"and {tuple(values.shape)} (only their head widths may differ)"
            )
        if padding_mask is None:
            return
        is_tensor = isinstance(padding_mask, torch.Tensor)
        if not is_tensor or padding_mask.dtype != torch.bool:
            raise TypeError(
                "padding_mask must be a bool torch.Tensor of shape (B, T) or None, "
                f"got {getattr(padding_mask, 'dtype', type(padding_mask).__name__)}"
            )
        expected = (batch, keys.shape[2])
        if tuple(padding_mask.shape) != expected:
            raise ValueError(
                f"padding_mask must have shape (B, T) = {expected}, "
                f"got {tuple(padding_mask.shape)}"
            )

    # --8<-- [start:append]
    def append(self, keys, values, padding_mask=None):
        """Return the held and new keys, values and padding flags; keep the last
        ``window`` of them."""
        self._check_new(keys, values, padding_mask)
        batch, num_new = keys.shape[0], keys.shape[2]
        if padding_mask is None:
            padding_mask = torch.ones(
                batch, num_new, dtype=torch.bool, device=keys.device
            )  # (B, T)
        elif not self.has_padding:  # one look at the flags until padding comes
            self.has_padding = not bool(padding_mask.all())
        held, end = self.held, self.held + num_new
        self.length += num_new
        if end <= self.window:  # room left: write after the held tokens, no copy
            self.keys[:, :, held:end] = keys  # (B, H_kv, T, d_h)
            self.values[:, :, held:end] = values  # (B, H_kv, T, d_v)
            self.key_padding[:, held:end] = padding_mask  # (B, T)
            self.held = end
            return (self.keys[:, :, :end], self.values[:, :, :end],
                    self.key_padding[:, :end])  # views: (B, H_kv, T_k, d_h), ..
        keys = torch.cat((self.keys[:, :, :held], keys), dim=2)  # (B, H_kv, T_k, d_h)
        values = torch.cat((self.values[:, :, :held], values), dim=2)  # (.., d_v)
        padding = torch.cat((self.key_padding[:, :held], padding_mask), 1)  # (B, T_k)
        last = slice(end - self.window, end)  # the last W tokens stay, as views
        kept = keys[:, :, last], values[:, :, last], padding[:, last]
        if end > 2 * self.window:  # a long call: copy the window out, free the rest
            kept = tuple(t.clone() for t in kept)
        self.keys, self.values, self.key_padding = kept  # (B,H_kv,W,.) x2, (B, W)
        self.held = self.window
        return keys, values, padding
    # --8<-- [end:append]
