# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Chunked attention (Llama 4's local layers): the text is cut into chunks of
``chunk_size`` tokens, and a token attends only to the tokens of its own chunk up to
itself.

Shapes: ``B`` batch, ``H_kv`` key/value heads, ``C = chunk_size``, ``T`` queries (new
tokens, with a cache), ``T_k`` keys attended to, ``d_h`` one head's width.

The query at position ``p`` may attend the key at position ``k`` when ``k <= p`` and
both lie in the same chunk:

    chunk(p) = floor((p - pad_b) / C)

where ``pad_b`` counts the padding tokens before sequence ``b``'s first real token
(transformers' rule: with left padding, chunks start at the first real token). Unlike a
sliding window of ``C``, which lets every token see ``C - 1`` tokens back, a chunk lets
its first token see nothing before it and its last see ``C - 1``; and no stack of
chunked layers ever carries anything across a chunk boundary. Llama 4 puts a full
layer (without rotary positions) after every three chunked ones for that.

A chunked layer never looks at an earlier chunk, so its cache keeps only the current
chunk: ``ChunkedKVCache`` drops the held keys and values when a new chunk starts, and
holds at most ``C - 1`` tokens between calls.

Builds on ``sliding_window.py`` of this package (its cache's input checks), imported
relatively: copy it with this file. MIT licence: keep the first two lines of each file.
"""

from __future__ import annotations

import torch

from .sliding_window import RollingKVCache


def check_chunk_size(chunk_size: object) -> None:
    """Raise a clear error unless ``chunk_size`` is None or an int of at least 1."""
    if chunk_size is None:
        return
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
        raise TypeError(
            f"chunk_size must be an int >= 1 or None, got {chunk_size!r} "
            f"({type(chunk_size).__name__})"
        )
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")


# --8<-- [start:mask]
def left_padding(padding_mask: torch.Tensor) -> torch.Tensor:
    """Padding tokens before each sequence's first real token: ``(B, T)`` bool
    (True = real token) -> ``(B,)`` long. A row of padding only counts all of it."""
    seen = padding_mask.long().cumsum(dim=1)  # (B, T): real tokens so far
    return (seen == 0).sum(dim=1)  # (B,)


def chunk_mask(
    query_start: int,
    num_queries: int,
    key_start: int,
    num_keys: int,
    chunk_size: int,
    pad: torch.Tensor,
) -> torch.Tensor:
    """True where a query and a key lie in different chunks: ``(B, 1, T, T_k)`` bool.

    Queries sit at positions ``query_start..``, keys at ``key_start..``; ``pad``
    ``(B,)`` counts each sequence's left padding, where its chunks start. The future is
    not hidden here: combine with a causal mask."""
    check_chunk_size(chunk_size)
    device = pad.device
    q_pos = torch.arange(query_start, query_start + num_queries, device=device)  # (T,)
    k_pos = torch.arange(key_start, key_start + num_keys, device=device)  # (T_k,)
    q_chunk = torch.div(q_pos - pad[:, None], chunk_size, rounding_mode="floor")
    k_chunk = torch.div(k_pos - pad[:, None], chunk_size, rounding_mode="floor")
    other = q_chunk[:, :, None] != k_chunk[:, None, :]  # (B, T, T_k)
    return other[:, None]  # (B, 1, T, T_k)
# --8<-- [end:mask]


class ChunkedKVCache:
    """Keys and values of the current chunk of one chunked attention layer.

    Like ``RollingKVCache`` in ``sliding_window.py``, ``append`` takes the new tokens'
    keys and values and returns the keys a query may need: those held plus the new
    ones. It then keeps only those of the chunk the next token falls in (with padded
    sequences whose chunks start at different places, those of the earliest such
    chunk), at most ``chunk_size - 1``. ``length`` counts every token seen (the
    position of the next one); the returned keys sit at positions
    ``length - T_k .. length - 1``. ``left_padding`` ``(B,)`` counts each sequence's
    padding before its first real token, seen so far: where its chunks start.
    ``has_padding`` says, as ``KVCache``'s does, whether a padding flag False was ever
    appended; without padding every sequence's chunks start at position 0.

    When the new tokens fit after those held, and the tokens to keep are all of them
    or none (always so without padding), they are written in place and views are
    returned: a decoding step copies nothing. Otherwise the held and new tokens are
    copied into one new tensor, and those to keep are written back.

    Args:
        batch_size: ``B``.
        num_heads: ``H_kv``, the key/value heads of the layer.
        head_dim: ``d_h``.
        chunk_size: ``C``.
        dtype: dtype of the stored keys and values (the layer's).
        device: device of the stored keys and values (the layer's).

    Shapes:
        ``keys``, ``values``: ``(B, H_kv, C, d_h)`` storage, oldest first;
        ``key_padding``: ``(B, C)`` bool, True = real token.
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
        chunk_size: int,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        for name, value in (
            ("batch_size", batch_size),
            ("num_heads", num_heads),
            ("head_dim", head_dim),
            ("chunk_size", chunk_size),
        ):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(
                    f"{name} must be an int, got {type(value).__name__} {value!r}"
                )
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
        shape = (batch_size, num_heads, chunk_size, head_dim)
        self.keys = torch.zeros(shape, dtype=dtype, device=device)  # (B, H_kv, C, d_h)
        self.values = torch.zeros_like(self.keys)  # (B, H_kv, C, d_h)
        self.key_padding = torch.ones(
            batch_size, chunk_size, dtype=torch.bool, device=device
        )  # (B, C), True = real token
        self.left_padding = torch.zeros(batch_size, dtype=torch.long, device=device)
        self.started = torch.zeros(batch_size, dtype=torch.bool, device=device)  # (B,)
        self.chunk_size = chunk_size
        self.length = 0  # tokens seen so far
        self.held = 0  # tokens held: those of the current chunk
        self.has_padding = False  # plain Python flags: reading them costs no sync
        self.all_started = False  # every row has read a real token
        self.pads = [0] * batch_size  # left_padding, read back when a mask changes it

    @property
    def nbytes(self) -> int:
        """Bytes of the key and value storage: fixed at the chunk."""
        return self.keys.nbytes + self.values.nbytes

    def reset(self) -> None:
        """Forget every token, to start a new sequence; the storage is kept."""
        self.length = self.held = 0
        self.has_padding = self.all_started = False
        self.pads = [0] * len(self.pads)
        self.key_padding.fill_(True)
        self.left_padding.zero_()
        self.started.fill_(False)

    # The same mistakes as a rolling cache's, the same errors, before any tensor work.
    _check_new = RollingKVCache._check_new

    # --8<-- [start:append]
    def append(self, keys, values, padding_mask=None):
        """Return the held and new keys, values and padding flags; keep those of the
        chunk the next token falls in."""
        self._check_new(keys, values, padding_mask)
        batch, num_new = keys.shape[0], keys.shape[2]
        if padding_mask is None:  # every new token real: no padding to count
            padding_mask = torch.ones(
                batch, num_new, dtype=torch.bool, device=keys.device
            )  # (B, T)
            if not self.all_started:
                self.started.fill_(True)  # (B,)
                self.all_started = True
        else:  # padding before a row's first real token moves where its chunks start
            leading = left_padding(padding_mask)  # (B,)
            self.left_padding += torch.where(self.started, 0, leading)  # (B,)
            self.started |= padding_mask.any(dim=1)  # (B,)
            if not self.has_padding:  # one look at the flags until padding comes
                self.has_padding = not bool(padding_mask.all())
            if self.has_padding:  # read back once per call that brings a mask
                self.pads = self.left_padding.tolist()
        held, end = self.held, self.held + num_new
        self.length += num_new
        # where the chunk of the next token starts, per sequence, then the earliest
        chunk = self.chunk_size
        starts = [pad + (self.length - pad) // chunk * chunk for pad in self.pads]
        keep = self.length - min(starts)  # tokens of the current chunk(s)
        if end <= chunk and keep in (0, end):  # in place: nothing moves
            self.keys[:, :, held:end] = keys  # (B, H_kv, T, d_h)
            self.values[:, :, held:end] = values  # (B, H_kv, T, d_h)
            self.key_padding[:, held:end] = padding_mask  # (B, T)
            self.held = keep
            return (self.keys[:, :, :end], self.values[:, :, :end],
                    self.key_padding[:, :end])  # views: (B, H_kv, T_k, d_h), ..
        keys = torch.cat((self.keys[:, :, :held], keys), dim=2)  # (B, H_kv, T_k, d_h)
        values = torch.cat((self.values[:, :, :held], values), dim=2)  # same
        padding = torch.cat((self.key_padding[:, :held], padding_mask), 1)  # (B, T_k)
        if keep > 0:
            self.keys[:, :, :keep] = keys[:, :, -keep:]  # (B, H_kv, keep, d_h)
            self.values[:, :, :keep] = values[:, :, -keep:]  # (B, H_kv, keep, d_h)
            self.key_padding[:, :keep] = padding[:, -keep:]  # (B, keep)
        self.held = keep
        return keys, values, padding
    # --8<-- [end:append]
