# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Grouped-query attention: fewer key/value heads than query heads.

Shapes: ``B`` batch, ``T`` new tokens, ``T_k`` keys attended to (``T`` without a cache),
``d_in`` input width, ``d_out`` output width, ``H = num_heads`` query heads,
``H_kv = num_kv_heads`` key/value heads, ``G = H // H_kv`` query heads per key/value
head, ``d_h = d_out // H`` one head's width.

    Q = X W_query                                 (B, T, H d_h) -> (B, H, T, d_h)
    K, V = X W_key, X W_value                     (B, T, H_kv d_h) -> (B, H_kv, T, d_h)
    head_h = softmax(Q_h K_{h//G}^T / sqrt(d_h) + M) V_{h//G}            (B, H, T, d_h)
    out = concat(heads) W_out + b_out              (B, T, d_out)

Query head ``h`` reads key/value head ``h // G``: heads ``0..G-1`` share the first, and
so on (the order of Llama, Mistral and Qwen checkpoints). ``num_kv_heads == num_heads``
is multi-head attention; ``num_kv_heads == 1`` is multi-query attention. A KV cache
stores ``H_kv`` heads, so it is ``G`` times smaller than multi-head attention's.

Masks: ``padding_mask`` is True for a real token, False for padding; ``mask_bool``
inside is True where a query may not attend a key. A query with no key left gets an
all-zero context vector instead of NaN.

A cache is any object with ``length`` and ``append`` like ``KVCache`` in
``kv_cache.py``.

Builds on ``checks.py`` of this package, imported relatively: copy it with this file,
under any package name (its API page offers the set as one download). MIT licence: keep
the first two lines of each file.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .checks import (
    check_attention_arguments,
    check_inputs,
    check_size,
    heads_here,
    rows_here,
)


def check_num_kv_heads(num_heads: int, num_kv_heads: object) -> None:
    """Raise a clear error unless ``num_kv_heads`` is a positive divisor of
    ``num_heads``."""
    check_size("num_kv_heads", num_kv_heads)
    if num_heads % num_kv_heads != 0:
        raise ValueError(
            "num_kv_heads must divide num_heads so that every key/value head serves "
            f"the same number of query heads, got num_heads={num_heads}, "
            f"num_kv_heads={num_kv_heads}"
        )


def check_cache(cache: object, num_kv_heads: int, head_dim: int, x: torch.Tensor):
    """Raise a clear error unless ``cache`` holds ``num_kv_heads`` heads of
    ``head_dim``."""
    held = getattr(cache, "keys", None)
    if not (
        callable(getattr(cache, "append", None))
        and isinstance(getattr(cache, "length", None), int)
        and isinstance(held, torch.Tensor)
        and held.dim() == 4
    ):
        raise TypeError(
            "cache must be a KVCache or RollingKVCache or None, "
            f"got {type(cache).__name__}"
        )
    if (held.shape[1], held.shape[3]) != (num_kv_heads, head_dim):
        raise ValueError(
            f"cache must hold num_kv_heads={num_kv_heads} heads of width "
            f"head_dim={head_dim}, got {held.shape[1]} heads of width {held.shape[3]}"
        )
    if held.dtype != x.dtype or held.device != x.device:
        raise TypeError(
            f"cache must be {x.dtype} on {x.device} like the module, "
            f"got {held.dtype} on {held.device}"
        )


def held_padding(cache, key_padding):
    """The key padding ``(B, T_k)`` a cache handed back, or None when the cache says
    that no token it holds is padding (its ``has_padding`` is False): then there is
    nothing to mask, and no mask to build. Without a cache, or from a cache that does
    not say, ``key_padding`` as it is."""
    if cache is not None and getattr(cache, "has_padding", True) is False:
        return None
    return key_padding


# --8<-- [start:mask]
def attention_mask(
    query_start: int,
    num_queries: int,
    key_start: int,
    num_keys: int,
    *,
    causal: bool = True,
    window: int | None = None,
    key_padding: torch.Tensor | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """True where a query may not attend a key: ``(T, T_k)``, or ``(B, 1, T, T_k)``.

    Queries sit at positions ``query_start..``, keys at ``key_start..``. A key is hidden
    when it is in the future (``causal``), ``window`` or more positions back, or padding
    (``key_padding`` ``(B, T_k)``, True = real token).
    """
    q_pos = torch.arange(query_start, query_start + num_queries, device=device)  # (T,)
    k_pos = torch.arange(key_start, key_start + num_keys, device=device)  # (T_k,)
    distance = q_pos[:, None] - k_pos[None, :]  # (T, T_k): how far back each key is
    mask_bool = torch.zeros_like(distance, dtype=torch.bool)  # (T, T_k)
    if causal:
        mask_bool |= distance < 0  # (T, T_k): the future
    if window is not None:
        mask_bool |= distance >= window  # (T, T_k): too far back
    if key_padding is not None:
        mask_bool = mask_bool | ~key_padding[:, None, None, :]  # -> (B, 1, T, T_k)
    return mask_bool
# --8<-- [end:mask]


# --8<-- [start:explicit]
def grouped_attention_explicit(queries, keys, values, mask_bool, dropout):
    """``softmax(Q K^T / sqrt(d_h) + M) V`` with each key/value head shared by ``G``
    query heads. ``queries`` ``(B, H, T, d_h)``, ``keys`` and ``values``
    ``(B, H_kv, T_k, d_h)``, ``mask_bool`` broadcasting to ``(B, 1, T, T_k)``, or None
    when no key is hidden from any query; returns ``(B, H, T, d_h)``.
    """
    b, num_heads, num_tokens, head_dim = queries.shape
    num_kv_heads = keys.shape[1]
    group = num_heads // num_kv_heads  # G query heads per key/value head
    # (B, H, T, d_h) -> (B, H_kv, G T, d_h): the G heads of a group become G T rows of
    # queries for their one key/value head, which is read where it lies, never copied
    rows = queries.reshape(b, num_kv_heads, group * num_tokens, head_dim)
    attn_scores = rows @ keys.transpose(-2, -1)  # (B, H_kv, G T, T_k)
    attn_scores /= head_dim**0.5  # (B, H_kv, G T, T_k)
    if mask_bool is not None:  # (T, T_k) or (B, 1, T, T_k): the same for each head
        if mask_bool.dim() == 4:  # (B, 1, T, T_k) -> (B, 1, 1, T, T_k)
            mask_bool = mask_bool.unsqueeze(2)
        per_head = attn_scores.view(b, num_kv_heads, group, num_tokens, -1)
        per_head.masked_fill_(mask_bool, -torch.inf)  # (B, H_kv, G, T, T_k), in place
    attn_weights = torch.softmax(attn_scores, dim=-1)  # (B, H_kv, G T, T_k)
    if mask_bool is not None:  # a row of NaN (no key left) -> zeros
        attn_weights = attn_weights.view(b, num_kv_heads, group, num_tokens, -1)
        attn_weights = attn_weights.masked_fill(mask_bool, 0.0)  # (B,H_kv,G,T,T_k)
    attn_weights = dropout(attn_weights)  # (B, H_kv, G, T, T_k) or (B, H_kv, G T, T_k)
    context_vec = attn_weights.view(b, num_kv_heads, group * num_tokens, -1) @ values
    return context_vec.view(b, num_heads, num_tokens, head_dim)  # (B, H, T, d_h)
# --8<-- [end:explicit]


# --8<-- [start:fast]
def grouped_attention_fast(
    queries, keys, values, mask_bool, dropout_p, causal=False, *, scale=None
):
    """The same result in one fused call; ``enable_gqa`` shares each key/value head
    with its ``G`` query heads (the fused CPU kernel reads it in place; the math
    fallback repeats it ``G`` times). ``mask_bool`` None: every
    query may attend every key, or, with ``causal``, every key up to its own.
    ``scale`` replaces ``1 / sqrt(d_h)`` when given.

    Decoding one token, the ``G`` query heads of a group become ``G`` query rows of
    one head: the kernel then reads each key/value head once for all of them."""
    b, num_heads, num_tokens, _ = queries.shape
    num_kv_heads = keys.shape[1]
    if num_tokens == 1 and not causal and num_heads > num_kv_heads:
        rows = queries.reshape(b, num_kv_heads, num_heads // num_kv_heads, -1)
        context_vec = grouped_attention_fast(
            rows, keys, values, mask_bool, dropout_p, scale=scale
        )  # (B, H_kv, G, d_v): one row per query head of the group
        return context_vec.reshape(b, num_heads, 1, -1)  # (B, H, 1, d_v)
    if mask_bool is None:  # the kernel makes the causal mask itself, by tiles
        return F.scaled_dot_product_attention(
            queries, keys, values, dropout_p=dropout_p, is_causal=causal,
            scale=scale, enable_gqa=True,
        )  # (B, H, T, d_h)
    allowed = ~mask_bool  # the kernel reads True as "may attend"
    has_key = allowed.any(dim=-1, keepdim=True)  # (B, 1, T, 1) or (T, 1)
    context_vec = F.scaled_dot_product_attention(  # no key: attend to all, then zero
        queries, keys, values, attn_mask=allowed | ~has_key, dropout_p=dropout_p,
        scale=scale, enable_gqa=True,
    )  # (B, H, T, d_h)
    return context_vec.masked_fill(~has_key, 0.0)  # (B, H, T, d_h)
# --8<-- [end:fast]


# --8<-- [start:class]
class GroupedQueryAttention(nn.Module):
    r"""Causal self-attention whose ``num_kv_heads`` key/value heads each serve
    ``G = num_heads // num_kv_heads`` query heads.

    $$\mathrm{head}_h = \mathrm{softmax}\left(
        \frac{Q_h K_{\lfloor h/G \rfloor}^\top}{\sqrt{d_h}} + M\right)
        V_{\lfloor h/G \rfloor},
    \qquad \mathrm{out} = [\mathrm{head}_1, \dots, \mathrm{head}_H]\,W_{out} + b_{out}$$

    Args:
        d_in: width of each input token vector.
        d_out: width of the output, split into ``num_heads`` query heads.
        context_length: the most tokens a sequence may have.
        dropout: probability of dropping an attention weight while training.
        num_heads: query heads ``H``; must divide ``d_out``.
        num_kv_heads: key/value heads ``H_kv``; must divide ``num_heads``. Equal to
            ``num_heads``: multi-head attention; 1: multi-query attention.
        qkv_bias: add a bias to the query, key and value projections.
        causal: mask the future.
        fast_path: use ``scaled_dot_product_attention`` (same result).

    Shapes:
        ``forward(x, padding_mask=None, *, cache=None)``: ``x`` ``(B, T, d_in)``,
        ``padding_mask`` ``(B, T)`` bool (True = real token), output ``(B, T, d_out)``.
        With a cache, ``x`` holds only the new tokens; their keys and values
        ``(B, H_kv, T, d_h)`` are appended to it.
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        num_kv_heads: int,
        qkv_bias: bool = False,
        *,
        causal: bool = True,
        fast_path: bool = False,
    ) -> None:
        check_attention_arguments(
            d_in, d_out, context_length, dropout, num_heads, qkv_bias, causal, fast_path
        )
        check_num_kv_heads(num_heads, num_kv_heads)
        super().__init__()
        self.d_out = d_out
        self.context_length = context_length
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = d_out // num_heads  # d_h
        self.causal = causal
        self.fast_path = fast_path
        kv_width = num_kv_heads * self.head_dim  # H_kv * d_h: G times less than d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)  # weight (d_out, d_in)
        self.W_key = nn.Linear(d_in, kv_width, bias=qkv_bias)  # (H_kv * d_h, d_in)
        self.W_value = nn.Linear(d_in, kv_width, bias=qkv_bias)  # (H_kv * d_h, d_in)
        self.out_proj = nn.Linear(d_out, d_out)  # weight (d_out, d_out)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, padding_mask=None, *, cache=None):
        """Attend over ``x`` ``(B, T, d_in)``; return ``(B, T, d_out)``."""
        weight = self.W_query.weight
        check_inputs(x, padding_mask, weight.shape[1], self.context_length, weight)
        # All the heads, or this process's share when tensor parallelism split them.
        heads, kv_heads = heads_here(
            self.num_heads, self.num_kv_heads, rows_here(self.W_query),
            rows_here(self.W_key), self.head_dim,
        )
        if cache is not None:
            check_cache(cache, kv_heads, self.head_dim, x)
        b, num_tokens, _ = x.shape  # (B, T, d_in)
        queries = self.W_query(x).view(b, num_tokens, heads, self.head_dim)
        queries = queries.transpose(1, 2)  # (B, T, H, d_h) -> (B, H, T, d_h)
        kv_split = (b, num_tokens, kv_heads, self.head_dim)
        keys = self.W_key(x).view(kv_split).transpose(1, 2)  # (B, H_kv, T, d_h)
        values = self.W_value(x).view(kv_split).transpose(1, 2)  # (B, H_kv, T, d_h)

        start = 0 if cache is None else cache.length  # position of the first new token
        if cache is not None:  # every key held so far: (B, H_kv, T_k, d_h)
            keys, values, padding_mask = cache.append(keys, values, padding_mask)
            padding_mask = held_padding(cache, padding_mask)  # None: no padding held
        num_keys = keys.shape[2]  # T_k
        mask_bool = None  # nothing hidden, or only the future, which the kernel hides
        if padding_mask is not None or self.causal and num_tokens > 1 and (
            not self.fast_path or num_keys != num_tokens
        ):
            mask_bool = attention_mask(
                start, num_tokens, start + num_tokens - num_keys, num_keys,
                causal=self.causal, key_padding=padding_mask, device=x.device,
            )  # (T, T_k) or (B, 1, T, T_k); True = masked
        if self.fast_path:  # no mask tensor when the kernel can make it
            context_vec = grouped_attention_fast(
                queries, keys, values, mask_bool,
                self.dropout.p if self.training else 0.0,
                causal=mask_bool is None and self.causal and num_tokens > 1,
            )  # (B, H, T, d_h)
        else:
            context_vec = grouped_attention_explicit(
                queries, keys, values, mask_bool, self.dropout
            )  # (B, H, T, d_h)
        context_vec = context_vec.transpose(1, 2)  # (B, T, H, d_h)
        context_vec = context_vec.reshape(b, num_tokens, -1)  # (B, T, d_out)
        return self.out_proj(context_vec)  # (B, T, d_out)

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}, "
            f"head_dim={self.head_dim}, causal={self.causal}, "
            f"fast_path={self.fast_path}"
        )


# --8<-- [end:class]
