# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Cross-layer sharing: later layers reuse what an earlier layer computed in the same
step. Gemma 4's last layers attend over the keys and values an earlier layer made
(``SharedKV``), and keep no cache of their own; GLM-5's shared layers attend over the
tokens an earlier layer's indexer chose (``SharedTopK``), and run no indexer.

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

``SharedTopK`` hands over a choice instead of keys. In GLM-5 a layer marked
``"shared"`` in ``indexer_types`` has no indexer: it attends over the ``k`` tokens the
last earlier layer with an indexer chose for each query, among its own keys and
values (each layer keeps its own latent cache, so the positions line up). The
indexer layer records its choice in the object passed as ``topk``; the shared layers
read it::

    picks = SharedTopK()
    h = indexer_layer(x, padding_mask, cache=own_cache, topk=picks)  # records
    y = shared_layer(h2, padding_mask, cache=its_cache, topk=picks)  # reads

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
        self.masked = False  # whether that call brought a padding mask

    @property
    def has_padding(self) -> bool:
        """Whether the keys handed over may include padding: the wrapped cache's
        ``has_padding``; without a cache, whether the owner's last call brought a
        padding mask."""
        if self.cache is not None:
            return getattr(self.cache, "has_padding", True)
        return self.masked

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
        self.masked = padding_mask is not None
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


# --8<-- [start:topk]
class SharedTopK:
    """The tokens an indexer layer chose for each query in its last call, for the
    later layers that reuse the choice (GLM-5's ``"shared"`` layers).

    Shapes: ``T`` new tokens (queries), ``T_k`` keys held, ``k`` chosen per query.
    ``record(selected, query_start, num_keys)`` (the indexer layer): ``selected``
    ``(B, T, k)`` long, indices into the ``T_k`` keys held after its call, whose first
    new token sat at ``query_start``. ``read(num_tokens, query_start, num_keys)`` (a
    sharing layer): the same ``(B, T, k)``, once its call is checked to cover the
    same tokens over as many keys.
    """

    def __init__(self) -> None:
        self.selected = None  # (B, T, k) of the indexer layer's last call
        self.query_start = 0  # position of the first token of that call
        self.num_keys = 0  # keys it chose among

    def record(self, selected: torch.Tensor, query_start: int, num_keys: int) -> None:
        """The indexer layer's call: keep its choice."""
        if not isinstance(selected, torch.Tensor) or selected.dim() != 3:
            raise ValueError(
                "selected must be a tensor of shape (B, T, k), got "
                f"{getattr(selected, 'shape', type(selected).__name__)}"
            )
        self.selected, self.query_start, self.num_keys = selected, query_start, num_keys

    def read(self, num_tokens: int, query_start: int, num_keys: int) -> torch.Tensor:
        """A sharing layer's call for ``num_tokens`` new tokens at ``query_start``
        over ``num_keys`` keys: the indexer layer's choice ``(B, T, k)``."""
        if self.selected is None:
            raise ValueError(
                "SharedTopK holds nothing yet: run the layer whose indexer chooses "
                "(with this SharedTopK as topk) before the layers that reuse its choice"
            )
        found = (self.selected.shape[1], self.query_start, self.num_keys)
        if found != (num_tokens, query_start, num_keys):
            raise ValueError(
                f"the indexer layer's last call chose for {found[0]} tokens from "
                f"position {found[1]} among {found[2]} keys; this call has "
                f"{num_tokens} tokens from position {query_start} among {num_keys} "
                "keys: run the indexer layer on the same tokens first"
            )
        return self.selected  # (B, T, k)
# --8<-- [end:topk]
