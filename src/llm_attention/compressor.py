# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""DeepSeek-V4's compressor and its indexer: every ``m`` tokens pooled into one cache
entry, and, for compressed sparse attention, the ``k`` entries each query keeps.

Shapes: ``B`` batch, ``T`` new tokens, ``S`` tokens of a pool's stream (those held and
the new ones), ``E`` entries, ``d_in`` input width, ``d`` an entry's width
(``head_dim``; ``d_I`` in the indexer), ``m = rate``, ``d_r`` the dimensions that turn,
``H_I`` indexer heads.

An entry is a gated average of its window's tokens, channel by channel, normed and
turned to the position where its window starts:

    c_j = x_j W_kv,   z_j = x_j W_gate + b_(j mod m)        (B, S, d) each, per token
    C_w = RoPE_(w m)( RMSNorm( sum_{j in window w} softmax_j(z_j) * c_j ) )   (B, E, d)

Heavily compressed attention (HCA) pools the ``m`` tokens ``w m .. w m + m - 1``.
Compressed sparse attention (CSA) gives each token two series (``W_kv`` and ``W_gate``
twice as wide): the first half of token ``j``'s numbers joins the window after its own,
the second half its own, so entry ``w`` pools ``2 m`` tokens, ``(w - 1) m .. w m + m -
1``, and neighbouring windows overlap by ``m``. Entry 0 has no window before it: that
half weighs nothing. An entry is ready when its last token is in: query ``t`` may read
entry ``w`` when ``(w + 1) m <= t + 1``.

Positions are each sequence's own (``own_start``): a row padded on the left starts its
first window at its first real token, so padding never enters an entry and the row
pools what its prompt alone would.

``PoolState`` keeps, between calls, the entries made so far and the last tokens' ``c``
and ``z`` that a later entry still needs (fewer than ``2 m``).

The indexer (``CompressedIndexer``, CSA only) pools entries of its own, ``d_I`` wide,
and scores them as DeepSeek-V3.2's lightning indexer scores keys:

    I_{t,w} = sum_h u_{t,h} ReLU(q_{t,h} . K_w / sqrt(d_I)),   u_t = x_t W_u / sqrt(H_I)

with ``q_{t,h}`` made from the attention's query bottleneck and turned at position
``t``. ``top_k_keys`` (``lightning_indexer.py``) then keeps the ``k`` ready entries of
largest score.

Rotary positions as DeepSeek lays them out (``rotate_pairs``): the last ``d_r``
dimensions of a vector turn, in pairs of neighbours ``(2i, 2i + 1)``.

Builds on ``checks.py`` of this package, imported relatively: copy it with this file,
under any package name. MIT licence: keep the first two lines of each file.
"""

from __future__ import annotations

import torch
from torch import nn

from .checks import check_size


# --8<-- [start:rotate]
def rotary_angles(positions: torch.Tensor, inv_freq: torch.Tensor):
    """``cos`` and ``sin`` of ``position * theta_i``: ``positions`` ``(...)`` ->
    ``(..., d_r / 2)`` twice, float32."""
    angle = positions[..., None].float() * inv_freq.float()  # (..., d_r / 2)
    return angle.cos(), angle.sin()


def rotate_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Turn the last ``d_r = 2 * cos.shape[-1]`` dimensions of ``x`` ``(..., d)``, pairs
    of neighbours ``(2i, 2i + 1)``, by the angles of ``cos``/``sin`` (broadcasting to
    ``(..., d_r / 2)``); the other dimensions pass. ``-sin`` turns back."""
    d_r = 2 * cos.shape[-1]
    passed, turned = x[..., :-d_r], x[..., -d_r:].float()  # (..., d - d_r), (..., d_r)
    even, odd = turned[..., 0::2], turned[..., 1::2]  # (..., d_r / 2) each
    turned = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return torch.cat((passed, turned.flatten(-2).to(x.dtype)), dim=-1)  # (..., d)
# --8<-- [end:rotate]


class PoolState:
    """One pool's memory between calls: ``entries`` ``(B, E, d)`` made so far (row
    ``b`` holds ``count[b]`` of them; any further rows are filler), ``count`` ``(B,)``
    and ``stream`` ``(B, S_held, 2 width)``: the ``c`` and ``z`` of the last tokens,
    which entries not yet made still need."""

    def __init__(self, entries, count, stream) -> None:
        self.entries, self.count, self.stream = entries, count, stream

    @property
    def nbytes(self) -> int:
        return self.entries.nbytes + self.stream.nbytes


# --8<-- [start:compressor]
class Compressor(nn.Module):
    r"""Pools every ``rate`` tokens into one entry (see the module's docstring).

    Args:
        d_in: width of each input token vector.
        head_dim: ``d``, the width of an entry.
        rate: ``m``, the tokens per entry.
        overlap: CSA's overlapping windows of ``2 m`` tokens (two series per token);
            False: HCA's windows of ``m``.
        norm_eps: the RMSNorm's epsilon.

    Shapes:
        ``pool(x, own_first, inv_freq, state=None)``: ``x`` ``(B, T, d_in)``,
        ``own_first`` ``(B,)`` each row's own position of ``x``'s first token (negative
        when it is padding); returns every entry so far ``(B, E, d)``, ``count``
        ``(B,)`` and the new ``PoolState``.
    """

    def __init__(self, d_in: int, head_dim: int, rate: int, *, overlap: bool,
                 norm_eps: float = 1e-6) -> None:
        for name, value in (("d_in", d_in), ("head_dim", head_dim), ("rate", rate)):
            check_size(name, value)
        if not isinstance(overlap, bool):
            raise TypeError(f"overlap must be True or False, got {overlap!r}")
        super().__init__()
        width = 2 * head_dim if overlap else head_dim  # two series per token in CSA
        self.head_dim, self.rate, self.overlap = head_dim, rate, overlap
        self.W_kv = nn.Linear(d_in, width, bias=False)  # c_j
        self.W_gate = nn.Linear(d_in, width, bias=False)  # z_j
        self.position_bias = nn.Parameter(torch.zeros(rate, width))  # b, (m, width)
        self.norm = nn.RMSNorm(head_dim, eps=norm_eps)

    @property
    def keep(self) -> int:
        """Tokens of the stream a later entry may still need: ``2 m - 1`` (CSA) or
        ``m - 1`` (HCA)."""
        return (2 if self.overlap else 1) * self.rate - 1

    def pool(self, x, own_first, inv_freq, state: PoolState | None = None):
        """Entries of every window closed so far; see the class's docstring."""
        b = x.shape[0]
        sources = torch.cat((self.W_kv(x), self.W_gate(x)), dim=-1)  # (B, T, 2 width)
        if state is None:
            state = PoolState(
                sources.new_zeros(b, 0, self.head_dim),
                torch.zeros(b, dtype=torch.long, device=x.device), sources[:, :0],
            )
        stream = torch.cat((state.stream, sources), dim=1)  # (B, S, 2 width)
        own_start = own_first - state.stream.shape[1]  # (B,): own position of stream[0]
        total = (own_start + stream.shape[1]).clamp(min=0)  # (B,) real tokens seen
        ready = torch.div(total, self.rate, rounding_mode="floor")  # (B,) entries due
        new = self.closed(stream, own_start, state.count, ready, inv_freq)  # (B,E',d)
        entries = merge_entries(state.entries, state.count, new, ready)  # (B, E, d)
        kept = stream[:, max(stream.shape[1] - self.keep, 0):]  # (B, <= keep, 2 width)
        return entries, ready, PoolState(entries, ready, kept)

    def closed(self, stream, own_start, done, ready, inv_freq) -> torch.Tensor:
        """The entries ``done .. ready - 1`` of each row, from ``stream`` ``(B, S, 2
        width)`` whose first token sits at own position ``own_start``: ``(B, E', d)``,
        ``E'`` the most any row closes; a row that closes fewer gets filler after."""
        b, length, _ = stream.shape
        m, d = self.rate, self.head_dim
        count = int((ready - done).max()) if b else 0
        if count <= 0:
            return stream.new_zeros(b, 0, d)
        entry = done[:, None] + torch.arange(count, device=stream.device)  # (B, E') w
        first = entry * m - own_start[:, None]  # (B, E'): stream index of w m
        index = first[..., None] + torch.arange(m, device=stream.device)  # (B, E', m)
        if self.overlap:  # the window before as well: (w - 1) m .. w m + m - 1
            index = torch.cat((index - m, index), dim=-1)  # (B, E', 2 m)
        index = index.clamp(0, length - 1)  # filler entries read any token
        rows = stream.gather(1, index.view(b, -1, 1).expand(-1, -1, stream.shape[-1]))
        rows = rows.view(b, count, index.shape[-1], -1)  # (B, E', m or 2m, 2 width)
        kv, gate = rows.split(rows.shape[-1] // 2, dim=-1)  # c and z
        if self.overlap:  # first half of each token's numbers: the next window's
            bias = self.position_bias
            kv = torch.cat((kv[:, :, :m, :d], kv[:, :, m:, d:]), dim=2)  # (B,E',2m,d)
            earlier = gate[:, :, :m, :d] + bias[:, :d]  # (B, E', m, d)
            earlier = earlier.masked_fill((entry == 0)[..., None, None], -torch.inf)
            gate = torch.cat((earlier, gate[:, :, m:, d:] + bias[:, d:]), dim=2)
        else:
            gate = gate + self.position_bias  # (B, E', m, d)
        weights = torch.softmax(gate, dim=2, dtype=torch.float32).to(kv.dtype)
        pooled = self.norm((kv * weights).sum(dim=2))  # (B, E', d)
        cos, sin = rotary_angles(entry * m, inv_freq)  # (B, E', d_r / 2)
        return rotate_pairs(pooled, cos, sin)  # (B, E', d)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, rate={self.rate}, overlap={self.overlap}"
# --8<-- [end:compressor]


def merge_entries(old, count, new, ready) -> torch.Tensor:
    """Row ``b``'s entries ``old[b, :count[b]]`` followed by ``new[b]``, up to
    ``ready[b]`` of them: ``(B, max(ready), d)``, filler after each row's own;
    ``old`` itself when no row closed an entry (most decoding steps), so the entries
    are copied when one is added, not at every step."""
    if not new.shape[1]:  # no row closed one: ready == count in every row
        return old
    total = int(ready.max()) if ready.numel() else 0
    both = torch.cat((old, new), dim=1)  # (B, E_old + E', d)
    if total == 0:
        return both[:, :0]
    slot = torch.arange(total, device=both.device)[None]  # (1, E)
    later = old.shape[1] + slot - count[:, None]  # (B, E): where new[b] sits in both
    index = torch.where(slot < count[:, None], slot, later)
    index = index.clamp(max=both.shape[1] - 1)  # (B, E)
    return both.gather(1, index[..., None].expand(-1, -1, both.shape[-1]))  # (B, E, d)


# --8<-- [start:indexer]
class CompressedIndexer(nn.Module):
    r"""The indexer of compressed sparse attention: entries of its own, scored.

    $$I_{t,w} = \sum_h u_{t,h}\,\mathrm{ReLU}\Big(\frac{q_{t,h} \cdot K_w}{\sqrt{d_I}}
        \Big), \qquad u_t = \frac{x_t W_u}{\sqrt{H_I}}$$

    Args:
        d_in: width of each input token vector.
        q_lora_rank: ``d_q``, the width of the attention's query bottleneck it reads.
        num_heads: ``H_I``.
        head_dim: ``d_I``, its entries' and queries' width.
        rate: ``m``, as the attention's compressor.
        norm_eps: the RMSNorm's epsilon.

    Shapes:
        ``compressor.pool`` as ``Compressor``'s, entries ``(B, E, d_I)``.
        ``scores(x, query_latent, keys, cos, sin)``: ``x`` ``(B, T, d_in)``,
        ``query_latent`` ``(B, T, d_q)``, ``keys`` ``(B, E, d_I)``, ``cos``/``sin``
        ``(B, T, d_r / 2)`` at the queries' positions -> ``(B, T, E)`` float32.
    """

    def __init__(self, d_in: int, q_lora_rank: int, num_heads: int, head_dim: int,
                 rate: int, *, norm_eps: float = 1e-6) -> None:
        for name, value in (("q_lora_rank", q_lora_rank), ("num_heads", num_heads)):
            check_size(name, value)
        super().__init__()
        self.num_heads, self.head_dim = num_heads, head_dim
        self.compressor = Compressor(d_in, head_dim, rate, overlap=True,
                                     norm_eps=norm_eps)
        self.W_query = nn.Linear(q_lora_rank, num_heads * head_dim, bias=False)
        self.W_head_weights = nn.Linear(d_in, num_heads, bias=False)  # u_{t,h}

    def scores(self, x, query_latent, keys, cos, sin) -> torch.Tensor:
        """``I_{t,w}``: ``(B, T, E)`` float32, entries not yet ready not hidden."""
        b, num_tokens, _ = x.shape
        queries = self.W_query(query_latent).view(b, num_tokens, self.num_heads, -1)
        queries = rotate_pairs(queries, cos[:, :, None], sin[:, :, None])  # same shape
        dots = torch.matmul(  # every head against every entry
            queries.float(), keys.float().transpose(-1, -2).unsqueeze(1)
        )  # (B, T, H_I, d_I) @ (B, 1, d_I, E) -> (B, T, H_I, E)
        dots = torch.relu(dots) * self.head_dim**-0.5  # (B, T, H_I, E)
        weights = self.W_head_weights(x).float() * self.num_heads**-0.5  # (B, T, H_I)
        return (dots * weights.unsqueeze(-1)).sum(dim=2)  # (B, T, E)

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, head_dim={self.head_dim}"
# --8<-- [end:indexer]
