# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""The attention layer of a 2026 decoder: grouped-query heads, rotary positions, an
optional sliding window and an optional norm on queries and keys.

Shapes: ``B`` batch, ``T`` new tokens, ``T_k`` keys attended to, ``d_in`` input width,
``d_out`` output width, ``H = num_heads``, ``H_kv = num_kv_heads``, ``d_h = head_dim``.

    Q = RoPE(norm_q(X W_query))       (B, T, d_in) -> (B, H, T, d_h)
    K = RoPE(norm_k(X W_key))         (B, T, d_in) -> (B, H_kv, T, d_h)
    V = X W_value                     (B, T, d_in) -> (B, H_kv, T, d_h)
    head_h = softmax(Q_h K_{h//G}^T / sqrt(d_h) + M) V_{h//G}        (B, H, T, d_h)
    out = concat(heads) W_out         (B, T, H d_h) -> (B, T, d_out)

``M`` hides the future, keys ``window`` or more positions back (when ``window`` is
set) and padding. The norms are RMSNorms over one head's width, shared by every head
(Qwen3's QK-norm); without ``qk_norm`` they are left out (Llama, Mistral).

``from_hf_state_dict`` renames the weights of a Hugging Face Llama, Mistral, Qwen2 or
Qwen3 attention layer (``q_proj``, ``k_proj``, ``v_proj``, ``o_proj``, ``q_norm``,
``k_norm``) to this module's names.

``make_cache`` gives a ``KVCache``, or with a window a ``RollingKVCache``.

Builds on ``checks.py``, ``grouped_query.py``, ``kv_cache.py``, ``rope.py`` and
``sliding_window.py`` of this package, imported relatively: copy them with this file,
under any package name (its API page offers the set as one download). MIT licence: keep
the first two lines of each file.
"""

from __future__ import annotations

import numbers

from torch import nn

from .checks import check_attention_arguments, check_inputs, check_size
from .grouped_query import (
    attention_mask,
    check_cache,
    check_num_kv_heads,
    grouped_attention_explicit,
    grouped_attention_fast,
)
from .kv_cache import KVCache
from .rope import RotaryEmbedding
from .sliding_window import RollingKVCache, check_window

HF_NAMES = {  # Hugging Face name -> ours
    "q_proj": "W_query",
    "k_proj": "W_key",
    "v_proj": "W_value",
    "o_proj": "out_proj",
    "q_norm": "q_norm",
    "k_norm": "k_norm",
}


# --8<-- [start:from_hf]
def from_hf_state_dict(state_dict: dict, prefix: str = "") -> dict:
    """Rename one Hugging Face attention layer's weights to ``ModernAttention``'s.

    ``prefix`` picks the layer out of a whole model's state dict, for example
    ``"model.layers.0.self_attn."``; keys that do not start with it are skipped.
    Returns a new dict for ``module.load_state_dict``.
    """
    if not isinstance(state_dict, dict):
        raise TypeError(f"state_dict must be a dict, got {type(state_dict).__name__}")
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str, got {type(prefix).__name__}")
    renamed = {}
    for key, tensor in state_dict.items():
        if not key.startswith(prefix):
            continue
        layer, _, param = key[len(prefix):].partition(".")
        if layer not in HF_NAMES or param not in ("weight", "bias"):
            raise ValueError(
                f"state_dict key {key!r} is not a weight of an attention layer; "
                f"expected {prefix}<{'|'.join(HF_NAMES)}>.<weight|bias>"
            )
        renamed[f"{HF_NAMES[layer]}.{param}"] = tensor
    if not renamed:
        raise ValueError(f"state_dict has no key starting with prefix {prefix!r}")
    return renamed
# --8<-- [end:from_hf]


# --8<-- [start:class]
class ModernAttention(nn.Module):
    r"""Grouped-query causal attention with rotary positions, an optional sliding
    window and an optional RMSNorm of queries and keys.

    $$\mathrm{head}_h = \mathrm{softmax}\left(
        \frac{R_m\, \hat q_h \cdot R_n\, \hat k_{\lfloor h/G \rfloor}}{\sqrt{d_h}}
        + M\right) V_{\lfloor h/G \rfloor}$$

    where $R_m$ turns each pair of dimensions by $m\theta_i$ (position $m$),
    $\hat q, \hat k$ are the (normed) projections and $M$ hides the future,
    padding, and keys at distance $\ge$ ``window``.

    Args:
        d_in: width of each input token vector (the model width).
        d_out: width of the output (usually the model width too).
        context_length: the most positions, cached ones included.
        dropout: probability of dropping an attention weight while training.
        num_heads: query heads ``H``.
        num_kv_heads: key/value heads; must divide ``num_heads``.
        qkv_bias: a bias on the query, key and value projections (Qwen2).
        head_dim: width of one head; ``d_out // num_heads`` when None.
        out_bias: a bias on the output projection.
        rope_base: the base of the rotary angles.
        window: attend to at most this many tokens (the query's own included), or
            None for no window.
        qk_norm: RMSNorm each query and key head before the rotation (Qwen3).
        norm_eps: the RMSNorm's epsilon.
        fast_path: use ``scaled_dot_product_attention`` (same result).

    Shapes:
        ``forward(x, padding_mask=None, *, cache=None)``: ``x`` ``(B, T, d_in)``,
        ``padding_mask`` ``(B, T)`` bool (True = real token), output
        ``(B, T, d_out)``. With a cache, ``x`` holds only the new tokens, at
        positions ``cache.length..``.
    """

    # --8<-- [start:body]
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
        head_dim: int | None = None,
        out_bias: bool = False,
        rope_base: float = 10000.0,
        window: int | None = None,
        qk_norm: bool = False,
        norm_eps: float = 1e-6,
        fast_path: bool = False,
    ) -> None:
        if head_dim is not None:
            check_size("head_dim", head_dim)
        check_size("num_heads", num_heads)
        inner = d_out if head_dim is None else num_heads * head_dim  # H * d_h
        check_attention_arguments(
            d_in, inner, context_length, dropout, num_heads, qkv_bias, True, fast_path
        )
        check_size("d_out", d_out)
        check_num_kv_heads(num_heads, num_kv_heads)
        check_window(window)
        if (inner // num_heads) % 2 != 0:
            raise ValueError(
                "head_dim must be even for rotary embeddings (dimensions turn in "
                f"pairs), got head_dim={inner // num_heads}"
            )
        for name, flag in (("out_bias", out_bias), ("qk_norm", qk_norm)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be True or False, got {flag!r}")
        if isinstance(norm_eps, bool) or not isinstance(norm_eps, numbers.Real):
            raise TypeError(f"norm_eps must be a float, got {norm_eps!r}")
        if norm_eps <= 0:
            raise ValueError(f"norm_eps must be positive, got {norm_eps}")
        super().__init__()
        self.context_length = context_length
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = inner // num_heads  # d_h
        self.window = window
        self.fast_path = fast_path
        kv_width = num_kv_heads * self.head_dim  # H_kv * d_h
        self.W_query = nn.Linear(d_in, inner, bias=qkv_bias)  # weight (H d_h, d_in)
        self.W_key = nn.Linear(d_in, kv_width, bias=qkv_bias)  # (H_kv d_h, d_in)
        self.W_value = nn.Linear(d_in, kv_width, bias=qkv_bias)  # (H_kv d_h, d_in)
        self.out_proj = nn.Linear(inner, d_out, bias=out_bias)  # (d_out, H d_h)
        self.q_norm = nn.RMSNorm(self.head_dim, eps=norm_eps) if qk_norm else None
        self.k_norm = nn.RMSNorm(self.head_dim, eps=norm_eps) if qk_norm else None
        self.rope = RotaryEmbedding(self.head_dim, context_length, rope_base)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, padding_mask=None, *, cache=None):
        """Attend over ``x`` ``(B, T, d_in)``; return ``(B, T, d_out)``."""
        weight = self.W_query.weight
        check_inputs(x, padding_mask, weight.shape[1], self.context_length, weight)
        start = 0
        if cache is not None:
            check_cache(cache, self.num_kv_heads, self.head_dim, x)
            start = cache.length  # position of the first new token
        b, num_tokens, _ = x.shape  # (B, T, d_in)
        if start + num_tokens > self.context_length:
            raise ValueError(
                f"positions {start}..{start + num_tokens - 1} go beyond "
                f"context_length={self.context_length}"
            )
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim)
        kv_split = (b, num_tokens, self.num_kv_heads, self.head_dim)
        keys = self.W_key(x).view(kv_split)  # (B, T, H_kv, d_h)
        values = self.W_value(x).view(kv_split).transpose(1, 2)  # (B, H_kv, T, d_h)
        if self.q_norm is not None:  # one RMSNorm over each head's d_h
            queries = self.q_norm(queries)  # (B, T, H, d_h)
            keys = self.k_norm(keys)  # (B, T, H_kv, d_h)
        queries = self.rope(queries.transpose(1, 2), start)  # (B, H, T, d_h)
        keys = self.rope(keys.transpose(1, 2), start)  # (B, H_kv, T, d_h)

        if cache is not None:  # held and new keys: (B, H_kv, T_k, d_h)
            keys, values, padding_mask = cache.append(keys, values, padding_mask)
        num_keys = keys.shape[2]  # T_k
        mask_bool = attention_mask(
            start, num_tokens, start + num_tokens - num_keys, num_keys,
            window=self.window, key_padding=padding_mask, device=x.device,
        )  # (T, T_k) or (B, 1, T, T_k); True = masked
        if self.fast_path:  # no mask tensor when the kernel can make it
            plain = padding_mask is None and (
                self.window is None or num_keys <= self.window
            )
            plain = plain and (num_tokens == 1 or num_keys == num_tokens)
            context_vec = grouped_attention_fast(
                queries, keys, values, None if plain else mask_bool,
                self.dropout.p if self.training else 0.0, causal=num_tokens > 1,
            )  # (B, H, T, d_h)
        else:
            context_vec = grouped_attention_explicit(
                queries, keys, values, mask_bool, self.dropout
            )  # (B, H, T, d_h)
        context_vec = context_vec.transpose(1, 2)  # (B, T, H, d_h)
        context_vec = context_vec.reshape(b, num_tokens, -1)  # (B, T, H d_h)
        return self.out_proj(context_vec)  # (B, T, d_out)

    def make_cache(self, batch_size: int):
        """An empty cache for this layer: rolling when there is a window."""
        kind = dict(dtype=self.W_query.weight.dtype, device=self.W_query.weight.device)
        shape = (batch_size, self.num_kv_heads, self.head_dim)
        if self.window is None:
            return KVCache(*shape, self.context_length, **kind)
        return RollingKVCache(*shape, self.window, **kind)

    # --8<-- [end:body]

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}, "
            f"head_dim={self.head_dim}, window={self.window}, "
            f"qk_norm={self.q_norm is not None}, fast_path={self.fast_path}"
        )


# --8<-- [end:class]
