# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Block-sparse attention (MiniMax-M3): each query attends to a few blocks of keys that
an indexer picks, not to every earlier token.

Shapes: ``B`` batch, ``T`` new tokens (queries), ``T_k`` keys held, ``H`` query heads,
``H_kv`` key/value heads (``G = H // H_kv`` query heads each), ``d_h`` one head's width,
``H_I = H_kv`` indexer heads of width ``d_I``, ``b = block_size``, ``n`` blocks
(``ceil(T_k / b)``), ``k = top_k`` blocks kept per query and indexer head.

    q_{t,j} = RoPE(norm(x_t W_query))_j        (B, H_I, T, d_I)   one per indexer head
    k_s     = RoPE(norm(x_s W_key))            (B, T_k, d_I)      one per token
    I_{t,j,s} = q_{t,j} . k_s                  every earlier token s, no scale
    J_{t,j,c} = max over s in block c of I_{t,j,s}        (B, H_I, T, n)
    S_{t,j} = the k blocks of largest J, with the query's own block (and the
              ``local_blocks - 1`` before it, and the first ``init_blocks``) always in
    head_h(t) = softmax over the tokens of S_{t, h // G} of the usual scores

Each indexer head chooses for one key/value head: the ``G`` query heads that share a
key/value head share its blocks. The blocks are counted from each sequence's first
real token, and a padding token never scores: a left-padded row picks what its prompt
alone picks. (transformers 5.23 counts the key blocks from the batch's first slot and
lets padding keys win a block's maximum: its left-padded rows pick other blocks.)

Two forms give the same output, each the other's oracle:

- **masked** (``gathered=False``): the dense scores of every key, the tokens outside
  the chosen blocks hidden by the mask (transformers' eager form). No arithmetic is
  saved.
- **gathered** (``gathered=True``): for each query and key/value head, the keys and
  values of its ``k`` blocks are copied out (``k b`` of them) and attended over:
  ``k b`` scores per query and head instead of ``T_k``.

``BlockSparseCache`` holds a ``KVCache`` and the indexer's key of every token
(``d_I`` more numbers per token and layer).

The attention itself is ``ModernAttention``'s (grouped queries, QK-norm, partial rotary
positions: MiniMax-M3's norms scale by ``(1 + w)``). ``from_hf_config`` reads a
MiniMax-M3 config (transformers' ``MiniMaxM3VLTextConfig``, or a ``config.json`` with
its ``text_config``); ``from_hf_state_dict`` renames the weights of
``MiniMaxM3VLAttention``, its ``indexer`` included.

Builds on ``modern.py``, ``attention_variants.py``, ``checks.py``, ``grouped_query.py``,
``hf_config.py``, ``kv_cache.py`` and ``rope.py`` of this package (and what they build
on), imported relatively: copy them with this file, under any package name (its API page
offers the set as one download). MIT licence: keep the first two lines of each file.
"""

from __future__ import annotations

import torch
from torch import nn

from . import modern
from .attention_variants import (
    UnitOffsetRMSNorm,
    content_positions,
    variant_attention_explicit,
)
from .checks import check_flag, check_inputs, check_size
from .grouped_query import (
    attention_mask,
    check_cache,
    grouped_attention_fast,
    held_padding,
)
from .hf_config import block_sparse_attention_options, rename_weights
from .kv_cache import KVCache
from .modern import ModernAttention
from .rope import apply_rope

INDEXER_NAMES = {  # transformers' MiniMaxM3VLIndexer name -> ours
    "q_proj": "W_query",
    "k_proj": "W_key",
    "q_norm": "query_norm",
    "k_norm": "key_norm",
}
# ModernAttention options a block-sparse layer does not have (MiniMax-M3 has none)
NOT_HERE = ("window", "chunk_size", "sinks", "softcap", "output_gate", "kv_shared",
            "temperature_tuning", "softplus_gate", "values_from_keys", "value_head_dim",
            "rope_interleave")


def from_hf_state_dict(state_dict: dict, prefix: str = "") -> dict:
    """Rename one ``MiniMaxM3VLAttention`` layer's weights (its indexer's included) to
    ``BlockSparseAttention``'s; ``prefix`` as in ``modern.from_hf_state_dict``."""
    if not isinstance(state_dict, dict):
        raise TypeError(f"state_dict must be a dict, got {type(state_dict).__name__}")
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str, got {type(prefix).__name__}")
    inner = prefix + "indexer."
    indexer = {key: v for key, v in state_dict.items() if key.startswith(inner)}
    rest = {key: v for key, v in state_dict.items() if not key.startswith(inner)}
    renamed = modern.from_hf_state_dict(rest, prefix)
    names = rename_weights(indexer, inner, INDEXER_NAMES, "a block indexer")
    renamed.update({f"indexer.{key}": tensor for key, tensor in names.items()})
    return renamed


# --8<-- [start:indexer]
class BlockIndexer(nn.Module):
    r"""Scores every earlier token for each query with a few small heads; the
    scores of a block's tokens pool into the block's score by their maximum.

    $$J_{t,j,c} = \max_{s \in \text{block } c,\ s \le t}
        \hat q_{t,j} \cdot \hat k_s$$

    with $\hat q_{t,j}$ head $j$'s query and $\hat k_s$ one key per token, both after a
    ``(1 + w)`` RMSNorm and rotary positions on their first ``d_rot`` dimensions.

    Args:
        d_in: width of each input token vector.
        num_heads: ``H_I``.
        head_dim: ``d_I``.
        norm_eps: the norms' epsilon.

    Shapes:
        ``keys(x, rope, start)``: ``x`` ``(B, T, d_in)`` -> ``(B, T, d_I)``.
        ``scores(x, keys, rope, start)``: ``keys`` ``(B, T_k, d_I)`` ->
        ``(B, H_I, T, T_k)`` float32, nothing hidden yet. ``rope`` is the
        attention's ``rope.RotaryEmbedding`` (the same angles).
    """

    def __init__(self, d_in: int, num_heads: int, head_dim: int, *, norm_eps: float):
        for name, value in (("d_in", d_in), ("num_heads", num_heads),
                            ("head_dim", head_dim)):
            check_size(name, value)
        super().__init__()
        self.num_heads, self.head_dim = num_heads, head_dim
        self.W_query = nn.Linear(d_in, num_heads * head_dim, bias=False)
        self.W_key = nn.Linear(d_in, head_dim, bias=False)  # one key for all heads
        self.query_norm = UnitOffsetRMSNorm(head_dim, eps=norm_eps)
        self.key_norm = UnitOffsetRMSNorm(head_dim, eps=norm_eps)

    def keys(self, x, rope, start: int) -> torch.Tensor:
        """``k_s`` for the tokens ``x`` ``(B, T, d_in)`` at ``start..``:
        ``(B, T, d_I)``."""
        key = self.key_norm(self.W_key(x)).unsqueeze(1)  # (B, 1, T, d_I)
        return self.turn(key, rope, start).squeeze(1)  # (B, T, d_I)

    def scores(self, x, keys, rope, start: int) -> torch.Tensor:
        """``q_{t,j} . k_s`` for the new tokens ``x`` against ``keys`` (held and
        new): ``(B, H_I, T, T_k)`` float32."""
        b, num_tokens, _ = x.shape  # (B, T, d_in)
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, -1)
        queries = self.query_norm(queries).transpose(1, 2)  # (B, H_I, T, d_I)
        queries = self.turn(queries, rope, start)  # (B, H_I, T, d_I)
        keys = keys.float().transpose(1, 2).unsqueeze(1)  # (B, 1, d_I, T_k)
        return queries.float() @ keys  # (B, H_I, T, T_k)

    @staticmethod
    def turn(x, rope, start: int) -> torch.Tensor:
        """The attention's rotary angles (``rope``, a ``RotaryEmbedding``) on the
        first ``d_rot`` dimensions of ``x`` ``(B, H, T, d_I)``; the rest pass."""
        if rope is None:
            return x  # (B, H, T, d_I)
        return apply_rope(x, rope.cos, rope.sin, start)  # (B, H, T, d_I)

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, head_dim={self.head_dim}"
# --8<-- [end:indexer]



# --8<-- [start:select]
def select_blocks(
    scores: torch.Tensor,
    key_blocks: torch.Tensor,
    query_blocks: torch.Tensor,
    top_k: int,
    local_blocks: int = 1,
    init_blocks: int = 0,
    *,
    num_blocks: int | None = None,
) -> torch.Tensor:
    """The blocks each query keeps, per indexer head: ``(B, H_I, T, min(k, n))`` long
    block numbers, ``-1`` for an empty slot (fewer than ``k`` blocks to choose from).

    ``scores`` ``(B, H_I, T, T_k)`` with every key the query may not read (the future,
    padding) at ``-inf``; ``key_blocks`` ``(B or 1, T_k)`` and ``query_blocks``
    ``(B or 1, T)`` the block of each key and query (position // block size, counted
    from the row's first real token). A block scores the maximum of its keys'
    scores; the query's own block and the ``local_blocks - 1`` before it, and the first
    ``init_blocks`` blocks that are not in its future, are always kept; the other slots
    go to the best scores. Ties are broken as ``torch.topk`` breaks them.
    ``num_blocks``: the number of blocks, ``key_blocks.max() + 1``, when the caller
    knows it (else it is read back from the device).
    """
    b, heads, num_tokens, num_keys = scores.shape
    if num_blocks is None:  # n: every block that holds a key
        num_blocks = int(key_blocks.max()) + 1
    where = key_blocks[:, None, None, :].expand(b, heads, num_tokens, num_keys)
    pooled = scores.new_full((b, heads, num_tokens, num_blocks), -torch.inf)
    pooled = pooled.scatter_reduce(-1, where, scores, "amax")  # (B, H_I, T, n)
    block = torch.arange(num_blocks, device=scores.device)  # (n,)
    distance = query_blocks[:, None, :, None] - block  # (B or 1, 1, T, n): blocks back
    always = (distance >= 0) & (distance < local_blocks)  # its own block and before
    always |= (block < init_blocks) & (distance >= 0)  # the first blocks, if not ahead
    pooled = pooled.masked_fill(always, torch.inf)  # (B, H_I, T, n)
    best, chosen = pooled.topk(min(top_k, num_blocks), dim=-1)  # (B, H_I, T, k)
    return chosen.masked_fill(best == -torch.inf, -1)  # (B, H_I, T, k)
# --8<-- [end:select]


class BlockSparseCache:
    """A ``KVCache`` (``.kv``) and, beside it, the indexer's key of every token
    (``.index_keys`` ``(B, T_max, d_I)``): the indexer scores every held token.

    ``append(keys, values, index_key, padding_mask=None)`` takes ``(B, H_kv, T_new,
    d_h)`` twice, ``(B, T_new, d_I)`` and an optional ``(B, T_new)`` bool mask; it
    returns views ``(B, H_kv, length, d_h)`` twice, ``(B, length, d_I)`` and
    ``(B, length)``. ``length`` is the position of the next token.
    """

    def __init__(self, batch_size, num_heads, head_dim, index_head_dim, context_length,
                 *, dtype=torch.float32, device=None) -> None:
        check_size("index_head_dim", index_head_dim)
        self.kv = KVCache(batch_size, num_heads, head_dim, context_length,
                          dtype=dtype, device=device)
        self.index_keys = torch.zeros(
            batch_size, context_length, index_head_dim, dtype=dtype, device=device
        )  # (B, T_max, d_I)

    @property
    def length(self) -> int:
        return self.kv.length

    @property
    def has_padding(self) -> bool:
        """Whether a padding flag False was ever appended (``KVCache``'s)."""
        return self.kv.has_padding

    @property
    def nbytes(self) -> int:
        """Bytes of the keys, values and indexer keys (flags not counted)."""
        return self.kv.nbytes + self.index_keys.nbytes

    def reset(self) -> None:
        """Forget every token, to start a new sequence; the storage is kept."""
        self.kv.reset()

    def append(self, keys, values, index_key, padding_mask=None):
        """Store the new tokens; return ``(keys, values, index_keys, key_padding)``."""
        batch, _, width = self.index_keys.shape
        num_new = keys.shape[2] if isinstance(keys, torch.Tensor) else None
        if not isinstance(index_key, torch.Tensor) or tuple(index_key.shape) != (
            batch, num_new, width
        ):
            raise ValueError(
                f"index_key must be a tensor of shape (B={batch}, T_new={num_new}, "
                f"d_I={width}), got "
                f"{getattr(index_key, 'shape', type(index_key).__name__)}"
            )
        start = self.length
        keys, values, padding = self.kv.append(keys, values, padding_mask)
        self.index_keys[:, start : self.length] = index_key  # (B, T_new, d_I)
        return keys, values, self.index_keys[:, : self.length], padding


# --8<-- [start:class]
class BlockSparseAttention(ModernAttention):
    r"""Grouped-query attention over the blocks of keys an indexer picks.

    $$\mathrm{head}_h(t) = \sum_{s \in S_{t,g}} \mathrm{softmax}_{s \in S_{t,g}}
        \big(\tfrac{q_h \cdot k_s}{\sqrt{d_h}}\big)\, v_s, \qquad g = \lfloor h / G
        \rfloor$$

    with $S_{t,g}$ the tokens (at or before $t$) of the blocks indexer head $g$ keeps
    for query $t$ (``select_blocks``), and the rest as in ``ModernAttention``.

    Args:
        d_in: width of each input token vector (the model width).
        d_out: width of the output.
        context_length: the most positions, cached ones included.
        dropout: probability of dropping an attention weight while training.
        num_heads: ``H``, query heads.
        num_kv_heads: ``H_kv``, key/value heads; must divide ``num_heads``.
        index_n_heads: ``H_I``; must equal ``num_kv_heads`` (one choice per
            key/value head, as in MiniMax-M3).
        index_head_dim: ``d_I``, at least the dimensions that turn.
        block_size: ``b``, the keys pooled into one block.
        top_k: ``k``, the blocks kept per query, the always-kept ones included.
        local_blocks: the query's own block and the ``local_blocks - 1`` before it
            are always kept (MiniMax-M3: 1).
        init_blocks: the first blocks, always kept (an attention sink; 0 in
            MiniMax-M3, whose transformers code has no such blocks).
        gathered: attend over the chosen blocks' keys only (the gathered form)
            rather than over all with the rest masked; the same result.
        **options: ``ModernAttention``'s other options (``head_dim``,
            ``qk_norm``, ``norm_unit_offset``, ``partial_rotary_factor``,
            ``rope_base``, ``fast_path``, ...); a window, chunks, sinks, a soft cap,
            gates and shared keys are refused.

    Shapes:
        ``forward(x, padding_mask=None, *, cache=None)``: ``x`` ``(B, T, d_in)``,
        ``padding_mask`` ``(B, T)`` bool (True = real token, padding on the left),
        output ``(B, T, d_out)``. With a ``BlockSparseCache``, ``x`` holds only the
        new tokens, at positions ``cache.length..``.
    """

    def __init__(
        self, d_in: int, d_out: int, context_length: int, dropout: float,
        num_heads: int, num_kv_heads: int, *, index_n_heads: int,
        index_head_dim: int, block_size: int, top_k: int, local_blocks: int = 1,
        init_blocks: int = 0, gathered: bool = False, **options: object,
    ) -> None:
        for name in NOT_HERE:
            if options.get(name) not in (None, False):
                raise ValueError(
                    f"{name}={options[name]!r} is not implemented with block-sparse "
                    "attention"
                )
        for name, value in (("index_n_heads", index_n_heads),
                            ("block_size", block_size), ("top_k", top_k)):
            check_size(name, value)
        for name, value in (("local_blocks", local_blocks),
                            ("init_blocks", init_blocks)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, got {value!r}")
        check_flag("gathered", gathered)
        if index_n_heads != num_kv_heads:
            raise ValueError(
                f"index_n_heads={index_n_heads} must equal "
                f"num_kv_heads={num_kv_heads}: each indexer head chooses the blocks "
                "of one key/value head"
            )
        super().__init__(d_in, d_out, context_length, dropout, num_heads, num_kv_heads,
                         **options)
        check_size("index_head_dim", index_head_dim)
        turned = 0 if self.rope is None else self.rope.cos.shape[-1]  # d_rot
        if index_head_dim < turned:
            raise ValueError(
                f"index_head_dim must be at least the {turned} dimensions that turn, "
                f"got {index_head_dim}"
            )
        norm_eps = options.get("norm_eps", 1e-6)
        self.indexer = BlockIndexer(d_in, index_n_heads, index_head_dim,
                                    norm_eps=norm_eps)
        self.block_size, self.top_k = block_size, top_k
        self.local_blocks, self.init_blocks = local_blocks, init_blocks
        self.gathered = gathered  # may be switched later

    @classmethod
    def from_hf_config(cls, config, layer_idx: int = 0, **overrides):
        """The attention of sparse layer ``layer_idx`` of a MiniMax-M3 config
        (transformers object or ``config.json`` dict)."""
        return cls(**{**block_sparse_attention_options(config, layer_idx),
                      **overrides})

    # --8<-- [start:forward]
    def forward(self, x, padding_mask=None, *, cache=None):
        """Attend over ``x`` ``(B, T, d_in)``; return ``(B, T, d_out)``."""
        for name in ("fast_path", "gathered"):
            check_flag(name, getattr(self, name))
        weight = self.W_query.weight
        check_inputs(x, padding_mask, weight.shape[1], self.context_length, weight)
        heads, kv_heads = self.heads_here()
        if cache is not None and not isinstance(cache, BlockSparseCache):
            raise TypeError(
                f"cache must be a BlockSparseCache or None, got {type(cache).__name__}"
            )
        if cache is not None:
            check_cache(cache.kv, kv_heads, self.head_dim, x)
        start = 0 if cache is None else cache.length  # position of the first new token
        b, num_tokens, _ = x.shape  # (B, T, d_in)
        if start + num_tokens > self.context_length:
            raise ValueError(
                f"positions {start}..{start + num_tokens - 1} go beyond "
                f"context_length={self.context_length}"
            )
        queries = self.W_query(x).view(b, num_tokens, heads, -1)  # (B, T, H, d_h)
        if self.q_norm is not None:
            queries = self.q_norm(queries)  # (B, T, H, d_h)
        queries = self.turn(queries.transpose(1, 2), start)  # (B, H, T, d_h)
        keys, values = self.keys_values(x, kv_heads, start)  # (B, H_kv, T, d_h)
        with torch.no_grad():
            index_key = self.indexer.keys(x, self.rope, start)  # (B, T, d_I)
        if cache is not None:  # held and new tokens
            keys, values, index_keys, padding_mask = cache.append(
                keys, values, index_key, padding_mask
            )  # (B, H_kv, T_k, d_h) twice, (B, T_k, d_I), (B, T_k)
            padding_mask = held_padding(cache, padding_mask)  # None: no padding held
        else:
            index_keys = index_key  # (B, T, d_I)
        num_keys = keys.shape[2]  # T_k: every key from position 0
        mask_bool = attention_mask(
            start, num_tokens, 0, num_keys, key_padding=padding_mask, device=x.device,
        )  # (T, T_k) or (B, 1, T, T_k); True = hidden
        key_blocks = content_positions(
            num_keys, 0, padding_mask, device=x.device
        ) // self.block_size  # (B or 1, T_k): counted from each row's first real token
        num_blocks = None  # without padding, known here: no read back from the device
        if padding_mask is None:
            num_blocks = (num_keys - 1) // self.block_size + 1
        with torch.no_grad():
            scores = self.indexer.scores(x, index_keys, self.rope, start)  # (.., T_k)
            scores = scores.masked_fill(mask_bool, -torch.inf)  # future and padding
            chosen = select_blocks(
                scores, key_blocks, key_blocks[:, start:], self.top_k,
                self.local_blocks, self.init_blocks, num_blocks=num_blocks,
            )  # (B, H_kv, T, k): -1 = an empty slot
        if self.gathered:
            context_vec = self.attend_gathered(
                queries, keys, values, chosen, mask_bool, padding_mask
            )  # (B, H, T, d_h)
        else:
            kept = kept_keys(chosen, key_blocks, num_blocks)  # (B, H_kv, T, T_k)
            hidden = mask_bool | ~kept  # (B, H_kv, T, T_k)
            context_vec = self.attend_masked(queries, keys, values, hidden)
        context_vec = context_vec.transpose(1, 2).reshape(b, num_tokens, -1)
        return self.out_proj(context_vec)  # (B, T, H d_h) -> (B, T, d_out)
    # --8<-- [end:forward]

    def attend_masked(self, queries, keys, values, hidden) -> torch.Tensor:
        """Dense attention with ``hidden`` ``(B, H_kv, T, T_k)`` (one mask per
        key/value head, shared by its ``G`` query heads): ``(B, H, T, d_h)``."""
        if not self.fast_path:
            return variant_attention_explicit(
                queries, keys, values, hidden, self.dropout, scale=self.scale
            )  # (B, H, T, d_h)
        group = queries.shape[1] // keys.shape[1]  # G
        if queries.shape[2] > 1:  # the kernel wants one mask row per query head
            hidden = hidden.repeat_interleave(group, dim=1)  # (B, H, T, T_k)
        return grouped_attention_fast(
            queries, keys, values, hidden, self.dropout.p if self.training else 0.0,
            scale=self.scale,
        )  # (B, H, T, d_h)

    # --8<-- [start:gathered]
    def attend_gathered(self, queries, keys, values, chosen, mask_bool, padding_mask):
        """Each query and key/value head attends over the ``k b`` keys of its chosen
        blocks, copied out of ``keys`` and ``values`` ``(B, H_kv, T_k, d_h)``:
        ``(B, H, T, d_h)``."""
        b, num_heads, num_tokens, head_dim = queries.shape
        kv_heads, num_keys = keys.shape[1], keys.shape[2]
        size = self.block_size
        pads = 0 if padding_mask is None else (~padding_mask).sum(-1)  # (B,): left
        offsets = torch.arange(size, device=keys.device)  # (b,)
        slots = chosen[..., None] * size + offsets  # (B, H_kv, T, k, b): from the start
        slots = (slots + torch.as_tensor(pads)[..., None, None, None, None])
        slots = slots.flatten(-2)  # (B, H_kv, T, k b): key positions in the cache
        if mask_bool.dim() == 2:  # (T, T_k) -> (B, 1, T, T_k)
            mask_bool = mask_bool.expand(b, 1, -1, -1)
        inside = (chosen[..., None] >= 0).expand(-1, -1, -1, -1, size).flatten(-2)
        inside = inside & (slots < num_keys)  # (B, H_kv, T, k b): a chosen block's
        slots = slots.where(inside, 0)  # (B, H_kv, T, k b): any key where none
        hidden = mask_bool.expand(-1, kv_heads, -1, -1).gather(-1, slots)
        hidden |= ~inside  # (B, H_kv, T, k b): the future, padding, empty slots
        picked = slots.flatten(2)[..., None]  # (B, H_kv, T k b, 1)
        keys = keys.gather(2, picked.expand(-1, -1, -1, head_dim))  # (B,H_kv,T k b,d_h)
        values = values.gather(2, picked.expand(-1, -1, -1, values.shape[-1]))
        keys = keys.view(b, kv_heads, num_tokens, -1, head_dim)  # (B,H_kv,T,k b,d_h)
        values = values.view(b, kv_heads, num_tokens, -1, values.shape[-1])
        rows = queries.view(b, kv_heads, -1, num_tokens, head_dim)  # (B,H_kv,G,T,d_h)
        attn_scores = torch.einsum("bkgtd,bktsd->bkgts", rows, keys) * self.scale
        hidden = hidden[:, :, None]  # (B, H_kv, 1, T, k b): shared by the G heads
        attn_scores = attn_scores.masked_fill(hidden, -torch.inf)  # (B,H_kv,G,T,k b)
        attn_weights = torch.softmax(attn_scores, dim=-1).masked_fill(hidden, 0.0)
        attn_weights = self.dropout(attn_weights)  # (B, H_kv, G, T, k b)
        context_vec = torch.einsum("bkgts,bktsv->bkgtv", attn_weights, values)
        return context_vec.reshape(b, num_heads, num_tokens, -1)  # (B, H, T, d_h)
    # --8<-- [end:gathered]

    def make_cache(self, batch_size: int) -> BlockSparseCache:
        """An empty ``BlockSparseCache`` for this layer."""
        weight = self.W_query.weight
        return BlockSparseCache(
            batch_size, self.heads_here()[1], self.head_dim, self.indexer.head_dim,
            self.context_length, dtype=weight.dtype, device=weight.device,
        )

    def extra_repr(self) -> str:
        return (
            f"{super().extra_repr()}, block_size={self.block_size}, "
            f"top_k={self.top_k}, "
            f"local_blocks={self.local_blocks}, init_blocks={self.init_blocks}, "
            f"gathered={self.gathered}"
        )


# --8<-- [end:class]


def kept_keys(
    chosen: torch.Tensor, key_blocks: torch.Tensor, num_blocks: int | None = None
) -> torch.Tensor:
    """``(B, H_I, T, T_k)`` bool, True at the keys whose block is in ``chosen``
    ``(B, H_I, T, k)`` (``-1`` = none); ``key_blocks`` ``(B or 1, T_k)``;
    ``num_blocks`` its maximum plus one, when known."""
    b, heads, num_tokens, _ = chosen.shape
    if num_blocks is None:  # n
        num_blocks = int(key_blocks.max()) + 1
    kept = torch.zeros(b, heads, num_tokens, num_blocks + 1, dtype=torch.bool,
                       device=chosen.device)  # (B, H_I, T, n + 1): a spare column
    kept.scatter_(-1, chosen.masked_fill(chosen < 0, num_blocks), True)
    where = key_blocks[:, None, None, :].expand(b, heads, num_tokens, -1)
    return kept[..., :num_blocks].gather(-1, where)  # (B, H_I, T, T_k)
