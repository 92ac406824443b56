# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""The attention layer of a 2026 decoder: grouped-query heads, rotary positions, an
optional sliding window and an optional norm on queries and keys, and the options by
which the open families differ (scaled and partial rotary, soft-capping, sinks, a score
scale, an output gate).

Shapes: ``B`` batch, ``T`` new tokens, ``T_k`` keys attended to, ``d_in`` input width,
``d_out`` output width, ``H = num_heads``, ``H_kv = num_kv_heads``, ``d_h = head_dim``.

    Q = RoPE(norm_q(X W_query))       (B, T, d_in) -> (B, H, T, d_h)
    K = RoPE(norm_k(X W_key))         (B, T, d_in) -> (B, H_kv, T, d_h)
    V = X W_value                     (B, T, d_in) -> (B, H_kv, T, d_v)
    head_h = softmax(Q_h K_{h//G}^T / sqrt(d_h) + M) V_{h//G}        (B, H, T, d_v)
    out = concat(heads) W_out         (B, T, H d_v) -> (B, T, d_out)

``d_v = d_h`` unless ``value_head_dim`` says otherwise.

``M`` hides the future, keys ``window`` or more positions back (when ``window`` is
set) and padding. The norms are RMSNorms over one head's width, shared by every head
(Qwen3's QK-norm); without ``qk_norm`` they are left out (Llama, Mistral).

The family options, each off by default:

- ``rope_scaling``, ``partial_rotary_factor``: stretched or partial rotary angles
  (Llama 3.1's ``llama3``, YaRN for gpt-oss; Qwen3-Next turns a quarter of each head);
- ``scale``: the score scale instead of ``1 / sqrt(d_h)`` (Gemma);
- ``softcap``: ``cap * tanh(s / cap)`` on every score (Gemma 2);
- ``norm_unit_offset``: QK-norm weights applied as ``(1 + w)`` (Gemma 3, Qwen3-Next);
- ``sinks``: a learned logit per head in every softmax (gpt-oss);
- ``output_gate``: ``W_query`` also makes a gate per head,
  ``out = (heads * sigmoid(gate)) W_out`` (Qwen3-Next);
- ``chunk_size``: attend only within chunks of that many tokens, with a cache that
  keeps only the current chunk (Llama 4's local layers; ``chunked.py``);
- ``nope``: no rotary positions at all (every fourth layer of Llama 4 and SmolLM3);
- ``temperature_tuning``: ``(floor_scale, attn_scale)``, queries scaled up with the log
  of their position (Llama 4's positionless layers);
- ``value_head_dim``: values narrower than queries and keys, ``d_v < d_h``, and
  ``value_scale``: every value multiplied by a constant (MiMo-V2-Flash);
- ``softplus_gate``: a projection ``W_gate`` makes one gate per head (``"head"``) or
  per output dimension (``"element"``), ``out = (heads * softplus(gate)) W_out``
  (Laguna);
- ``rope_interleave``: the checkpoint pairs neighbouring dimensions (Llama 4);
- ``qk_norm_weight``: False for a QK-norm without weights (Llama 4's);
- ``value_norm``: a weightless RMSNorm on each value head (Gemma 4);
- ``values_from_keys``: no ``W_value``; the values are the key projection, before the
  key's norm and rotation (Gemma 4's global layers);
- ``qk_norm_across_heads``: the QK-norm runs over all heads of the query (and of the
  key) projection together, one weight per channel (OLMo-Hybrid);
- ``kv_shared``: no ``W_key`` nor ``W_value``; the layer attends over the keys and
  values an earlier layer made, handed over by a ``kv_sharing.SharedKV`` passed as
  ``cache`` (Gemma 4's last layers).

``from_hf_config`` builds the layer of any supported family from a transformers config
or the dict of a ``config.json``; ``from_hf_state_dict`` renames its weights
(``q_proj``, ``k_proj``, ``v_proj``, ``o_proj``, ``q_norm``, ``k_norm``, ``sinks``).

``make_cache`` gives a ``KVCache``, with a window a ``RollingKVCache``, with chunks a
``ChunkedKVCache``.

Builds on ``attention_variants.py``, ``checks.py``, ``chunked.py``,
``grouped_query.py``, ``hf_config.py``, ``kv_cache.py``, ``kv_sharing.py``,
``rope.py``, ``rope_scaling.py`` and ``sliding_window.py`` of this package, imported
relatively: copy them with this file,
under any package name (its API page offers the set as one download). MIT licence: keep
the first two lines of each file.
"""

from __future__ import annotations

import numbers

import torch
from torch import nn

from .attention_variants import (
    UnitOffsetRMSNorm,
    check_temperature_tuning,
    temperature_scales,
    variant_attention_explicit,
)
from .checks import (
    check_attention_arguments,
    check_flag,
    check_inputs,
    check_size,
    heads_here,
    held_heads,
    rows_here,
)
from .chunked import ChunkedKVCache, check_chunk_size, chunk_mask, left_padding
from .grouped_query import (
    attention_mask,
    check_cache,
    check_num_kv_heads,
    grouped_attention_fast,
    held_padding,
)
from .hf_config import modern_attention_options, rename_weights
from .kv_cache import KVCache
from .kv_sharing import SharedKV
from .rope import RotaryEmbedding, neighbours_to_halves
from .rope_scaling import rope_frequencies
from .sliding_window import RollingKVCache, check_window

HF_NAMES = {  # Hugging Face name -> ours
    "q_proj": "W_query",
    "k_proj": "W_key",
    "v_proj": "W_value",
    "o_proj": "out_proj",
    "g_proj": "W_gate",  # Laguna's softplus gate
    "q_norm": "q_norm",
    "k_norm": "k_norm",
    "sinks": "sinks",  # a bare parameter (gpt-oss), not a layer with a weight
}


# --8<-- [start:from_hf]
def from_hf_state_dict(state_dict: dict, prefix: str = "") -> dict:
    """Rename one Hugging Face attention layer's weights to ``ModernAttention``'s.

    ``prefix`` picks the layer out of a whole model's state dict, for example
    ``"model.layers.0.self_attn."``; keys that do not start with it are skipped.
    Returns a new dict for ``module.load_state_dict``.
    """
    return rename_weights(
        state_dict, prefix, HF_NAMES, "an attention layer", bare=("sinks",)
    )
# --8<-- [end:from_hf]


def check_fast_path(fast_path: bool, softcap: float | None, sinks: bool) -> None:
    """The fused kernel cannot soft-cap scores nor add sinks: refuse, never compute
    something else."""
    if not fast_path:
        return
    for name, used in (("softcap", softcap is not None), ("sinks", sinks)):
        if used:
            raise ValueError(
                f"fast_path=True cannot express {name}: scaled_dot_product_attention "
                "has no soft cap and no sinks; use fast_path=False"
            )


def check_family_options(
    qk_norm, norm_unit_offset, qk_norm_weight, window, chunk_size,
    temperature_tuning, kv_shared, value_norm, values_from_keys,
    qk_norm_across_heads=False, output_gate=False,
) -> None:
    """Refuse option combinations no family has, with the reason."""
    if qk_norm_across_heads and (not qk_norm or norm_unit_offset or not qk_norm_weight
                                 or output_gate or values_from_keys or kv_shared):
        raise ValueError(
            "qk_norm_across_heads=True needs qk_norm=True with plain weights, and no "
            "output_gate, values_from_keys or kv_shared (no family combines them)"
        )
    if norm_unit_offset and not qk_norm:
        raise ValueError("norm_unit_offset=True needs qk_norm=True (it shapes it)")
    if not qk_norm_weight and (not qk_norm or norm_unit_offset):
        raise ValueError(
            "qk_norm_weight=False needs qk_norm=True and norm_unit_offset=False "
            "(a norm without weights has no offset to add)"
        )
    if window is not None and chunk_size is not None:
        raise ValueError(
            f"window={window} and chunk_size={chunk_size} cannot both be set: a "
            "layer is windowed or chunked"
        )
    if temperature_tuning is not None:
        check_temperature_tuning(temperature_tuning)
    if kv_shared and (value_norm or values_from_keys or chunk_size is not None):
        raise ValueError(
            "kv_shared=True takes its keys and values as the owning layer made them: "
            "value_norm, values_from_keys and chunk_size belong to that layer"
        )


def check_value_options(
    value_head_dim, value_scale, softplus_gate, output_gate, values_from_keys,
    kv_shared, chunk_size, head_dim,
) -> None:
    """MiMo-V2-Flash's narrower, scaled values and Laguna's softplus gate: refuse
    what they cannot be combined with (no family does it)."""
    if value_head_dim is not None:
        check_size("value_head_dim", value_head_dim)
    if value_scale is not None and (
        isinstance(value_scale, bool) or not isinstance(value_scale, numbers.Real)
        or not value_scale > 0
    ):
        raise ValueError(f"value_scale must be None or a positive number, got "
                         f"{value_scale!r}")
    if softplus_gate not in (None, "head", "element"):
        raise ValueError(
            f"softplus_gate must be None, 'head' or 'element', got {softplus_gate!r}"
        )
    if softplus_gate is not None and output_gate:
        raise ValueError("softplus_gate and output_gate=True cannot both be set: a "
                         "layer has one output gate")
    narrow = value_head_dim is not None and value_head_dim != head_dim
    for name, used in (("output_gate", output_gate),
                       ("values_from_keys", values_from_keys),
                       ("kv_shared", kv_shared),
                       ("chunk_size", chunk_size is not None)):
        if narrow and used:
            raise ValueError(
                f"value_head_dim={value_head_dim} (not head_dim={head_dim}) cannot be "
                f"combined with {name}: not implemented"
            )


def qk_norm_layer(dim: int, eps: float, unit_offset: bool, weight: bool) -> nn.Module:
    """The RMSNorm of one query or key head: with a weight (Qwen3), a ``(1 + w)``
    weight (Gemma 3), or none (Llama 4)."""
    if unit_offset:
        return UnitOffsetRMSNorm(dim, eps=eps)
    return nn.RMSNorm(dim, eps=eps, elementwise_affine=weight)


# --8<-- [start:class]
class ModernAttention(nn.Module):
    r"""Grouped-query causal attention with rotary positions, an optional sliding
    window, an optional RMSNorm of queries and keys, and the options of the open
    model families.

    $$\mathrm{head}_h = \mathrm{softmax}\left(
        \mathrm{cap}\left(s \cdot R_m\, \hat q_h \cdot
        R_n\, \hat k_{\lfloor h/G \rfloor}\right) + M\right) V_{\lfloor h/G \rfloor}$$

    where $R_m$ turns each pair of dimensions by $m\theta_i$ (position $m$),
    $\hat q, \hat k$ are the (normed) projections, $s$ the score scale
    ($1/\sqrt{d_h}$ by default), cap the optional soft cap and $M$ hides the future,
    padding, and keys at distance $\ge$ ``window`` (or in another chunk). With sinks,
    each head's softmax has one more logit; with an output gate, head $h$ is
    multiplied by $\sigma(g_h)$ before ``out_proj`` (with a softplus gate, by
    $\mathrm{softplus}(x W_{gate})_h$). Without positions (``nope``)
    $R$ is the identity; with temperature tuning $\hat q$ at position $m$ is
    multiplied by $1 + a \ln(1 + \lfloor (m + 1) / f \rfloor)$.

    Args:
        d_in: width of each input token vector (the model width).
        d_out: width of the output (usually the model width too).
        context_length: the most positions, cached ones included.
        dropout: probability of dropping an attention weight while training.
        num_heads: query heads ``H``.
        num_kv_heads: key/value heads; must divide ``num_heads``.
        qkv_bias: a bias on the query, key and value projections (Qwen2, gpt-oss).
        head_dim: width of one head; ``d_out // num_heads`` when None.
        out_bias: a bias on the output projection.
        rope_base: the base of the rotary angles.
        rope_scaling: None, or a dict with ``rope_type`` (``"linear"``, ``"llama3"``,
            ``"yarn"``) and its parameters, as ``rope_scaling.rope_frequencies``
            takes them.
        partial_rotary_factor: the fraction of each head that turns (Qwen3-Next: 0.25).
        window: attend to at most this many tokens (the query's own included), or
            None for no window.
        qk_norm: RMSNorm each query and key head before the rotation (Qwen3).
        norm_unit_offset: the norms scale by ``(1 + w)``, ``w`` starting at zero
            (Gemma 3, Qwen3-Next).
        norm_eps: the RMSNorm's epsilon.
        scale: the score scale; ``1 / sqrt(head_dim)`` when None (Gemma:
            ``query_pre_attn_scalar ** -0.5``).
        softcap: None, or the cap of ``cap * tanh(score / cap)`` (Gemma 2).
        sinks: a learned sink logit per head (gpt-oss).
        output_gate: ``W_query`` also makes a sigmoid gate per head (Qwen3-Next).
        chunk_size: attend only to earlier tokens of the same chunk of this many
            tokens, chunks counted from each sequence's first real token (Llama 4's
            local layers); not with ``window``.
        nope: no rotary positions (Llama 4, SmolLM3: every fourth layer).
        temperature_tuning: None, or ``(floor_scale, attn_scale)``: the query at
            position ``m`` is multiplied by
            ``1 + attn_scale * ln(1 + floor((m + 1) / floor_scale))`` (Llama 4's
            positionless layers: ``(8192, 0.1)``); a third number replaces the
            offset 1.
        rope_interleave: the checkpoint's rotary pairs are neighbours
            ``(2i, 2i + 1)`` (Llama 4); queries and keys are reordered into halves.
            Not with a ``partial_rotary_factor`` below 1 (refused).
        qk_norm_weight: False: the QK-norm has no weights (Llama 4's).
        value_norm: a weightless RMSNorm over each value head (Gemma 4).
        values_from_keys: no ``W_value``: each value head is the key projection's
            head before its norm and rotation (Gemma 4's global layers).
        qk_norm_across_heads: the QK-norm's mean square runs over the whole query
            projection ``(H d_h)`` and the whole key projection ``(H_kv d_h)``, with
            one weight per channel, before they are split into heads (OLMo-Hybrid);
            not under tensor parallelism.
        kv_shared: no ``W_key``, ``W_value`` nor key norm: the layer attends over the
            keys and values of an earlier layer, read from the ``SharedKV``
            (``kv_sharing.py``) passed as ``cache``, after that layer ran on the same
            tokens (Gemma 4's last layers).
        value_head_dim: ``d_v``, the width of one value head when it is not
            ``head_dim`` (MiMo-V2-Flash: 128 against 192); ``out_proj`` then reads
            ``H d_v`` numbers.
        value_scale: every value multiplied by this number before it is cached
            (MiMo-V2-Flash's ``attention_value_scale``, 0.707).
        softplus_gate: None, ``"head"`` or ``"element"``: ``W_gate`` makes one
            gate per head, or one per head and value dimension, and each head's output
            is multiplied by ``softplus`` of it (Laguna's ``gating``).
        fast_path: use ``scaled_dot_product_attention`` (same result). The fused
            kernel has no soft cap and no sinks: with either, it is refused.

    Shapes:
        ``forward(x, padding_mask=None, *, cache=None)``: ``x`` ``(B, T, d_in)``,
        ``padding_mask`` ``(B, T)`` bool (True = real token), output
        ``(B, T, d_out)``. With a cache, ``x`` holds only the new tokens, at
        positions ``cache.length..``. A ``kv_shared`` layer takes the owning
        layer's ``SharedKV`` as ``cache`` (even for a prefill) and that layer's key
        padding; its own ``padding_mask`` is checked, not used.
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
        rope_scaling: dict | None = None,
        partial_rotary_factor: float = 1.0,
        window: int | None = None,
        qk_norm: bool = False,
        norm_unit_offset: bool = False,
        norm_eps: float = 1e-6,
        scale: float | None = None,
        softcap: float | None = None,
        sinks: bool = False,
        output_gate: bool = False,
        chunk_size: int | None = None,
        nope: bool = False,
        temperature_tuning: tuple[float, float] | None = None,
        rope_interleave: bool = False,
        qk_norm_weight: bool = True,
        value_norm: bool = False,
        values_from_keys: bool = False,
        kv_shared: bool = False,
        value_head_dim: int | None = None,
        value_scale: float | None = None,
        softplus_gate: str | None = None,
        qk_norm_across_heads: bool = False,
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
        check_chunk_size(chunk_size)
        if (inner // num_heads) % 2 != 0:
            raise ValueError(
                "head_dim must be even for rotary embeddings (dimensions turn in "
                f"pairs), got head_dim={inner // num_heads}"
            )
        flags = dict(out_bias=out_bias, qk_norm=qk_norm, sinks=sinks,
                     norm_unit_offset=norm_unit_offset, output_gate=output_gate,
                     nope=nope, rope_interleave=rope_interleave,
                     qk_norm_weight=qk_norm_weight, value_norm=value_norm,
                     values_from_keys=values_from_keys, kv_shared=kv_shared,
                     qk_norm_across_heads=qk_norm_across_heads)
        for name, flag in flags.items():
            check_flag(name, flag)
        check_family_options(
            qk_norm, norm_unit_offset, qk_norm_weight, window, chunk_size,
            temperature_tuning, kv_shared, value_norm, values_from_keys,
            qk_norm_across_heads, output_gate,
        )
        check_value_options(
            value_head_dim, value_scale, softplus_gate, output_gate, values_from_keys,
            kv_shared, chunk_size, inner // num_heads,
        )
        numbers_given = (("norm_eps", norm_eps), ("scale", scale), ("softcap", softcap))
        for name, value in numbers_given:
            if value is None and name != "norm_eps":
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(f"{name} must be a float, got {value!r}")
            if not value > 0:
                raise ValueError(f"{name} must be positive, got {value}")
        check_fast_path(fast_path, softcap, sinks)
        if rope_scaling is not None and not (
            isinstance(rope_scaling, dict) and "rope_type" in rope_scaling
        ):
            raise ValueError(
                "rope_scaling must be None or a dict with a 'rope_type' and its "
                f"parameters, got {rope_scaling!r}"
            )
        whole_head = (rope_scaling or {}).get("rope_type") == "proportional"
        if rope_interleave and partial_rotary_factor != 1 and not whole_head:
            raise ValueError(  # neighbours within the turned part are not reordered
                "rope_interleave=True reorders the pairs of the whole head; with "
                f"partial_rotary_factor={partial_rotary_factor} only part of it turns:"
                " not implemented"
            )
        super().__init__()
        self.context_length = context_length
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = inner // num_heads  # d_h
        self.window = window
        self.chunk_size = chunk_size
        self.scale = float(scale) if scale is not None else self.head_dim**-0.5
        self.softcap = softcap
        self.temperature_tuning = (
            None if temperature_tuning is None
            else tuple(float(v) for v in temperature_tuning)
        )  # (floor_scale, attn_scale)
        self.rope_interleave = rope_interleave
        self.kv_shared = kv_shared
        self.values_from_keys = values_from_keys
        self.fast_path = fast_path  # checked again in forward: it may be set later
        self.value_head_dim = value_head_dim or self.head_dim  # d_v
        self.value_scale = value_scale
        self.softplus_gate = softplus_gate
        kv_width = num_kv_heads * self.head_dim  # H_kv * d_h
        v_width = num_kv_heads * self.value_head_dim  # H_kv * d_v
        q_width = inner * 2 if output_gate else inner  # a gate beside each query head
        own_keys = not kv_shared  # a sharing layer reads an earlier layer's
        own_values = own_keys and not values_from_keys
        self.W_query = nn.Linear(d_in, q_width, bias=qkv_bias)  # (H d_h [x2], d_in)
        self.W_key = (  # (H_kv d_h, d_in)
            nn.Linear(d_in, kv_width, bias=qkv_bias) if own_keys else None
        )
        self.W_value = (  # (H_kv d_v, d_in)
            nn.Linear(d_in, v_width, bias=qkv_bias) if own_values else None
        )
        out_width = num_heads * self.value_head_dim  # H d_v
        self.out_proj = nn.Linear(out_width, d_out, bias=out_bias)  # (d_out, H d_v)
        self.W_gate = None  # Laguna's: (H, d_in) or (H d_v, d_in)
        if softplus_gate is not None:
            gates = num_heads if softplus_gate == "head" else out_width
            self.W_gate = nn.Linear(d_in, gates, bias=False)
        self.q_norm = self.k_norm = self.v_norm = None
        self.qk_norm_across_heads = qk_norm_across_heads
        if qk_norm_across_heads:  # one norm over all heads of each projection
            self.q_norm = nn.RMSNorm(inner, eps=norm_eps)  # weight (H d_h,)
            self.k_norm = nn.RMSNorm(kv_width, eps=norm_eps)  # weight (H_kv d_h,)
        elif qk_norm:
            self.q_norm = qk_norm_layer(
                self.head_dim, norm_eps, norm_unit_offset, qk_norm_weight
            )
            if own_keys:
                self.k_norm = qk_norm_layer(
                    self.head_dim, norm_eps, norm_unit_offset, qk_norm_weight
                )
        if value_norm:  # the values' own scale, without weights (Gemma 4)
            self.v_norm = nn.RMSNorm(self.head_dim, norm_eps, elementwise_affine=False)
        self.sinks = nn.Parameter(torch.zeros(num_heads)) if sinks else None  # (H,)
        self.output_gate = output_gate
        self.rope = None  # a layer without positions turns nothing
        if not nope:
            inv_freq, attention_factor = rope_frequencies(
                self.head_dim, rope_base, partial_rotary_factor=partial_rotary_factor,
                **(rope_scaling or {}),
            )  # (d_rot / 2,) and a float
            self.rope = RotaryEmbedding(
                self.head_dim, context_length, rope_base,
                inv_freq=inv_freq, attention_factor=attention_factor,
            )
        self.dropout = nn.Dropout(dropout)

    @classmethod
    def from_hf_config(cls, config, layer_idx: int = 0, **overrides):
        """The attention layer ``layer_idx`` of a transformers config object or a
        ``config.json`` dict: Llama (3.1's scaled angles too), Mistral, Qwen2, Qwen3,
        Gemma 2, Gemma 3, gpt-oss, Qwen3-Next, Llama 4, SmolLM3, Gemma 4 (a layer
        that reuses an earlier layer's keys and values comes with ``kv_shared=True``:
        ``hf_config.kv_source_layer`` names that layer). ``overrides`` replace
        options, for example ``context_length=4096`` (the default is the config's
        ``max_position_embeddings``). Raises ``ValueError`` naming any setting it
        does not implement."""
        return cls(**{**modern_attention_options(config, layer_idx), **overrides})

    def check_fast_path(self) -> None:
        """Refuse the fused kernel where it cannot compute this layer."""
        check_fast_path(self.fast_path, self.softcap, self.sinks is not None)

    def forward(self, x, padding_mask=None, *, cache=None):
        """Attend over ``x`` ``(B, T, d_in)``; return ``(B, T, d_out)``."""
        weight = self.W_query.weight
        check_inputs(x, padding_mask, weight.shape[1], self.context_length, weight)
        self.check_fast_path()
        heads, kv_heads = self.heads_here()  # all, or this process's share
        b, num_tokens, _ = x.shape  # (B, T, d_in)
        shared = self.read_shared(cache, kv_heads, x) if self.kv_shared else None
        if shared is not None:  # an earlier layer's keys, values, padding and start
            *shared, start = shared
        else:
            start = self.check_own_cache(cache, kv_heads, x)  # the first new position
        if start + num_tokens > self.context_length:
            raise ValueError(
                f"positions {start}..{start + num_tokens - 1} go beyond "
                f"context_length={self.context_length}"
            )
        queries = self.W_query(x)  # (B, T, H d_h [x2])
        if self.qk_norm_across_heads:  # one RMSNorm over all of H d_h
            queries = self.q_norm(queries)  # (B, T, H d_h)
        queries = queries.view(b, num_tokens, heads, -1)  # (B, T, H, d_h [x2])
        gate = None
        if self.output_gate:  # each head's d_h query dims, then its d_h gate dims
            queries, gate = queries.chunk(2, dim=-1)  # (B, T, H, d_h) twice
        if self.q_norm is not None and not self.qk_norm_across_heads:
            queries = self.q_norm(queries)  # (B, T, H, d_h): over each head's d_h
        queries = self.turn(queries.transpose(1, 2), start)  # (B, H, T, d_h)
        if self.temperature_tuning is not None:  # sharper far into the text
            where = torch.arange(start, start + num_tokens, device=x.device)  # (T,)
            scales = temperature_scales(where, *self.temperature_tuning)  # (T,)
            queries = (queries * scales[:, None]).to(queries.dtype)  # (B, H, T, d_h)

        if shared is not None:  # (B, H_kv, T_k, d_h) twice and (B, T_k)
            keys, values, padding_mask = shared
        else:
            keys, values = self.keys_values(x, kv_heads, start)  # (B, H_kv, T, d_h)
            if cache is not None:  # held and new keys: (B, H_kv, T_k, d_h)
                keys, values, padding_mask = cache.append(keys, values, padding_mask)
        padding_mask = held_padding(cache, padding_mask)  # None: no padding held
        reach = num_tokens - 1 + (self.window or self.context_length)  # keys seen
        if keys.shape[2] > reach:  # older keys no query sees: left out (views)
            keys, values = keys[:, :, -reach:], values[:, :, -reach:]  # (.., T_k, d)
            padding_mask = None if padding_mask is None else padding_mask[:, -reach:]
        num_keys = keys.shape[2]  # T_k
        key_start = start + num_tokens - num_keys  # position of the first key
        mask_bool = self.hidden_keys(
            cache, padding_mask, start, num_tokens, key_start, num_keys
        )  # (T, T_k), (B, 1, T, T_k) or None; True = masked
        if self.fast_path:  # no mask tensor when the kernel can make it
            context_vec = grouped_attention_fast(
                queries, keys, values, mask_bool,
                self.dropout.p if self.training else 0.0,
                causal=mask_bool is None and num_tokens > 1, scale=self.scale,
            )  # (B, H, T, d_h)
        else:
            context_vec = variant_attention_explicit(
                queries, keys, values, mask_bool, self.dropout,
                scale=self.scale, softcap=self.softcap, sinks=self.sinks_here(heads),
            )  # (B, H, T, d_h)
        context_vec = context_vec.transpose(1, 2)  # (B, T, H, d_v)
        if gate is not None:  # each head scaled by its own gates, in (0, 1)
            context_vec = context_vec * torch.sigmoid(gate)  # (B, T, H, d_h)
        if self.W_gate is not None:  # Laguna: positive gates, per head or element
            context_vec = context_vec * self.softplus_gates(x, heads)  # (B, T, H, d_v)
        context_vec = context_vec.reshape(b, num_tokens, -1)  # (B, T, H d_v)
        return self.out_proj(context_vec)  # (B, T, d_out)

    def hidden_keys(self, cache, key_padding, start, num_tokens, key_start, num_keys):
        """True where a query may not attend a key: ``(T, T_k)`` or ``(B, 1, T, T_k)``
        for queries at ``start..`` and keys at ``key_start..``. None when no key is
        hidden from any query (one new token, no padding, every key within its
        window and chunk), and on the fast path when the kernel's own causal mask
        is all there is (no padding, as many keys as queries, within the window
        and one chunk)."""
        last = start + num_tokens - 1  # the last query's position
        size = self.chunk_size
        past_window = self.window is not None and last - key_start >= self.window
        other_chunk = size is not None and (
            key_padding is not None or key_start // size != last // size
        )  # without padding, chunks start at position 0
        if key_padding is None and not past_window and not other_chunk and (
            num_tokens == 1 or self.fast_path and num_keys == num_tokens
        ):
            return None
        device = self.W_query.weight.device
        mask_bool = attention_mask(
            start, num_tokens, key_start, num_keys,
            window=self.window, key_padding=key_padding, device=device,
        )  # (T, T_k) or (B, 1, T, T_k); True = masked
        if size is not None:  # and keys of another chunk
            batch = 1 if key_padding is None else key_padding.shape[0]
            pad = self.chunk_starts(cache, key_padding, key_start, batch, device)
            mask_bool = mask_bool | chunk_mask(
                start, num_tokens, key_start, num_keys, size, pad
            )  # (B, 1, T, T_k)
        return mask_bool

    def softplus_gates(self, x: torch.Tensor, heads: int) -> torch.Tensor:
        """``softplus(x W_gate)`` for ``x`` ``(B, T, d_in)``, computed in float32:
        ``(B, T, H, 1)`` per head, ``(B, T, H, d_v)`` per element."""
        gates = nn.functional.softplus(self.W_gate(x).float()).to(x.dtype)
        return gates.view(*x.shape[:2], heads, -1)  # (B, T, H, 1 or d_v)

    def turn(self, x: torch.Tensor, start: int) -> torch.Tensor:
        """Rotary positions on queries or keys ``x`` ``(B, H, T, d_h)`` at
        ``start..``: none without positions; neighbours paired into halves first
        for checkpoints that pair neighbours."""
        if self.rope is None:
            return x  # (B, H, T, d_h)
        if self.rope_interleave:
            x = neighbours_to_halves(x)  # (B, H, T, d_h)
        return self.rope(x, start)  # (B, H, T, d_h)

    def keys_values(self, x: torch.Tensor, kv_heads: int, start: int):
        """This layer's keys and values for ``x`` ``(B, T, d_in)`` at ``start..``:
        ``(B, H_kv, T, d_h)`` twice, normed and turned as the options say."""
        split = (*x.shape[:2], kv_heads, self.head_dim)  # (B, T, H_kv, d_h)
        projected = self.W_key(x)  # (B, T, H_kv d_h)
        keys = projected.view(split)  # (B, T, H_kv, d_h)
        if self.values_from_keys:
            values = keys  # (B, T, H_kv, d_h)
        else:
            values = self.W_value(x).view(*split[:3], -1)  # (B, T, H_kv, d_v)
        if self.value_scale is not None:  # MiMo-V2-Flash: before the cache
            values = values * self.value_scale  # (B, T, H_kv, d_v)
        if self.qk_norm_across_heads:  # one RMSNorm over all of H_kv d_h
            keys = self.k_norm(projected).view(split)  # (B, T, H_kv, d_h)
        elif self.k_norm is not None:
            keys = self.k_norm(keys)  # (B, T, H_kv, d_h)
        if self.v_norm is not None:
            values = self.v_norm(values)  # (B, T, H_kv, d_h)
        keys = self.turn(keys.transpose(1, 2), start)  # (B, H_kv, T, d_h)
        return keys, values.transpose(1, 2)  # (B, H_kv, T, d_h) and (.., d_v)

    def check_own_cache(self, cache, kv_heads: int, x: torch.Tensor) -> int:
        """Check the cache of a layer with its own keys (a ``SharedKV`` it owns
        included); return the position of the first new token."""
        if cache is None:
            return 0
        held = cache.cache if isinstance(cache, SharedKV) else cache
        if held is not None:
            check_cache(held, kv_heads, self.head_dim, x)
        return cache.length

    def read_shared(self, cache, kv_heads: int, x: torch.Tensor):
        """A ``kv_shared`` layer's keys, values, key padding and first position,
        from the owner's ``SharedKV``."""
        if not isinstance(cache, SharedKV):
            raise TypeError(
                "a layer with kv_shared=True reads its keys and values from an "
                "earlier layer: pass that layer's SharedKV (kv_sharing.py) as cache, "
                f"got {type(cache).__name__}"
            )
        keys, values, padding, start = cache.read(x.shape[1])
        if (keys.shape[1], keys.shape[3]) != (kv_heads, self.head_dim):
            raise ValueError(
                f"the shared keys have {keys.shape[1]} heads of width {keys.shape[3]}; "
                f"this layer needs num_kv_heads={kv_heads} of head_dim={self.head_dim}"
            )
        if keys.dtype != x.dtype or keys.device != x.device:
            raise TypeError(
                f"the shared keys are {keys.dtype} on {keys.device}; this layer's "
                f"input is {x.dtype} on {x.device}"
            )
        return keys, values, padding, start

    def chunk_starts(self, cache, key_padding, key_start: int, batch: int, device):
        """Each sequence's left padding ``(B,)``, where its chunks start: kept by a
        ``ChunkedKVCache``, else counted in the key padding when it starts at
        position 0 (no cache, or a ``KVCache``)."""
        held = cache.cache if isinstance(cache, SharedKV) else cache
        pad = getattr(held, "left_padding", None)
        if pad is not None:
            return pad  # (B,)
        if key_start != 0:
            raise ValueError(
                "a chunked layer needs the keys from position 0 or a ChunkedKVCache "
                f"(make_cache gives one); the cache gave keys from {key_start} on"
            )
        if key_padding is None:
            return torch.zeros(batch, dtype=torch.long, device=device)  # (B,)
        return left_padding(key_padding)  # (B,)

    def sinks_here(self, heads: int) -> torch.Tensor | None:
        """The sink logits ``(H,)`` of the ``heads`` heads computed here
        (``checks.held_heads``)."""
        if self.sinks is None:
            return None
        return held_heads(self.sinks, self.W_query, heads)

    def heads_here(self) -> tuple[int, int]:
        """``(H, H_kv)`` computed in this process: all of them, or its share when
        tensor parallelism split the projections (``checks.heads_here``)."""
        gated = 2 if self.output_gate else 1  # a head's queries, then its gates
        query_rows = rows_here(self.W_query)
        if self.W_key is None:  # a sharing layer: H_kv follows from the query heads
            heads = query_rows // (gated * self.head_dim)
            return heads, heads // (self.num_heads // self.num_kv_heads)
        return heads_here(
            self.num_heads, self.num_kv_heads, query_rows,
            rows_here(self.W_key), self.head_dim, query_width=gated * self.head_dim,
        )

    def make_cache(self, batch_size: int):
        """An empty cache for this layer: rolling with a window, one chunk long with
        chunks. A ``kv_shared`` layer keeps none: wrap its owner's in a
        ``SharedKV``."""
        if self.kv_shared:
            raise ValueError(
                "a layer with kv_shared=True keeps no cache: pass the owning layer's "
                "SharedKV(owner.make_cache(batch_size)) as its cache"
            )
        kind = dict(dtype=self.W_query.weight.dtype, device=self.W_query.weight.device)
        shape = (batch_size, self.heads_here()[1], self.head_dim)  # the heads held here
        if self.chunk_size is not None:
            return ChunkedKVCache(*shape, self.chunk_size, **kind)
        kind["value_dim"] = self.value_head_dim  # d_v
        if self.window is None:
            return KVCache(*shape, self.context_length, **kind)
        return RollingKVCache(*shape, self.window, **kind)

    # --8<-- [end:body]

    def extra_repr(self) -> str:
        extras = [
            f"{name}={value}" for name, value in (
                ("softcap", self.softcap), ("sinks", self.sinks is not None or None),
                ("output_gate", self.output_gate or None),
                ("chunk_size", self.chunk_size), ("nope", self.rope is None or None),
                ("temperature_tuning", self.temperature_tuning),
                ("rope_interleave", self.rope_interleave or None),
                ("value_norm", self.v_norm is not None or None),
                ("values_from_keys", self.values_from_keys or None),
                ("kv_shared", self.kv_shared or None),
                ("value_head_dim", self.value_head_dim
                 if self.value_head_dim != self.head_dim else None),
                ("value_scale", self.value_scale),
                ("softplus_gate", self.softplus_gate),
                ("qk_norm_across_heads", self.qk_norm_across_heads or None),
            ) if value is not None
        ]
        return ", ".join([
            f"num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}, "
            f"head_dim={self.head_dim}, window={self.window}, "
            f"qk_norm={self.q_norm is not None}, scale={self.scale:.4g}", *extras,
            f"fast_path={self.fast_path}",
        ])


# --8<-- [end:class]
