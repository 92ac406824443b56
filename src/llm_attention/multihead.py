# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Multi-head causal self-attention in one module, with an optional fused fast path.

Shapes: ``B`` batch, ``T`` tokens (at most ``context_length``), ``d_in`` input width,
``d_out`` output width, ``H = num_heads`` heads, ``d_h = d_out // H`` one head's width.

    Q, K, V = X W_query, X W_key, X W_value       (B, T, d_out) -> (B, H, T, d_h)
    head    = softmax(Q K^T / sqrt(d_h) + mask) V  (B, H, T, d_h), all heads at once
    out     = concat(heads) W_out + b_out          (B, T, d_out)

The explicit path spells every step out, as the multi-head chapter teaches it.
``fast_path=True`` gives the same result through
``torch.nn.functional.scaled_dot_product_attention``, which can skip building the
``(T, T)`` attention matrix (see the fast-attention page for when it does). Both
paths share the same parameters, so a state dict saved from one loads into the other.

Masks, and their two opposite boolean conventions:

- the ``mask`` buffer and ``mask_bool`` inside ``forward``: True = masked (the future);
- ``padding_mask`` given to ``forward``: True = a real token that may be attended to,
  False = padding (the convention of ``scaled_dot_product_attention``;
  ``nn.MultiheadAttention``'s ``key_padding_mask`` is the opposite: True = ignore).

A query whose keys are all masked (a padding token at the start of a left-padded
sequence, say) gets an all-zero context vector instead of NaN, so its output is
``out_proj.bias``.

Generating one token at a time, ``forward(x, cache=cache)`` takes only the new tokens
and attends to every token held in a ``KVCache`` (``kv_cache.py``, or any object with
its ``keys``, ``length`` and ``append``): queries at positions ``cache.length..``, keys
and values appended to the cache, the causal mask cut to those rows, and the prompt's
padding mask kept in the cache for later tokens.

Needs torch 2.0 or later. Builds on ``checks.py`` of this package, imported relatively:
copy it with this file, under any package name (its API page offers the set as one
download). MIT licence: keep the first two lines of each file.
"""

from __future__ import annotations


import torch
import torch.nn.functional as F
from torch import nn

from .checks import check_attention_arguments, check_inputs, heads_here, rows_here


def _check_cache(
    cache: object, module: nn.Module, x: torch.Tensor, heads: int
) -> None:
    """Raise a clear TypeError/ValueError if ``cache`` cannot serve ``module``, whose
    ``heads`` heads are computed in this process."""
    held = getattr(cache, "keys", None)
    if not (
        callable(getattr(cache, "append", None))
        and isinstance(getattr(cache, "length", None), int)
        and isinstance(held, torch.Tensor)
        and held.dim() == 4
    ):
        raise TypeError(
            "cache must be a KVCache (llm_attention.kv_cache) or None, "
            f"got {type(cache).__name__}"
        )
    _, held_heads, context_length, head_dim = held.shape
    if held_heads != heads or head_dim != module.head_dim:
        raise ValueError(
            f"cache must hold num_heads={heads} heads of width "
            f"head_dim={module.head_dim}, got {held_heads} heads of width {head_dim}"
        )
    if held.dtype != x.dtype:
        raise TypeError(
            f"cache must have the module's dtype {x.dtype}, got dtype {held.dtype}"
        )
    if held.device != x.device:
        raise ValueError(
            f"cache must be on the module's device {x.device}, got device {held.device}"
        )
    if context_length > module.mask.shape[0]:
        raise ValueError(
            f"cache holds up to {context_length} tokens, more than the module's "
            f"context_length={module.mask.shape[0]}"
        )


# --8<-- [start:cached]
def _cached(cache, keys, values, padding_mask):
    """Without a cache: 0 and the inputs, unchanged.

    With one: the position of the first new token, then every key,
    value and padding flag held once the new ones are appended:
    (B, H, T_k, d_h) twice and (B, T_k), with T_k = cache.length.
    """
    if cache is None:
        return 0, keys, values, padding_mask
    start = cache.length  # the new tokens: positions start..start + T - 1
    keys, values, padding_mask = cache.append(keys, values, padding_mask)
    return start, keys, values, padding_mask
# --8<-- [end:cached]


# --8<-- [start:fast_attention]
def _fast_attention(queries, keys, values, mask_bool=None, *, causal, dropout_p):
    """``softmax(Q K^T / sqrt(d_h) + M) V`` in one fused call.

    ``queries``, ``keys``, ``values`` and the result: ``(B, H, T, d_h)``.
    ``mask_bool``: None (then ``causal`` says whether to mask the future), or
    a bool tensor that broadcasts to ``(B, H, T, T)``, True = masked. A query
    whose keys are all masked gets zeros.
    """
    if mask_bool is None:  # the kernel makes the causal mask itself, by tiles
        return F.scaled_dot_product_attention(
            queries, keys, values, dropout_p=dropout_p, is_causal=causal
        )  # (B, H, T, d_h)
    allowed = ~mask_bool  # the kernel reads True as "may attend": flip it
    has_key = allowed.any(dim=-1, keepdim=True)  # (B, 1, T, 1): any key?
    context_vec = F.scaled_dot_product_attention(  # no key: attend to all...
        queries, keys, values, attn_mask=allowed | ~has_key, dropout_p=dropout_p
    )  # (B, H, T, d_h)
    return context_vec.masked_fill(~has_key, 0.0)  # ...then zero it: no NaN
# --8<-- [end:fast_attention]


# --8<-- [start:class]
class MultiHeadAttention(nn.Module):
    r"""Multi-head (causal) self-attention: every head at once, from shared projections.

    For each head $h$, with $Q_h, K_h, V_h$ the $h$-th slice of width $d_h$ of the
    projections:

    $$\mathrm{head}_h = \mathrm{softmax}\left(
        \frac{Q_h K_h^\top}{\sqrt{d_h}} + M\right) V_h,
    \qquad \mathrm{out} = [\mathrm{head}_1, \dots, \mathrm{head}_H]\,
        W_{out} + b_{out}$$

    where $M$ is $-\infty$ where a query may not attend a key (the future, when
    ``causal``; padding, when a ``padding_mask`` is given) and $0$ elsewhere.

    Args:
        d_in: width of each input token vector.
        d_out: width of the output; split into ``num_heads`` heads of
            ``d_out // num_heads``.
        context_length: the most tokens a sequence may have (size of the causal mask).
        dropout: probability of dropping an attention weight while training,
            in ``[0, 1)``.
        num_heads: number of heads ``H``; must divide ``d_out``.
        qkv_bias: add a bias to the query, key and value projections.
        causal: mask the future, so token ``t`` attends only to tokens ``0..t``.
        fast_path: compute attention with ``scaled_dot_product_attention`` (same
            result within float rounding, same parameters, less memory; as fast or
            faster in the site's measured runs).

    Shapes:
        ``forward(x, padding_mask=None)``: ``x`` is ``(B, T, d_in)`` with
        ``T <= context_length``; ``padding_mask`` is ``(B, T)`` bool, True = real
        token, False = padding (never attended to); the output is ``(B, T, d_out)``.

    Raises:
        TypeError: an argument or input of the wrong type or dtype.
        ValueError: an argument or input of the wrong value or shape.
    """

    # --8<-- [start:init]
    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        qkv_bias: bool = False,
        *,
        causal: bool = True,
        fast_path: bool = False,
    ) -> None:
        check_attention_arguments(
            d_in, d_out, context_length, dropout, num_heads, qkv_bias, causal, fast_path
        )
        super().__init__()
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads  # d_h: each head's share of d_out
        self.causal = causal
        self.fast_path = fast_path
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)  # weight (d_out, d_in)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)  # weight (d_out, d_in)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)  # weight (d_out, d_in)
        self.out_proj = nn.Linear(d_out, d_out)  # mixes the heads; (d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        ones = torch.ones(context_length, context_length, dtype=torch.bool)
        self.register_buffer(  # True above the diagonal = a future key, masked
            "mask",
            torch.triu(ones, diagonal=1),  # (T_max, T_max)
            persistent=False,  # follows from context_length: not in the state dict
        )
    # --8<-- [end:init]

    def forward(
        self,
        x: torch.Tensor,
        padding_mask: torch.Tensor | None = None,
        *,
        cache=None,
    ) -> torch.Tensor:
        """Attend over ``x`` ``(B, T, d_in)``; return ``(B, T, d_out)``.

        With a ``cache``, ``x`` holds only the next ``T`` tokens, which attend to every
        token the cache holds as well as to each other; their keys and values are
        appended to it. Give the prompt's ``padding_mask`` with the prompt: the cache
        keeps it for the tokens that follow.
        """
        weight = self.W_query.weight
        check_inputs(x, padding_mask, weight.shape[1], self.mask.shape[0], weight)
        if cache is not None:  # the heads this process computes: all, or its share
            heads, _ = heads_here(
                self.num_heads, self.num_heads, rows_here(self.W_query),
                rows_here(self.W_key), self.head_dim,
            )
            _check_cache(cache, self, x, heads)
        if self.fast_path:
            return self._forward_fast(x, padding_mask, cache)
        return self._forward_explicit(x, padding_mask, cache)

    def _mask_bool(
        self, start: int, num_tokens: int, padding_mask: torch.Tensor | None
    ) -> torch.Tensor:
        """True where a query may not attend a key: ``(T, T_k)``, or ``(B, 1, T, T_k)``.

        Rows are the queries at positions ``start..start + T - 1``, columns the keys
        at ``0..T_k - 1``, ``T_k = start + T`` (``start`` is 0 without a cache).
        """
        end = start + num_tokens
        mask_bool = self.mask[start:end, :end]  # (T, T_k)
        if not self.causal:
            mask_bool = torch.zeros_like(mask_bool)  # (T, T_k): no future is hidden
        if padding_mask is not None:
            hidden_keys = ~padding_mask[:, None, None, :]  # (B, 1, 1, T_k)
            mask_bool = mask_bool | hidden_keys  # -> (B, 1, T, T_k)
        return mask_bool

    # --8<-- [start:forward_explicit]
    def _forward_explicit(self, x, padding_mask=None, cache=None):
        b, num_tokens, d_in = x.shape  # (B, T, d_in)
        # -1: the heads this process holds, all of them unless tensor parallelism
        # split the projections over processes.
        split = (b, num_tokens, -1, self.head_dim)

        keys = self.W_key(x)  # (B, T, d_out)
        queries = self.W_query(x)  # (B, T, d_out)
        values = self.W_value(x)  # (B, T, d_out)

        # Split d_out into num_heads heads of head_dim each...
        keys = keys.view(split)  # (B, T, H, d_h)
        queries = queries.view(split)  # (B, T, H, d_h)
        values = values.view(split)  # (B, T, H, d_h)
        # ...and put the heads before the tokens: each head is a batch of its own.
        keys = keys.transpose(1, 2)  # (B, H, T, d_h)
        queries = queries.transpose(1, 2)  # (B, H, T, d_h)
        values = values.transpose(1, 2)  # (B, H, T, d_h)
        # Only with a KV cache (generation): the keys and values of every held
        # token, (B, H, T_k, d_h). Without one, T_k = T and nothing changes.
        start, keys, values, padding_mask = _cached(cache, keys, values, padding_mask)

        # (B, H, T, d_h) @ (B, H, d_h, T) -> (B, H, T, T)
        attn_scores = queries @ keys.transpose(2, 3)
        # Scale and mask in place: the (B, H, T, T) table is the costly one,
        # so no step makes a second copy of it that it does not need.
        attn_scores /= self.head_dim**0.5  # (B, H, T, T)
        mask_bool = self._mask_bool(start, num_tokens, padding_mask)  # True = masked
        attn_scores.masked_fill_(mask_bool, -torch.inf)  # (B, H, T, T)

        attn_weights = torch.softmax(attn_scores, dim=-1)  # (B, H, T, T)
        if padding_mask is not None:  # only padding can hide all of a query's keys
            attn_weights = attn_weights.masked_fill(mask_bool, 0.0)  # NaN -> 0
        attn_weights = self.dropout(attn_weights)  # (B, H, T, T)

        context_vec = attn_weights @ values  # (B, H, T, d_h)
        context_vec = context_vec.transpose(1, 2)  # (B, T, H, d_h)
        # Merge the heads back: (B, T, H, d_h) -> (B, T, d_out)
        context_vec = context_vec.contiguous().view(b, num_tokens, -1)
        context_vec = self.out_proj(context_vec)  # (B, T, d_out)
        return context_vec
    # --8<-- [end:forward_explicit]

    def _forward_fast(self, x, padding_mask=None, cache=None):
        # --8<-- [start:forward_fast]
        b, num_tokens, d_in = x.shape  # (B, T, d_in)
        split = (b, num_tokens, -1, self.head_dim)  # -1: the heads held here
        # (B, T, d_out) -> (B, T, H, d_h) -> (B, H, T, d_h)
        queries = self.W_query(x).view(split).transpose(1, 2)
        keys = self.W_key(x).view(split).transpose(1, 2)
        values = self.W_value(x).view(split).transpose(1, 2)
        # With a cache: (B, H, T_k, d_h) twice, and its padding flags (B, T_k).
        start, keys, values, padding_mask = _cached(cache, keys, values, padding_mask)
        mask_bool = None  # without padding, the kernel makes the causal mask itself
        if padding_mask is not None:  # (B, 1, T, T_k); True = masked
            mask_bool = self._mask_bool(start, num_tokens, padding_mask)
        dropout_p = self.dropout.p if self.training else 0.0  # off in eval mode
        context_vec = _fast_attention(
            queries, keys, values, mask_bool, causal=self.causal, dropout_p=dropout_p
        )  # (B, H, T, d_h)
        context_vec = context_vec.transpose(1, 2)  # (B, T, H, d_h)
        context_vec = context_vec.reshape(b, num_tokens, -1)  # (B, T, d_out)
        return self.out_proj(context_vec)  # (B, T, d_out)
        # --8<-- [end:forward_fast]

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, head_dim={self.head_dim}, "
            f"causal={self.causal}, fast_path={self.fast_path}"
        )


# --8<-- [end:class]
