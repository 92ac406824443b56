# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Cross-layer KV sharing (Gemma 4): later layers attend over the keys and values an
earlier layer made, and keep no cache of their own.

Shapes: ``B`` batch, ``H_kv`` key/value heads, ``T`` new tokens, ``T_k`` keys attended
to, ``d_h`` one head's width.

In Gemma 4's smaller models the last ``num_kv_shared_layers`` layers have no key and
value projections. Each reads the keys and values of the last earlier layer of its
own kind (windowed or full), as that layer attended to them in the same step. Only the
earlier layers hold a cache: what the sharing layers would have held is saved.

``SharedKV`` hands them over. The owning layer gets it as its cache; it appends to the
cache it wraps (a ``KVCache``, a ``RollingKVCache``, or none for a prefill) and keeps
what that returned: the held keys and values and the new ones. The sharing layer gets
the same object and reads them::

    shared = SharedKV(owner.make_cache(batch_size))  # or SharedKV() for one prefill
    h = owner(x, padding_mask, cache=shared)          # appends, and records
    y = reader(h2, padding_mask, cache=shared)        # kv_shared=True: reads

The record is what the wrapped cache returned, not what it keeps: a rolling cache
keeps only the last ``window`` tokens, while a prompt longer than the window needs
all of its keys in that step.

Needs only torch. MIT licence: keep the first two lines of each file.
"""

from __future__ import annotations

import torch


# --8<-- [start:class]
class SharedKV:
    """The keys and values one attention layer attended to in its last call, for the
    later layers that reuse them.

    Args:
        cache: the owning layer's own cache (``KVCache``, ``RollingKVCache``, ...)
            or None: then every call is a prefill from position 0 and nothing is kept
            between calls.

    Shapes:
        ``append(keys, values, padding_mask=None)`` (the owner): ``(B, H_kv, T, d_h)``
        twice and ``(B, T)`` bool or None; returns the wrapped cache's answer (or the
        new tokens' own): ``(B, H_kv, T_k, d_h)`` twice and ``(B, T_k)``.
        ``read(num_tokens)`` (a sharing layer): the same three, and the position of
        the first new token.
    """

    def __init__(self, cache: object | None = None) -> None:
        if cache is not None and not callable(getattr(cache, "append", None)):
            raise TypeError(
                "cache must be a key/value cache with an append method (KVCache, "
                f"RollingKVCache, ...) or None, got {type(cache).__name__}"
            )
        self.cache = cache
        self.recorded = None  # (keys, values, key padding) of the owner's last call
        self.query_start = 0  # position of the first token of that call
        self.num_new = 0  # how many new tokens that call had

    @property
    def length(self) -> int:
        """Tokens the wrapped cache has seen (0 without one): the position of the
        owner's next token."""
        return 0 if self.cache is None else self.cache.length

    @property
    def nbytes(self) -> int:
        """Bytes the wrapped cache holds; a sharing layer adds none."""
        return 0 if self.cache is None else self.cache.nbytes

    def append(self, keys, values, padding_mask=None):
        """The owner's call: append to the wrapped cache, record and return what it
        hands back."""
        self.query_start, self.num_new = self.length, keys.shape[2]
        if self.cache is not None:
            keys, values, padding = self.cache.append(keys, values, padding_mask)
        else:
            padding = padding_mask  # (B, T), or all real when None
            if padding is None:
                padding = torch.ones(
                    keys.shape[0], keys.shape[2], dtype=torch.bool, device=keys.device
                )  # (B, T)
        self.recorded = (keys, values, padding)  # (B, H_kv, T_k, d_h) x2, (B, T_k)
        return self.recorded

    def read(self, num_tokens: int):
        """A sharing layer's call for ``num_tokens`` new tokens: the owner's keys,
        values and key padding of this step, and the position of the first new
        token."""
        if self.recorded is None:
            raise ValueError(
                "SharedKV holds nothing yet: run the layer that owns these keys and "
                "values (with this SharedKV as its cache) before the layers that "
                "reuse them"
            )
        if num_tokens != self.num_new:
            raise ValueError(
                f"the owning layer's last call had {self.num_new} new tokens, this "
                f"call has {num_tokens}: run the owner on the same tokens first"
            )
        return (*self.recorded, self.query_start)
# --8<-- [end:class]
