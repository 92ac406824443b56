# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""What a linear-attention layer keeps between calls: the last inputs of its short
convolution and its state (the delta rule's, or Mamba-2's). Nothing grows with the
tokens read.

Shapes: ``B`` batch, ``H`` heads, ``d_k`` key width, ``d_v`` value width, ``C`` the
convolved channels (queries, keys and values side by side), ``K`` the convolution's
kernel size.

    conv_window  (B, C, K - 1)   the last K - 1 inputs of the convolution
    state        (B, H, d_k, d_v)  the delta-rule state, in float32 at least

A KV cache holds ``2 H_kv d_h`` numbers per token read; this holds
``C (K - 1) + H d_k d_v`` numbers per sequence, whether it has read ten tokens or a
million.

``check_left_padding`` refuses padding after a real token: the layers treat a padded
position as absent (the state is left as it was, the convolution sees zeros), which
is exact only while no real token came before it in its row.

Prefix reuse: attention can reuse the keys of any cached prefix (cut the cache at its
length), but a state holds every token read, mixed: the state after a prefix is not
kept in a later one (undoing the later writes would need their tokens again, and
in floating point it would not give the same numbers back). ``save_at(position)``
asks the cache to keep a copy when a call reaches that position; the layers stop
there (``run_in_pieces``) and go on; ``snapshot(position)`` then gives a cache that
resumes after exactly that prefix.

Builds on ``checks.py`` of this package, imported relatively: copy it with this file,
under any package name (its API page offers the set as one download). MIT licence: keep
the first two lines of each file.
"""

from __future__ import annotations

import copy
import math

import torch

from .checks import check_inputs, check_size


# --8<-- [start:cache]
class DeltaStateCache:
    """The convolution window and delta-rule state of one linear-attention layer.

    Args:
        batch_size: ``B``.
        num_heads: ``H``, the heads that own a state.
        key_head_dim: ``d_k``.
        value_head_dim: ``d_v``.
        conv_channels: ``C``, the channels the short convolution mixes.
        conv_kernel: ``K``; the window holds ``K - 1`` inputs.
        dtype: the window's dtype (the module's); the state is kept in float32 at
            least, as the rule computes it.
        device: where both live.

    ``length`` counts the tokens read (padding included); ``started`` ``(B,)`` says
    which rows have read a real token. ``nbytes`` does not depend on ``length``.
    ``snapshots`` maps the positions kept by ``save_at`` to copies of the cache.
    """

    def __init__(
        self,
        batch_size: int,
        num_heads: int,
        key_head_dim: int,
        value_head_dim: int,
        conv_channels: int,
        conv_kernel: int,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        sizes = dict(batch_size=batch_size, num_heads=num_heads,
                     key_head_dim=key_head_dim, value_head_dim=value_head_dim,
                     conv_channels=conv_channels, conv_kernel=conv_kernel)
        for name, value in sizes.items():
            check_size(name, value)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
        state_dtype = torch.promote_types(dtype, torch.float32)
        self.conv_window = torch.zeros(
            batch_size, conv_channels, conv_kernel - 1, dtype=dtype, device=device
        )  # (B, C, K - 1)
        self.state = torch.zeros(
            batch_size, num_heads, key_head_dim, value_head_dim,
            dtype=state_dtype, device=device,
        )  # (B, H, d_k, d_v)
        self.started = torch.zeros(batch_size, dtype=torch.bool, device=device)  # (B,)
        self.length = 0
        self.snapshots: dict[int, DeltaStateCache] = {}  # position -> copy
        self.pending: set[int] = set()  # positions to keep when a call reaches them

    @property
    def batch_size(self) -> int:
        return self.state.shape[0]

    @property
    def nbytes(self) -> int:
        """Bytes of the window and the state: the same after any number of tokens
        (snapshots not counted)."""
        return self.conv_window.nbytes + self.state.nbytes

    def reset(self) -> None:
        """Forget every token, to start new sequences: window and state back to
        zeros, with the same shapes, dtypes and device; no snapshot kept or asked."""
        self.conv_window = torch.zeros_like(self.conv_window)
        self.state = torch.zeros_like(self.state)
        self.started = torch.zeros_like(self.started)
        self.length = 0
        self.snapshots, self.pending = {}, set()

    def copy(self) -> DeltaStateCache:
        """An independent cache holding the same tokens (without snapshots)."""
        new = copy.copy(self)
        new.conv_window = self.conv_window.clone()  # (B, C, K - 1)
        new.state = self.state.clone()  # (B, H, d_k, d_v)
        new.started = self.started.clone()  # (B,)
        new.snapshots, new.pending = {}, set()
        return new

    def save_at(self, *positions: int) -> None:
        """Keep a copy of the cache after ``position`` tokens (counted as ``length``
        counts them, padding included) for each of ``positions``, when a later call
        reaches it."""
        for position in positions:
            if isinstance(position, bool) or not isinstance(position, int) or (
                position <= self.length
            ):
                raise ValueError(
                    f"positions must be ints beyond the {self.length} tokens read, "
                    f"got {position!r}"
                )
        self.pending.update(positions)

    def snapshot(self, position: int) -> DeltaStateCache:
        """A new cache that holds exactly the first ``position`` tokens (kept by
        ``save_at``): feed it the tokens after them to resume there."""
        if position not in self.snapshots:
            raise ValueError(
                f"no snapshot at position {position!r}; kept: {sorted(self.snapshots)} "
                f"(ask with save_at before the call that reads that position)"
            )
        return self.snapshots[position].copy()

    def cuts(self, num_new: int) -> list[int]:
        """Where a call of ``num_new`` tokens must stop to keep a snapshot: offsets
        into the call, strictly inside it, in order."""
        offsets = (position - self.length for position in self.pending)
        return sorted(offset for offset in offsets if offset < num_new)

    def reorder(self, rows: torch.Tensor) -> None:
        """Keep the rows ``rows`` ``(B,)`` (ints), in that order: beam search moves a
        sequence's whole memory with it, window and state alike."""
        if not isinstance(rows, torch.Tensor) or rows.dtype not in (
            torch.int32, torch.int64
        ) or tuple(rows.shape) != (self.batch_size,):
            raise ValueError(
                f"rows must be an int tensor of shape (B,) = ({self.batch_size},), "
                f"got {getattr(rows, 'dtype', type(rows).__name__)} "
                f"{tuple(getattr(rows, 'shape', ()))}"
            )
        self.conv_window = self.conv_window.index_select(0, rows)  # (B, C, K - 1)
        self.state = self.state.index_select(0, rows)  # (B, H, d_k, d_v)
        self.started = self.started.index_select(0, rows)  # (B,)
        for kept in self.snapshots.values():  # a snapshot follows its sequences too
            kept.reorder(rows)

    def update(self, conv_window, state, num_new: int, padding_mask=None) -> None:
        """Keep what a layer computed after ``num_new`` more tokens (``padding_mask``
        ``(B, num_new)`` or None: which of them were real)."""
        shapes = (conv_window.shape, state.shape)
        if shapes != (self.conv_window.shape, self.state.shape):
            raise ValueError(
                f"expected a window {tuple(self.conv_window.shape)} and a state "
                f"{tuple(self.state.shape)}, got {tuple(conv_window.shape)} and "
                f"{tuple(state.shape)}"
            )
        skipped = [p for p in self.pending if self.length < p < self.length + num_new]
        if skipped:
            raise ValueError(
                f"this call read past position {min(skipped)} without stopping there "
                "to keep its snapshot (run_in_pieces stops a call at each)"
            )
        self.conv_window = conv_window  # (B, C, K - 1)
        self.state = state.to(self.state.dtype)  # (B, H, d_k, d_v)
        if padding_mask is None:
            self.started = torch.ones_like(self.started)
        else:
            self.started = self.started | padding_mask.any(dim=1)  # (B,)
        self.length += num_new
        if self.length in self.pending:  # a position to keep: a copy, as it is now
            self.pending.discard(self.length)
            self.snapshots[self.length] = self.copy()
# --8<-- [end:cache]


def run_in_pieces(layer, x, padding_mask, cache):
    """``layer`` on ``x`` ``(B, T, d_in)`` in pieces that end at the positions
    ``cache`` is to keep (``save_at``), so that each is kept as it is; the outputs
    ``(B, T, d_out)`` put back together. None when no piece is needed."""
    cuts = [] if cache is None else cache.cuts(x.shape[1])
    if not cuts:
        return None
    ends = [0, *cuts, x.shape[1]]
    pieces = [
        layer(x[:, start:end], None if padding_mask is None else
              padding_mask[:, start:end], cache=cache)  # (B, end - start, d_out)
        for start, end in zip(ends, ends[1:])
    ]
    return torch.cat(pieces, dim=1)  # (B, T, d_out)


def check_state_call(x, padding_mask, cache, weight, cache_shapes) -> None:
    """The checks of a state layer's call, before any tensor work: ``x`` ``(B, T,
    d_in)`` of any length in ``weight``'s dtype and device; ``cache`` None or a
    ``DeltaStateCache`` of the shapes ``cache_shapes(B)`` gives; ``padding_mask`` left
    padding only, after what the cache's rows have read."""
    check_inputs(x, padding_mask, weight.shape[1], math.inf, weight)  # no limit
    if cache is not None:
        check_state_cache(cache, cache_shapes(x.shape[0]))
    if padding_mask is not None:
        check_left_padding(padding_mask, None if cache is None else cache.started)


def state_cache_shapes(batch_size: int, num_heads: int, key_head_dim: int,
                       value_head_dim: int, conv: torch.nn.Conv1d) -> tuple:
    """The window's ``(B, C, K - 1)`` and the state's ``(B, H, d_k, d_v)`` shapes for a
    layer whose short convolution is ``conv``."""
    return ((batch_size, conv.in_channels, conv.kernel_size[0] - 1),
            (batch_size, num_heads, key_head_dim, value_head_dim))


def make_state_cache(batch_size: int, num_heads: int, key_head_dim: int,
                     value_head_dim: int, conv: torch.nn.Conv1d) -> DeltaStateCache:
    """An empty cache for a layer whose short convolution is ``conv``, in its dtype and
    on its device."""
    weight = conv.weight
    return DeltaStateCache(
        batch_size, num_heads, key_head_dim, value_head_dim, conv.in_channels,
        conv.kernel_size[0], dtype=weight.dtype, device=weight.device,
    )


def check_state_cache(cache, expected: tuple) -> None:
    """``cache`` must be a ``DeltaStateCache`` holding a window and a state of the
    ``expected`` shapes (those of the layer and batch it is used with)."""
    if not isinstance(cache, DeltaStateCache):
        raise TypeError(
            f"cache must be a DeltaStateCache or None, got {type(cache).__name__}"
        )
    got = (tuple(cache.conv_window.shape), tuple(cache.state.shape))
    if got != tuple(expected):
        raise ValueError(
            f"cache holds a window {got[0]} and a state {got[1]}; this layer and "
            f"batch need {expected[0]} and {expected[1]} (use layer.make_cache(B))"
        )


def check_left_padding(padding_mask: torch.Tensor, started=None) -> None:
    """``padding_mask`` ``(B, T)`` (True = real token) may only pad a row before its
    first real token; ``started`` ``(B,)``: rows that already read one (a cache's)."""
    seen = padding_mask.int().cummax(dim=1).values.bool()  # (B, T): real token seen
    if started is not None:
        seen = seen | started.unsqueeze(1)  # (B, T)
    late = seen & ~padding_mask  # (B, T): padding after a real token
    if bool(late.any()):
        row, position = (int(i) for i in late.nonzero()[0])
        raise ValueError(
            f"padding_mask pads row {row} at position {position}, after a real token "
            "(of this call or held in the cache): linear attention takes left padding "
            "only, before each row's first real token"
        )
