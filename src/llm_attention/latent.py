# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Multi-head latent attention (MLA, DeepSeek-V2 and V3): the cache keeps one small
latent vector per token, not a key and a value per head.

Shapes: ``B`` batch, ``T`` new tokens, ``T_k`` keys attended to, ``d_in`` input width,
``d_out`` output width, ``H = num_heads``, ``d_c = kv_lora_rank`` (the latent),
``d_q = q_lora_rank``, ``d_n = qk_nope_head_dim`` (the part of a head without
positions), ``d_r = qk_rope_head_dim`` (the part that turns), ``d_v = v_head_dim``.

    c      = norm(X W_kv_down[:d_c])      (B, T, d_c)   the latent (cached)
    k_rope = RoPE(X W_kv_down[d_c:])      (B, T, d_r)   one key for all heads (cached)
    Q      = W_query_up(norm(X W_query_down))   -> (B, H, T, d_n + d_r), split into
             q_nope (d_n) and q_rope (d_r, turned by RoPE)
    [k_nope_h, v_h] = c W_kv_up_h         (B, T_k, d_n + d_v) for each head h
    score_h = (q_nope_h . k_nope_h + q_rope_h . k_rope) * scale
    head_h  = softmax(score_h + M) v_h;   out = concat(heads) W_out

Absorbed decoding (``absorb=True``) never rebuilds ``k_nope`` or ``v``. Matrix
products associate, so with ``W_uk_h`` ``(d_n, d_c)`` and ``W_uv_h`` ``(d_v, d_c)``
the two halves of ``W_kv_up_h``:

    q_nope_h . (W_uk_h c_j) = (q_nope_h W_uk_h) . c_j        a query in latent space
    sum_j w_j (W_uv_h c_j)  = W_uv_h (sum_j w_j c_j)         values mixed as latents

Each head then attends over the cached ``[c, k_rope]`` itself, one key "head" of width
``d_c + d_r`` shared by all ``H`` query heads (multi-query attention), and the mixed
latent is projected to ``d_v`` afterwards. Same result, fewer bytes read per decoded
token; more arithmetic per score, which prefill pays for.

``LatentCache`` holds, per token, the latent and the rotary key side by side: ``d_c +
d_r`` numbers per layer (512 + 64 = 576 in DeepSeek-V3, against 128 x (192 + 128) =
40,960 for the keys and values of its 128 heads, were they cached).

``rotary=False`` leaves the ``d_r`` parts unturned: a key part shared by all heads,
without positions, as in Kimi Linear's full layers.

``temperature_tuning`` scales each query by the log of its position, as Llama 4 does
(``attention_variants.temperature_scales``), the way Mistral 4 applies it to latent
attention: ``1 + beta ln(1 + floor(m / L))`` with ``L`` its YaRN
``original_max_position_embeddings``. Positions are counted from each row's first
real token, so a left-padded row gets what its prompt alone gets.

``from_hf_config`` reads a DeepSeek-V3, Kimi Linear or Mistral 4 config
(transformers or ``config.json``); ``from_hf_state_dict`` renames the weights of its
``DeepseekV3Attention`` (``KimiLinearAttention``, ``Mistral4Attention``: the same
names).

Builds on ``attention_variants.py``, ``checks.py``, ``grouped_query.py``,
``hf_config.py``, ``rope.py`` and ``rope_scaling.py`` of this package, imported
relatively: copy them with this file, under any package name (its API page offers the
set as one download). MIT licence: keep the first two lines of each file.
"""

from __future__ import annotations

import numbers

import torch
from torch import nn

from .attention_variants import (
    check_temperature_tuning,
    content_positions,
    temperature_scales,
    variant_attention_explicit,
)
from .checks import check_dropout, check_flag, check_inputs, check_size, rows_here
from .grouped_query import attention_mask, grouped_attention_fast, held_padding
from .hf_config import latent_attention_options, rename_weights
from .rope import RotaryEmbedding
from .rope_scaling import rope_frequencies, yarn_attention_factor

HF_NAMES = {  # Hugging Face name -> ours
    "q_proj": "W_query",
    "q_a_proj": "W_query_down",
    "q_a_layernorm": "query_norm",
    "q_b_proj": "W_query_up",
    "kv_a_proj_with_mqa": "W_kv_down",
    "kv_a_layernorm": "latent_norm",
    "kv_b_proj": "W_kv_up",
    "o_proj": "out_proj",
}


def from_hf_state_dict(state_dict: dict, prefix: str = "") -> dict:
    """Rename one ``DeepseekV3Attention`` layer's weights to ``LatentAttention``'s.

    ``prefix`` picks the layer out of a whole model's state dict, for example
    ``"model.layers.0.self_attn."``; keys that do not start with it are skipped.
    Returns a new dict for ``module.load_state_dict``.
    """
    return rename_weights(state_dict, prefix, HF_NAMES, "a latent attention layer")


def latent_cache_bytes(
    *,
    num_layers: int,
    kv_lora_rank: int,
    qk_rope_head_dim: int,
    num_tokens: int,
    batch_size: int = 1,
    bytes_per_value: int = 2,
) -> int:
    r"""Memory that a latent cache takes, in bytes:

    $$L \times B \times T \times (d_c + d_r) \times \text{bytes per value}$$

    No factor 2 and no head count: one latent and one shared rotary key per token.
    """
    sizes = dict(
        num_layers=num_layers, kv_lora_rank=kv_lora_rank,
        qk_rope_head_dim=qk_rope_head_dim, num_tokens=num_tokens,
        batch_size=batch_size, bytes_per_value=bytes_per_value,
    )
    for name, value in sizes.items():
        check_size(name, value)
    return (
        num_layers * batch_size * num_tokens * (kv_lora_rank + qk_rope_head_dim)
        * bytes_per_value
    )


# --8<-- [start:cache]
class LatentCache:
    """The latents and shared rotary keys of one latent attention layer, preallocated
    for ``context_length`` tokens.

    ``entries[:, t]`` is token ``t``'s latent (its first ``d_c`` numbers) followed by
    its rotary key, already turned (``d_r``): the absorbed path reads keys and values
    from this one tensor without copying it. ``append`` writes new tokens after those
    held and returns all held so far; ``length`` is the position of the next token.
    ``has_padding`` says, as ``KVCache``'s does, whether a padding flag False was ever
    appended (decided from the masks ``append`` is given: a device sync per mask, until
    one brings padding).

    Args:
        batch_size: ``B``.
        kv_lora_rank: ``d_c``, the width of the latent.
        qk_rope_head_dim: ``d_r``, the width of the rotary key.
        context_length: ``T_max``, the most tokens held.
        dtype: the dtype of the stored numbers (the module's).
        device: their device (the module's).

    Shapes:
        ``entries`` ``(B, T_max, d_c + d_r)``, ``key_padding`` ``(B, T_max)`` bool
        (True = a real token). ``append(latent, rope_key, padding_mask=None)`` takes
        ``(B, T_new, d_c)``, ``(B, T_new, d_r)`` and an optional ``(B, T_new)`` bool
        mask; it returns views ``(B, length, d_c + d_r)`` and ``(B, length)``.
    """

    def __init__(
        self,
        batch_size: int,
        kv_lora_rank: int,
        qk_rope_head_dim: int,
        context_length: int,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        for name, value in (
            ("batch_size", batch_size), ("kv_lora_rank", kv_lora_rank),
            ("qk_rope_head_dim", qk_rope_head_dim), ("context_length", context_length),
        ):
            check_size(name, value)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
        width = kv_lora_rank + qk_rope_head_dim  # d_c + d_r
        self.kv_lora_rank = kv_lora_rank
        self.entries = torch.zeros(
            batch_size, context_length, width, dtype=dtype, device=device
        )  # (B, T_max, d_c + d_r)
        self.key_padding = torch.ones(
            batch_size, context_length, dtype=torch.bool, device=device
        )  # (B, T_max), True = real token
        self.length = 0
        self.has_padding = False  # a plain Python flag: reading it costs no sync

    @property
    def context_length(self) -> int:
        return self.entries.shape[1]

    @property
    def nbytes(self) -> int:
        """Bytes of the latents and rotary keys (padding flags not counted)."""
        return self.entries.nbytes

    def reset(self) -> None:
        """Forget every token, to start a new sequence; the storage is kept."""
        self.length = 0
        self.has_padding = False
        self.key_padding.fill_(True)

    def append(self, latent, rope_key, padding_mask=None):
        """Store the new tokens; return ``(entries, key_padding)`` held so far."""
        batch, _, width = self.entries.shape
        d_c = self.kv_lora_rank
        for name, tensor, size in (("latent", latent, d_c),
                                   ("rope_key", rope_key, width - d_c)):
            if not isinstance(tensor, torch.Tensor) or tensor.dim() != 3:
                raise ValueError(
                    f"{name} must be a tensor of shape (B={batch}, T_new, {size}), got "
                    f"{getattr(tensor, 'shape', type(tensor).__name__)}"
                )
            if tensor.shape[0] != batch or tensor.shape[2] != size:
                raise ValueError(
                    f"{name} must have shape (B={batch}, T_new, {size}), "
                    f"got {tuple(tensor.shape)}"
                )
            if tensor.dtype != self.entries.dtype:
                raise TypeError(
                    f"{name} must be {self.entries.dtype} like the cache, "
                    f"got {tensor.dtype}"
                )
        num_new = latent.shape[1]
        if rope_key.shape[1] != num_new:
            raise ValueError(
                f"latent and rope_key must hold the same tokens, got {num_new} and "
                f"{rope_key.shape[1]}"
            )
        start, end = self.length, self.length + num_new
        if end > self.context_length:
            raise ValueError(
                f"the cache holds {start} tokens; adding {num_new} would make {end}, "
                f"more than context_length={self.context_length}"
            )
        if padding_mask is not None and (
            not isinstance(padding_mask, torch.Tensor)
            or padding_mask.dtype != torch.bool
            or tuple(padding_mask.shape) != (batch, num_new)
        ):
            raise ValueError(
                f"padding_mask must be None or a bool tensor of shape "
                f"(B, T_new) = {(batch, num_new)}, got "
                f"{getattr(padding_mask, 'shape', type(padding_mask).__name__)}"
            )
        self.entries[:, start:end, :d_c] = latent  # (B, T_new, d_c)
        self.entries[:, start:end, d_c:] = rope_key  # (B, T_new, d_r)
        if padding_mask is not None:
            self.key_padding[:, start:end] = padding_mask  # (B, T_new)
            self.has_padding = self.has_padding or not bool(padding_mask.all())
        self.length = end
        return self.entries[:, :end], self.key_padding[:, :end]
# --8<-- [end:cache]


class _SumGradientAcrossProcesses(torch.autograd.Function):
    """The identity going forward; going back, the gradient summed over the processes of
    ``group``. Under tensor parallelism each process's heads give a share of the
    gradient of what all of them read (the latent and the rotary key, computed whole
    in each)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        grad = grad.clone()
        torch.distributed.all_reduce(grad, group=ctx.group)
        return grad, None


def deinterleave(x: torch.Tensor) -> torch.Tensor:
    """``(x0, x1, x2, x3, ...) -> (x0, x2, ..., x1, x3, ...)``: DeepSeek's rotary pairs
    are neighbours ``(2i, 2i + 1)``; gathered into halves, ``rope.py`` turns them.
    Queries and keys are reordered alike, so every score stays the same."""
    return torch.cat((x[..., 0::2], x[..., 1::2]), dim=-1)


# --8<-- [start:class]
class LatentAttention(nn.Module):
    r"""Multi-head latent attention, causal, with decoupled rotary keys.

    $$\mathrm{head}_h = \mathrm{softmax}\Big(s\,\big(q^{n}_h \cdot W^{uk}_h c_j
        + R_m q^{r}_h \cdot R_j k^{r}_j\big) + M\Big)_j\, W^{uv}_h c_j$$

    where $c_j$ is token $j$'s latent (``d_c`` numbers), $k^r_j$ its rotary key
    (``d_r``, shared by every head), $W^{uk}_h, W^{uv}_h$ head $h$'s slices of
    ``W_kv_up``, $R_m$ the rotation at position $m$, $s$ the score scale and $M$
    hides the future and padding. Only $c_j$ and $R_j k^r_j$ are cached.

    Args:
        d_in: width of each input token vector (the model width).
        d_out: width of the output (usually the model width too).
        context_length: the most positions, cached ones included.
        dropout: probability of dropping an attention weight while training.
        num_heads: ``H``.
        kv_lora_rank: ``d_c``, the width of the cached latent.
        qk_nope_head_dim: ``d_n``, each head's query/key part without positions.
        qk_rope_head_dim: ``d_r``, each head's query/key part that turns (even).
        v_head_dim: ``d_v``, each head's value width.
        q_lora_rank: ``d_q``, the width of the query's own bottleneck; None for a
            single query projection (``W_query``, DeepSeek-V2-Lite).
        bias: a bias on ``W_query_down`` (or ``W_query``), ``W_kv_down`` and
            ``out_proj`` (``attention_bias``).
        rope_base: the base of the rotary angles.
        rope_scaling: None, or a dict with ``rope_type`` and its parameters, as
            ``rope_scaling.rope_frequencies`` takes them (DeepSeek-V3: ``yarn``).
        rope_interleave: rotary pairs are neighbours ``(2i, 2i + 1)`` (DeepSeek's
            weights) rather than halves ``(i, i + d_r / 2)``.
        rotary: turn the ``d_r`` parts by position. False: they stay a key part
            shared by all heads, without positions (Kimi Linear's full layers).
        norm_eps: the epsilon of both RMSNorms.
        scale: the score scale. None: ``(d_n + d_r) ** -0.5``, times
            ``(0.1 mscale_all_dim ln(factor) + 1) ** 2`` with YaRN's
            ``mscale_all_dim`` (DeepSeek's rule).
        temperature_tuning: None, or ``(floor_scale, attn_scale, offset)``: each
            query, nope and rotary parts, is multiplied by
            ``1 + attn_scale * ln(1 + floor((m + offset) / floor_scale))`` at
            position ``m`` counted from its row's first real token (Mistral 4:
            ``(original_max_position_embeddings, llama_4_scaling_beta, 0)``).
        absorb: attend in latent space (decoding reads only the cache); the
            same result.
        fast_path: use ``scaled_dot_product_attention`` (same result).

    Shapes:
        ``forward(x, padding_mask=None, *, cache=None)``: ``x`` ``(B, T, d_in)``,
        ``padding_mask`` ``(B, T)`` bool (True = real token), output
        ``(B, T, d_out)``. With a ``LatentCache``, ``x`` holds only the new tokens,
        at positions ``cache.length..``.
    """

    # --8<-- [start:init]
    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        *,
        kv_lora_rank: int,
        qk_nope_head_dim: int,
        qk_rope_head_dim: int,
        v_head_dim: int,
        q_lora_rank: int | None = None,
        bias: bool = False,
        rope_base: float = 10000.0,
        rope_scaling: dict | None = None,
        rope_interleave: bool = True,
        rotary: bool = True,
        norm_eps: float = 1e-6,
        scale: float | None = None,
        temperature_tuning: tuple[float, ...] | None = None,
        absorb: bool = False,
        fast_path: bool = False,
    ) -> None:
        sizes = dict(
            d_in=d_in, d_out=d_out, context_length=context_length, num_heads=num_heads,
            kv_lora_rank=kv_lora_rank, qk_nope_head_dim=qk_nope_head_dim,
            qk_rope_head_dim=qk_rope_head_dim, v_head_dim=v_head_dim,
        )
        if q_lora_rank is not None:
            sizes["q_lora_rank"] = q_lora_rank
        for name, value in sizes.items():
            check_size(name, value)
        if rotary and qk_rope_head_dim % 2 != 0:
            raise ValueError(
                "qk_rope_head_dim must be even (rotary dimensions turn in pairs), "
                f"got {qk_rope_head_dim}"
            )
        check_dropout(dropout)
        flags = dict(bias=bias, rope_interleave=rope_interleave, rotary=rotary,
                     absorb=absorb, fast_path=fast_path)
        for name, flag in flags.items():
            check_flag(name, flag)
        for name, value in (("norm_eps", norm_eps), ("scale", scale)):
            if value is None and name == "scale":
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(f"{name} must be a float, got {value!r}")
            if not value > 0:
                raise ValueError(f"{name} must be positive, got {value}")
        if rope_scaling is not None and not (
            isinstance(rope_scaling, dict) and "rope_type" in rope_scaling
        ):
            raise ValueError(
                "rope_scaling must be None or a dict with a 'rope_type' and its "
                f"parameters, got {rope_scaling!r}"
            )
        if rope_scaling is not None and not rotary:
            raise ValueError("rope_scaling needs rotary=True, got rotary=False")
        if temperature_tuning is not None:
            check_temperature_tuning(temperature_tuning)
        super().__init__()
        self.context_length = context_length
        self.num_heads = num_heads
        self.kv_lora_rank = kv_lora_rank  # d_c
        self.qk_nope_head_dim = qk_nope_head_dim  # d_n
        self.qk_rope_head_dim = qk_rope_head_dim  # d_r
        self.v_head_dim = v_head_dim  # d_v
        self.rope_interleave = rope_interleave
        self.absorb = absorb  # both may be switched later
        self.fast_path = fast_path
        self.temperature_tuning = (  # (floor_scale, attn_scale[, offset])
            None if temperature_tuning is None
            else tuple(float(v) for v in temperature_tuning)
        )
        self.scale = float(scale) if scale is not None else default_scale(
            qk_nope_head_dim + qk_rope_head_dim, rope_scaling
        )
        q_width = num_heads * (qk_nope_head_dim + qk_rope_head_dim)  # H (d_n + d_r)
        if q_lora_rank is None:
            self.W_query = nn.Linear(d_in, q_width, bias=bias)
            self.W_query_down = self.query_norm = self.W_query_up = None
        else:  # a bottleneck for the queries too (it saves weights, not cache)
            self.W_query = None
            self.W_query_down = nn.Linear(d_in, q_lora_rank, bias=bias)  # (d_q, d_in)
            self.query_norm = nn.RMSNorm(q_lora_rank, eps=norm_eps)
            self.W_query_up = nn.Linear(q_lora_rank, q_width, bias=False)
        self.W_kv_down = nn.Linear(
            d_in, kv_lora_rank + qk_rope_head_dim, bias=bias
        )  # (d_c + d_r, d_in): the latent and the shared rotary key
        self.latent_norm = nn.RMSNorm(kv_lora_rank, eps=norm_eps)
        self.W_kv_up = nn.Linear(
            kv_lora_rank, num_heads * (qk_nope_head_dim + v_head_dim), bias=False
        )  # (H (d_n + d_v), d_c): every head's k_nope and v from the latent
        self.out_proj = nn.Linear(num_heads * v_head_dim, d_out, bias=bias)
        self.rope = None  # without positions: no tables of context_length rows
        if rotary:
            inv_freq, attention_factor = rope_frequencies(
                qk_rope_head_dim, rope_base, **(rope_scaling or {})
            )  # (d_r / 2,) and a float
            self.rope = RotaryEmbedding(
                qk_rope_head_dim, context_length, rope_base,
                inv_freq=inv_freq, attention_factor=attention_factor,
            )
        self.dropout = nn.Dropout(dropout)
    # --8<-- [end:init]

    @classmethod
    def from_hf_config(cls, config, layer_idx: int = 0, **overrides):
        """The attention of layer ``layer_idx`` of a DeepSeek-V3 config, or of a
        full layer of a Kimi Linear config (transformers object or ``config.json``
        dict). ``overrides`` replace options, for example
        ``context_length=4096`` (the default is ``max_position_embeddings``)."""
        return cls(**{**latent_attention_options(config, layer_idx), **overrides})

    def up_projections(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``W_uk`` ``(H, d_n, d_c)`` and ``W_uv`` ``(H, d_v, d_c)``: views of
        ``W_kv_up``'s weight, one slice per head."""
        weight = self.up_weight().view(
            -1, self.qk_nope_head_dim + self.v_head_dim, self.kv_lora_rank
        )  # (H, d_n + d_v, d_c)
        return weight.split([self.qk_nope_head_dim, self.v_head_dim], dim=1)

    def up_weight(self) -> torch.Tensor:
        """``W_kv_up``'s weight ``(H (d_n + d_v), d_c)``: the rows of this process's
        heads when tensor parallelism split it. Used as a plain tensor in both paths, so
        that the gradient of the latent is summed across processes in one place."""
        weight = self.W_kv_up.weight
        return weight.to_local() if hasattr(weight, "to_local") else weight

    def turn(self, x: torch.Tensor, start: int) -> torch.Tensor:
        """Rotary positions on ``x`` ``(B, H or 1, T, d_r)`` at ``start..`` (none
        when the layer has no rotary part)."""
        if self.rope is None:
            return x
        if self.rope_interleave:
            x = deinterleave(x)  # neighbours -> halves
        return self.rope(x, start)  # (B, H or 1, T, d_r)

    # --8<-- [start:forward]
    def forward(self, x, padding_mask=None, *, cache=None):
        """Attend over ``x`` ``(B, T, d_in)``; return ``(B, T, d_out)``."""
        check_flag("absorb", self.absorb)
        check_flag("fast_path", self.fast_path)
        weight = self.W_kv_down.weight
        check_inputs(x, padding_mask, weight.shape[1], self.context_length, weight)
        start = 0
        if cache is not None:
            if not isinstance(cache, LatentCache):
                raise TypeError(
                    f"cache must be a LatentCache or None, got {type(cache).__name__}"
                )
            start = cache.length  # position of the first new token
        b, num_tokens, _ = x.shape  # (B, T, d_in)
        if start + num_tokens > self.context_length:
            raise ValueError(
                f"positions {start}..{start + num_tokens - 1} go beyond "
                f"context_length={self.context_length}"
            )
        d_c, d_n = self.kv_lora_rank, self.qk_nope_head_dim
        if self.W_query is not None:
            queries = self.W_query(x)  # (B, T, H (d_n + d_r))
        else:
            queries = self.W_query_up(self.query_norm(self.W_query_down(x)))
        heads = self.heads_here()  # all, or this process's share
        queries = queries.view(b, num_tokens, heads, -1).transpose(1, 2)
        q_nope, q_rope = queries.split([d_n, self.qk_rope_head_dim], dim=-1)
        q_rope = self.turn(q_rope, start)  # (B, H, T, d_r)
        if self.temperature_tuning is not None:  # sharper far into the text
            scales = self.query_scales(cache, padding_mask, start, num_tokens, x)
            q_nope, q_rope = q_nope * scales, q_rope * scales  # (B, H, T, d_n), d_r

        compressed = self.W_kv_down(x)  # (B, T, d_c + d_r)
        latent, rope_key = compressed.split([d_c, self.qk_rope_head_dim], dim=-1)
        latent = self.latent_norm(latent)  # (B, T, d_c)
        split = getattr(self.W_kv_up.weight, "device_mesh", None)  # tensor parallel
        if split is not None and torch.is_grad_enabled():
            # Each process's heads read all of the latent and the rotary key, so each
            # gives a share of their gradient: summed here, everything before them
            # (latent_norm, W_kv_down, x) gets the whole gradient in every process.
            group = split.get_group()
            latent = _SumGradientAcrossProcesses.apply(latent, group)  # (B, T, d_c)
            rope_key = _SumGradientAcrossProcesses.apply(rope_key, group)  # (B, T, d_r)
        rope_key = self.turn(rope_key.unsqueeze(1), start).squeeze(1)  # (B, T, d_r)
        if cache is not None:  # held and new tokens: (B, T_k, d_c + d_r)
            entries, padding_mask = cache.append(latent, rope_key, padding_mask)
            padding_mask = held_padding(cache, padding_mask)  # None: no padding held
        else:
            entries = torch.cat((latent, rope_key), dim=-1)  # (B, T, d_c + d_r)
        num_keys = entries.shape[1]  # T_k
        mask_bool = None  # one new token and no padding: no key is hidden
        if num_tokens > 1 or padding_mask is not None:
            mask_bool = attention_mask(
                start, num_tokens, start + num_tokens - num_keys, num_keys,
                key_padding=padding_mask, device=x.device,
            )  # (T, T_k) or (B, 1, T, T_k); True = masked
        if self.absorb:
            context_vec = self.attend_absorbed(q_nope, q_rope, entries, mask_bool)
        else:
            context_vec = self.attend_plain(q_nope, q_rope, entries, mask_bool)
        context_vec = context_vec.transpose(1, 2).reshape(b, num_tokens, -1)
        return self.out_proj(context_vec)  # (B, T, H d_v) -> (B, T, d_out)
    # --8<-- [end:forward]

    # --8<-- [start:plain]
    def attend_plain(self, q_nope, q_rope, entries, mask_bool):
        """Rebuild every head's keys and values from the latents, then attend:
        ``(B, H, T, d_v)``."""
        b, num_keys, _ = entries.shape
        d_c, d_n = self.kv_lora_rank, self.qk_nope_head_dim
        latent, rope_key = entries.split([d_c, self.qk_rope_head_dim], dim=-1)
        kv = nn.functional.linear(latent, self.up_weight())  # (B, T_k, H (d_n + d_v))
        kv = kv.view(b, num_keys, q_nope.shape[1], -1)
        k_nope, values = kv.transpose(1, 2).split([d_n, self.v_head_dim], dim=-1)
        rope_key = rope_key.unsqueeze(1).expand(-1, q_nope.shape[1], -1, -1)
        keys = torch.cat((k_nope, rope_key), dim=-1)  # (B, H, T_k, d_n + d_r)
        queries = torch.cat((q_nope, q_rope), dim=-1)  # (B, H, T, d_n + d_r)
        return self.attend(queries, keys, values, mask_bool)  # (B, H, T, d_v)
    # --8<-- [end:plain]

    # --8<-- [start:absorbed]
    def attend_absorbed(self, q_nope, q_rope, entries, mask_bool):
        """Attend in latent space: ``q_nope W_uk`` meets the cached latents, and the
        mixed latent goes through ``W_uv`` afterwards: ``(B, H, T, d_v)``."""
        b, num_heads, num_tokens, _ = q_nope.shape
        w_uk, w_uv = self.up_projections()  # (H, d_n, d_c), (H, d_v, d_c)
        q_latent = torch.einsum("bhtn,hnc->bhtc", q_nope, w_uk)  # (B, H, T, d_c)
        queries = torch.cat((q_latent, q_rope), dim=-1)  # (B, H, T, d_c + d_r)
        # One key head for all H query heads: fold the heads into query rows, so
        # that the cache is read as it is stored, once, never copied per head.
        rows = queries.reshape(b, 1, num_heads * num_tokens, -1)  # (B, 1, H T, d_c+d_r)
        keys = entries.unsqueeze(1)  # (B, 1, T_k, d_c + d_r)
        mask_rows = None if mask_bool is None else fold_mask(mask_bool, num_heads)
        # The values are the latents, the keys' first d_c numbers. Given the keys whole
        # as values, the kernel reads queries, keys and values of one width (which the
        # fused kernels want); the first d_c numbers of each row it returns are kept.
        mixed = self.attend(rows, keys, keys, mask_rows, folded=True)  # (B, 1, H T, .)
        mixed = mixed[..., : self.kv_lora_rank]  # (B, 1, H T, d_c + d_r) -> (.., d_c)
        mixed = mixed.reshape(b, num_heads, num_tokens, -1)  # (B, H, T, d_c)
        return torch.einsum("bhtc,hvc->bhtv", mixed, w_uv)  # (B, H, T, d_v)
    # --8<-- [end:absorbed]

    def attend(self, queries, keys, values, mask_bool, *, folded=False):
        """``softmax(Q K^T * scale + M) V``, keys and values shared by groups of
        query heads when they have fewer heads; ``folded``: the query rows are heads
        folded together, not positions in order, so a mask is given whenever a key
        is hidden. ``mask_bool`` None: no key is hidden from any query."""
        if not self.fast_path:
            return variant_attention_explicit(
                queries, keys, values, mask_bool, self.dropout, scale=self.scale
            )
        num_tokens, num_keys = queries.shape[2], keys.shape[2]
        causal = mask_bool is not None and not folded and mask_bool.dim() == 2 and (
            num_tokens == 1 or num_keys == num_tokens
        )  # the kernel can make the mask itself
        return grouped_attention_fast(
            queries, keys, values, None if causal else mask_bool,
            self.dropout.p if self.training else 0.0, causal=causal and num_tokens > 1,
            scale=self.scale,
        )

    def query_scales(self, cache, padding_mask, start: int, num_tokens: int, x):
        """Temperature tuning's factor for each new query, ``(B or 1, 1, T, 1)`` in
        ``x``'s dtype, at positions counted from each row's first real token (the
        cache's key padding says how many real tokens came before)."""
        held = None if cache is None else cache.key_padding[:, :start]  # (B, start)
        where = content_positions(num_tokens, start, padding_mask, held, x.device)
        scales = temperature_scales(where, *self.temperature_tuning)  # (B or 1, T)
        return scales[:, None, :, None].to(x.dtype)  # (B or 1, 1, T, 1)

    def heads_here(self) -> int:
        """``H`` computed in this process: all the heads or, when tensor parallelism
        split the query and up-projections by rows (``parallelize_module`` with
        ``ColwiseParallel``), this process's share. The latent is not split: every
        process holds all of it, and its whole cache."""
        query = self.W_query if self.W_query is not None else self.W_query_up
        query_width = self.qk_nope_head_dim + self.qk_rope_head_dim  # rows per head
        up_width = self.qk_nope_head_dim + self.v_head_dim
        query_rows, up_rows = rows_here(query), rows_here(self.W_kv_up)
        heads = query_rows // query_width
        if query_rows % query_width or up_rows != heads * up_width or heads == 0:
            raise ValueError(
                f"this process holds {query_rows} query rows and {up_rows} rows of "
                f"W_kv_up: expected whole heads ({query_width} query rows and "
                f"{up_width} W_kv_up rows each), the same heads in both; the "
                f"processes must split num_heads={self.num_heads} evenly"
            )
        return heads

    def make_cache(self, batch_size: int) -> LatentCache:
        """An empty ``LatentCache`` for this layer."""
        weight = self.W_kv_down.weight
        return LatentCache(
            batch_size, self.kv_lora_rank, self.qk_rope_head_dim, self.context_length,
            dtype=weight.dtype, device=weight.device,
        )

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, kv_lora_rank={self.kv_lora_rank}, "
            f"qk_nope_head_dim={self.qk_nope_head_dim}, "
            f"qk_rope_head_dim={self.qk_rope_head_dim}, v_head_dim={self.v_head_dim}, "
            f"scale={self.scale:.4g}, absorb={self.absorb}, fast_path={self.fast_path}"
            + ("" if self.rope is not None else ", rotary=False")
            + ("" if self.temperature_tuning is None
               else f", temperature_tuning={self.temperature_tuning}")
        )


# --8<-- [end:class]


def fold_mask(mask_bool: torch.Tensor, num_heads: int) -> torch.Tensor:
    """The mask of ``T`` queries, ``(T, T_k)`` or ``(B, 1, T, T_k)``, repeated for each
    of ``num_heads`` heads folded into rows: ``(H T, T_k)`` or ``(B, 1, H T, T_k)``
    (a view when ``T`` is 1)."""
    *lead, num_tokens, num_keys = mask_bool.shape
    if not lead:  # (T, T_k) -> (H, T, T_k) -> (H T, T_k)
        return mask_bool.expand(num_heads, -1, -1).reshape(-1, num_keys)
    # (B, 1, T, T_k) -> (B, H, T, T_k) -> (B, 1, H T, T_k)
    folded = mask_bool.expand(-1, num_heads, -1, -1)
    return folded.reshape(mask_bool.shape[0], 1, num_heads * num_tokens, num_keys)


def default_scale(qk_head_dim: int, rope_scaling: dict | None) -> float:
    """``qk_head_dim ** -0.5``; with YaRN and ``mscale_all_dim``, times the square of
    ``0.1 * mscale_all_dim * ln(factor) + 1`` (DeepSeek-V3: 1.3689 ** 2)."""
    scale = qk_head_dim**-0.5
    params = rope_scaling or {}
    if params.get("rope_type", "default") != "default" and params.get("mscale_all_dim"):
        scale *= yarn_attention_factor(params["factor"], params["mscale_all_dim"]) ** 2
    return scale
