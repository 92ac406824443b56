# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Linear-attention layers of the 2026 hybrid families: Gated DeltaNet (Qwen3-Next,
Qwen3.5, OLMo-Hybrid) and Kimi Delta Attention (Kimi Linear). A fixed-size state
replaces the KV cache.

Shapes: ``B`` batch, ``T`` tokens, ``d_in`` input width, ``H`` heads (value heads),
``H_k`` key heads (``H`` is a multiple: each key head serves ``H / H_k`` value heads),
``d_k``, ``d_v`` key and value widths, ``C = 2 H_k d_k + H d_v``, ``K`` the
convolution's kernel size.

    [q, k, v] = SiLU(conv_K(X W_qkv))       (B, T, C): causal, depth-wise, kernel K
    q = l2norm(q) / sqrt(d_k),  k = l2norm(k)          per head
    beta = sigmoid(X W_beta)                (B, T, H); twice that in OLMo-Hybrid
    g = -exp(A_log) * softplus(X W_decay + dt_bias)    (B, T, H) or (B, T, H, d_k)
    o = gated delta rule(q, k, v, g, beta)  (B, H, T, d_v)   (``delta_rule.py``)
    out = (RMSNorm(o) * act(X W_gate)) W_out            (B, T, d_out)

``GatedDeltaNet`` has one decay per head and a SiLU output gate; ``KimiDeltaAttention``
one decay per key channel (``W_decay`` a low-rank pair), one head width for keys and
values, a low-rank sigmoid output gate. Both share ``DeltaRuleLayer``'s forward.

Padding: left padding only (``delta_cache.check_left_padding``). A padded position
enters the convolution as zeros and leaves the state as it was (``beta = 0``,
``g = 0``), so a padded row computes what its prompt alone computes; its outputs at
padded positions are zeros.

``from_hf_config`` reads a Qwen3-Next, Qwen3.5, OLMo-Hybrid or Kimi Linear config;
``from_hf_state_dict`` renames transformers' ``Qwen3NextGatedDeltaNet``,
``Qwen3_5GatedDeltaNet``, ``OlmoHybridGatedDeltaNet`` or ``KimiLinearDeltaAttention``
weights.

Builds on ``checks.py``, ``delta_cache.py``, ``delta_rule.py`` and ``hf_config.py`` of
this package, imported relatively: copy them with this file, under any package name
(its API page offers the set as one download). MIT licence: keep the first two lines of
each file.
"""

from __future__ import annotations

import math
import numbers

import torch
import torch.nn.functional as F
from torch import nn

from .checks import check_flag, check_size
from .delta_cache import (
    DeltaStateCache, check_state_call, check_state_cache, make_state_cache,
    run_in_pieces, state_cache_shapes,
)
from .delta_rule import chunked, recurrent, step, step_in_place
from .hf_config import config_dict, linear_attention_options, rename_weights

FORMS = ("chunked", "recurrent")


def l2_normalize(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``x / sqrt(|x|^2 + eps)`` over the last axis (transformers' and fla's eps)."""
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


class GatedRMSNorm(nn.Module):
    """RMSNorm over each head's ``d_v`` outputs, then times ``act(gate)``:
    ``w * o / rms(o) * act(z)``, computed in float32 at least. ``act`` is ``"silu"``
    (Gated DeltaNet) or ``"sigmoid"`` (KDA)."""

    def __init__(self, width: int, eps: float = 1e-6, activation: str = "silu") -> None:
        check_size("width", width)
        if activation not in ("silu", "sigmoid"):
            raise ValueError(
                f"activation must be 'silu' or 'sigmoid', got {activation!r}"
            )
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))  # (d_v,)
        self.eps = eps
        self.activation = activation

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        dtype = torch.promote_types(x.dtype, torch.float32)
        wide = x.to(dtype)  # (..., d_v)
        normed = wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + self.eps)
        act = F.silu if self.activation == "silu" else torch.sigmoid
        return (self.weight.to(dtype) * normed * act(gate.to(dtype))).to(x.dtype)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}, activation={self.activation}"


class DeltaRuleLayer(nn.Module):
    """What Gated DeltaNet and Kimi Delta Attention share: the query/key/value
    projection and its short convolution, the delta rule, the gated norm and the
    output projection. Subclasses give ``gates`` (``beta`` and ``g``) and
    ``output_gate``.

    ``form``: ``"chunked"`` (chunks of ``chunk_size``) or ``"recurrent"`` (token by
    token) for prompts; one token always takes ``delta_rule.step`` (without
    gradients, ``step_in_place``: a cache's state is then updated where it lies). The
    forms give the same result; the attribute may be switched at any time.
    """

    def __init__(
        self, d_in: int, d_out: int, num_heads: int, num_key_heads: int,
        key_head_dim: int, value_head_dim: int, conv_kernel: int, norm_eps: float,
        chunk_size: int, form: str, gate_activation: str,
    ) -> None:
        sizes = dict(d_in=d_in, d_out=d_out, num_heads=num_heads,
                     num_key_heads=num_key_heads, key_head_dim=key_head_dim,
                     value_head_dim=value_head_dim, conv_kernel=conv_kernel,
                     chunk_size=chunk_size)
        for name, value in sizes.items():
            check_size(name, value)
        if num_heads % num_key_heads:
            raise ValueError(
                "num_key_heads must divide num_heads (each key head serves a group of "
                f"value heads), got num_heads={num_heads}, "
                f"num_key_heads={num_key_heads}"
            )
        if isinstance(norm_eps, bool) or not isinstance(norm_eps, numbers.Real) or not (
            norm_eps > 0
        ):
            raise ValueError(f"norm_eps must be a positive float, got {norm_eps!r}")
        check_form(form)
        super().__init__()
        self.num_heads, self.num_key_heads = num_heads, num_key_heads
        self.key_head_dim, self.value_head_dim = key_head_dim, value_head_dim
        self.chunk_size, self.form = chunk_size, form
        channels = 2 * num_key_heads * key_head_dim + num_heads * value_head_dim  # C
        self.W_qkv = nn.Linear(d_in, channels, bias=False)  # queries, keys, values
        self.conv = nn.Conv1d(channels, channels, conv_kernel, groups=channels,
                              bias=False)  # (C, 1, K): one kernel per channel
        self.out_norm = GatedRMSNorm(value_head_dim, norm_eps, gate_activation)
        self.out_proj = nn.Linear(num_heads * value_head_dim, d_out, bias=False)

    def forward(self, x, padding_mask=None, *, cache=None):
        """Read ``x`` ``(B, T, d_in)``; return ``(B, T, d_out)``. With a
        ``DeltaStateCache``, ``x`` holds only the new tokens."""
        check_state_call(x, padding_mask, cache, self.W_qkv.weight,
                         self.make_cache_shapes)
        check_form(self.form)
        pieces = run_in_pieces(self, x, padding_mask, cache)  # stops to keep snapshots
        if pieces is not None:
            return pieces  # (B, T, d_out)
        if padding_mask is not None:
            x = x * padding_mask.unsqueeze(-1)  # (B, T, d_in): padding reads as zeros
        b, num_tokens, _ = x.shape
        window = cache.conv_window if cache is not None else x.new_zeros(
            b, self.conv.in_channels, self.conv.kernel_size[0] - 1
        )  # (B, C, K - 1): the inputs before these tokens
        mixed, window = self.short_conv(self.W_qkv(x), window)  # (B, T, C)
        dtype = torch.promote_types(x.dtype, torch.float32)  # the rule in float32+
        queries, keys, values = self.split_heads(mixed.to(dtype))
        queries = l2_normalize(queries) * self.key_head_dim**-0.5  # (B, H_k, T, d_k)
        keys = l2_normalize(keys)  # (B, H_k, T, d_k)
        group = self.num_heads // self.num_key_heads  # value heads per key head
        queries = queries.repeat_interleave(group, dim=1)  # (B, H, T, d_k)
        keys = keys.repeat_interleave(group, dim=1)  # (B, H, T, d_k)
        beta, g = self.gates(x)  # (B, H, T), (B, H, T) or (B, H, T, d_k)
        if padding_mask is not None:  # a padded position leaves the state as it was
            real = padding_mask.unsqueeze(1).to(dtype)  # (B, 1, T)
            beta = beta * real  # nothing written
            g = g * (real if g.dim() == 3 else real.unsqueeze(-1))  # nothing forgotten
        state = None if cache is None else cache.state  # (B, H, d_k, d_v)
        out, state = self.rule(queries, keys, values, g, beta, state)  # (B, H, T, d_v)
        out = out.transpose(1, 2).to(x.dtype)  # (B, T, H, d_v)
        gate = self.output_gate(x)  # (B, T, H d_v)
        gate = gate.view(b, num_tokens, self.num_heads, -1)  # (B, T, H, d_v)
        out = self.out_norm(out, gate).reshape(b, num_tokens, -1)  # (B, T, H d_v)
        out = self.out_proj(out)  # (B, T, d_out)
        if padding_mask is not None:
            out = out * padding_mask.unsqueeze(-1)  # (B, T, d_out): zeros at padding
        if cache is not None:
            cache.update(window, state, num_tokens, padding_mask)
        return out

    # --8<-- [start:short_conv]
    def short_conv(self, mixed: torch.Tensor, window: torch.Tensor):
        """Causal depth-wise convolution over time: each of the ``C`` channels mixes
        its own last ``K`` inputs. ``mixed`` ``(B, T, C)``, ``window`` ``(B, C, K - 1)``
        (the inputs before these); returns SiLU of the result ``(B, T, C)`` and the
        window after them ``(B, C, K - 1)``."""
        inputs = torch.cat((window, mixed.transpose(1, 2)), dim=-1)  # (B, C, K-1+T)
        out = F.silu(self.conv(inputs))  # (B, C, T): no padding, the window is it
        return out.transpose(1, 2), inputs[:, :, mixed.shape[1]:]  # .., (B, C, K - 1)
    # --8<-- [end:short_conv]

    def split_heads(self, mixed: torch.Tensor):
        """``(B, T, C)`` -> queries, keys ``(B, H_k, T, d_k)``, values
        ``(B, H, T, d_v)``."""
        b, num_tokens, _ = mixed.shape
        width = self.num_key_heads * self.key_head_dim
        q, k, v = mixed.split([width, width, self.num_heads * self.value_head_dim], -1)
        keys = (b, num_tokens, self.num_key_heads, self.key_head_dim)
        return (q.reshape(keys).transpose(1, 2), k.reshape(keys).transpose(1, 2),
                v.reshape(b, num_tokens, self.num_heads, -1).transpose(1, 2))

    def rule(self, queries, keys, values, g, beta, state):
        """The gated delta rule in this layer's ``form``; one token takes one step."""
        if queries.shape[2] == 1:  # decoding
            if state is None:
                state = values.new_zeros(*keys.shape[:2], keys.shape[-1],
                                         values.shape[-1])  # (B, H, d_k, d_v)
            one = (queries[:, :, 0], keys[:, :, 0], values[:, :, 0], g[:, :, 0],
                   beta[:, :, 0])  # (B, H, d_k), ..., (B, H)
            if torch.is_grad_enabled() or not state.is_contiguous():
                out, state = step(*one, state)  # (B, H, d_v)
            else:  # the cache's state updated where it lies: no new tensor per token
                out = step_in_place(*one, state)  # (B, H, d_v)
            return out.unsqueeze(2), state  # (B, H, 1, d_v)
        if self.form == "recurrent":
            return recurrent(queries, keys, values, g, beta, state)
        return chunked(queries, keys, values, g, beta, state, self.chunk_size)

    def gates(self, x: torch.Tensor):
        """``beta`` ``(B, H, T)`` and ``g`` from ``x`` ``(B, T, d_in)``."""
        raise NotImplementedError

    def output_gate(self, x: torch.Tensor) -> torch.Tensor:
        """The gate of the output norm, ``(B, T, H d_v)``."""
        raise NotImplementedError

    def check_cache(self, cache, x) -> None:
        """A cache must be this layer's ``DeltaStateCache``, for ``x``'s batch."""
        if cache is not None:
            check_state_cache(cache, self.make_cache_shapes(x.shape[0]))

    def make_cache_shapes(self, batch_size: int) -> tuple:
        """The window's and the state's shapes for ``batch_size`` sequences."""
        return state_cache_shapes(batch_size, self.num_heads, self.key_head_dim,
                                  self.value_head_dim, self.conv)

    def make_cache(self, batch_size: int) -> DeltaStateCache:
        """An empty ``DeltaStateCache`` for this layer."""
        return make_state_cache(batch_size, self.num_heads, self.key_head_dim,
                                self.value_head_dim, self.conv)

    def extra_repr(self) -> str:
        extra = ", negative_eigenvalues=True" if getattr(
            self, "negative_eigenvalues", False) else ""
        return (f"num_heads={self.num_heads}, num_key_heads={self.num_key_heads}, "
                f"key_head_dim={self.key_head_dim}, "
                f"value_head_dim={self.value_head_dim}, form={self.form!r}, "
                f"chunk_size={self.chunk_size}{extra}")


def check_form(form: object) -> None:
    """``form`` must name one of ``FORMS``."""
    if form not in FORMS:
        raise ValueError(f"form must be one of {', '.join(FORMS)}, got {form!r}")


def _decay_parameters(num_values: int, num_heads: int):
    """``A_log`` ``(H,)`` and ``dt_bias`` ``(num_values,)``, started as Mamba starts
    them: ``A`` in ``[1, 16]``, ``softplus(dt_bias)`` in ``[0.001, 0.1]``."""
    a = torch.empty(num_heads).uniform_(1.0, 16.0)
    dt = torch.empty(num_values).uniform_(math.log(1e-3), math.log(1e-1)).exp()
    return nn.Parameter(a.log()), nn.Parameter(dt + torch.log(-torch.expm1(-dt)))


class GatedDeltaNet(DeltaRuleLayer):
    r"""Gated DeltaNet as Qwen3-Next, Qwen3.5 and OLMo-Hybrid run it: one decay per
    head and token, grouped key heads, a SiLU output gate.

    $$S_t = e^{g_t}\,S_{t-1} + \beta_t k_t\,(v_t - e^{g_t} S_{t-1}^\top k_t)^\top,
      \qquad o_t = S_t^\top q_t$$

    Per write, the state is multiplied by ``I - beta k k^T`` (``k`` of unit length):
    along ``k`` it keeps ``1 - beta`` of what it held. With ``beta`` in ``(0, 1)``
    that share lies in ``(0, 1)``: the old value along ``k`` fades towards the new
    one. ``negative_eigenvalues`` doubles ``beta`` into ``(0, 2)`` (OLMo-Hybrid), so
    the share reaches down to ``-1``: a write can also flip the sign of what the
    state holds along ``k``, which a state that only fades cannot do.

    Args:
        d_in: width of each input token vector (the model width).
        d_out: width of the output (the model width too).
        num_heads: ``H``, the value heads, each with its own state.
        num_key_heads: ``H_k``, query/key heads (a divisor of ``H``); None: ``H``.
        key_head_dim: ``d_k``.
        value_head_dim: ``d_v``.
        conv_kernel: ``K``, the short convolution's length (4 in every family).
        norm_eps: the epsilon of the output norm.
        chunk_size: tokens per chunk in the chunked form.
        form: ``"chunked"`` or ``"recurrent"`` (same result).
        negative_eigenvalues: ``beta = 2 sigmoid(X W_beta)`` instead of
            ``sigmoid(X W_beta)`` (OLMo-Hybrid's ``linear_allow_neg_eigval``).

    Shapes:
        ``forward(x, padding_mask=None, *, cache=None)``: ``x`` ``(B, T, d_in)``,
        ``padding_mask`` ``(B, T)`` bool (True = real token; left padding),
        ``cache`` a ``DeltaStateCache`` from ``make_cache``; output ``(B, T, d_out)``.
    """

    def __init__(
        self, d_in: int, d_out: int, num_heads: int, *,
        num_key_heads: int | None = None, key_head_dim: int, value_head_dim: int,
        conv_kernel: int = 4,
        norm_eps: float = 1e-6, chunk_size: int = 64, form: str = "chunked",
        negative_eigenvalues: bool = False,
    ) -> None:
        num_key_heads = num_heads if num_key_heads is None else num_key_heads
        check_flag("negative_eigenvalues", negative_eigenvalues)
        super().__init__(d_in, d_out, num_heads, num_key_heads, key_head_dim,
                         value_head_dim, conv_kernel, norm_eps, chunk_size, form,
                         "silu")
        self.negative_eigenvalues = negative_eigenvalues
        self.W_gate = nn.Linear(d_in, num_heads * value_head_dim, bias=False)  # z
        self.W_beta = nn.Linear(d_in, num_heads, bias=False)  # b
        self.W_decay = nn.Linear(d_in, num_heads, bias=False)  # a
        self.A_log, self.dt_bias = _decay_parameters(num_heads, num_heads)  # (H,)

    # --8<-- [start:gdn_gates]
    def gates(self, x):
        dtype = torch.promote_types(x.dtype, torch.float32)
        beta = torch.sigmoid(self.W_beta(x).to(dtype))  # (B, T, H), in (0, 1)
        if self.negative_eigenvalues:
            beta = 2 * beta  # (B, T, H), in (0, 2): 1 - beta reaches below zero
        speed = F.softplus(self.W_decay(x).to(dtype) + self.dt_bias.to(dtype))
        g = -self.A_log.to(dtype).exp() * speed  # (B, T, H), <= 0
        return beta.transpose(1, 2), g.transpose(1, 2)  # (B, H, T) both

    def output_gate(self, x):
        return self.W_gate(x)  # (B, T, H d_v)
    # --8<-- [end:gdn_gates]

    @classmethod
    def from_hf_config(cls, config, layer_idx: int = 0, **overrides):
        """Linear-attention layer ``layer_idx`` of a Qwen3-Next, Qwen3.5 or
        OLMo-Hybrid config (transformers object or ``config.json`` dict)."""
        return cls(**{**_options(config, layer_idx, "Gated DeltaNet"), **overrides})


class KimiDeltaAttention(DeltaRuleLayer):
    r"""Kimi Delta Attention (Kimi Linear): the gated delta rule with one decay per
    key channel, ``D_t = diag(exp(g_t))``, from a low-rank projection; a low-rank
    sigmoid output gate; as many key heads as value heads, all of width ``head_dim``.

    $$S_t = D_t S_{t-1} + \beta_t k_t\,(v_t - (D_t S_{t-1})^\top k_t)^\top,
      \qquad o_t = S_t^\top q_t$$

    Args:
        d_in: width of each input token vector (the model width).
        d_out: width of the output (the model width too).
        num_heads: ``H``, heads for queries, keys and values alike, each with its own
            state.
        head_dim: ``d_k = d_v``, and the rank of the two low-rank projections.
        conv_kernel: ``K``, the short convolution's length.
        norm_eps: the epsilon of the output norm.
        chunk_size: tokens per chunk in the chunked form.
        form: ``"chunked"`` or ``"recurrent"`` (same result).

    Shapes: as ``GatedDeltaNet``; ``g`` is ``(B, H, T, d_k)``.
    """

    def __init__(
        self, d_in: int, d_out: int, num_heads: int, *, head_dim: int,
        conv_kernel: int = 4, norm_eps: float = 1e-6, chunk_size: int = 64,
        form: str = "chunked",
    ) -> None:
        super().__init__(d_in, d_out, num_heads, num_heads, head_dim, head_dim,
                         conv_kernel, norm_eps, chunk_size, form, "sigmoid")
        width = num_heads * head_dim
        self.W_beta = nn.Linear(d_in, num_heads, bias=False)
        self.W_decay_down = nn.Linear(d_in, head_dim, bias=False)  # low rank
        self.W_decay_up = nn.Linear(head_dim, width, bias=False)  # a rate per channel
        self.W_gate_down = nn.Linear(d_in, head_dim, bias=False)
        self.W_gate_up = nn.Linear(head_dim, width, bias=False)
        self.A_log, self.dt_bias = _decay_parameters(width, num_heads)  # (H,), (H d_k,)

    # --8<-- [start:kda_gates]
    def gates(self, x):
        dtype = torch.promote_types(x.dtype, torch.float32)
        b, num_tokens, _ = x.shape
        beta = torch.sigmoid(self.W_beta(x).to(dtype))  # (B, T, H)
        rate = self.W_decay_up(self.W_decay_down(x)).to(dtype) + self.dt_bias.to(dtype)
        rate = F.softplus(rate.view(b, num_tokens, self.num_heads, -1))  # (B,T,H,d_k)
        g = -self.A_log.to(dtype).exp().unsqueeze(-1) * rate  # (B, T, H, d_k), <= 0
        return beta.transpose(1, 2), g.transpose(1, 2)  # (B, H, T), (B, H, T, d_k)

    def output_gate(self, x):
        return self.W_gate_up(self.W_gate_down(x))  # (B, T, H d_v)
    # --8<-- [end:kda_gates]

    @classmethod
    def from_hf_config(cls, config, layer_idx: int = 0, **overrides):
        """KDA layer ``layer_idx`` of a Kimi Linear config (transformers object or
        ``config.json`` dict)."""
        options = _options(config, layer_idx, "Kimi Delta Attention")
        return cls(**{**options, **overrides})


def _options(config, layer_idx: int, kind: str) -> dict:
    options = linear_attention_options(config, layer_idx)
    family = config_dict(config)["model_type"]
    if ("head_dim" in options) != (kind == "Kimi Delta Attention"):
        other = "KimiDeltaAttention" if "head_dim" in options else "GatedDeltaNet"
        raise ValueError(f"model_type {family!r} has no {kind} layers; use {other}")
    return options


QWEN3_5_NAMES = {  # Hugging Face name -> ours (Qwen3.5; Qwen3-Next after un-grouping)
    "in_proj_qkv": "W_qkv", "in_proj_z": "W_gate", "in_proj_b": "W_beta",
    "in_proj_a": "W_decay", "conv1d": "conv", "norm": "out_norm",
    "out_proj": "out_proj", "A_log": "A_log", "dt_bias": "dt_bias",
}
OLMO_HYBRID_NAMES = {  # OLMo-Hybrid: its own projections, fused into W_qkv here
    "q_proj": "W_query", "k_proj": "W_key", "v_proj": "W_value", "g_proj": "W_gate",
    "a_proj": "W_decay", "b_proj": "W_beta", "conv1d": "conv", "o_norm": "out_norm",
    "o_proj": "out_proj", "A_log": "A_log", "dt_bias": "dt_bias",
}
KIMI_NAMES = {
    "q_proj": "W_query", "k_proj": "W_key", "v_proj": "W_value", "conv1d": "conv",
    "b_proj": "W_beta", "forget_gate.f_a_proj": "W_decay_down",
    "forget_gate.f_b_proj": "W_decay_up", "forget_gate.A_log": "A_log",
    "forget_gate.dt_bias": "dt_bias", "g_a_proj": "W_gate_down",
    "g_b_proj": "W_gate_up", "o_norm": "out_norm", "o_proj": "out_proj",
}


# --8<-- [start:from_hf]
def from_hf_state_dict(
    state_dict: dict, prefix: str = "", num_key_heads: int | None = None
) -> dict:
    """Rename one transformers linear-attention layer's weights to ours:
    ``Qwen3_5GatedDeltaNet``, ``Qwen3NextGatedDeltaNet`` (its projections group
    ``q, k, v, z`` and ``b, a`` by key head: ``num_key_heads`` says how to ungroup
    them), ``OlmoHybridGatedDeltaNet`` or ``KimiLinearDeltaAttention`` (the last two
    have three projections, which become ``W_qkv``). ``prefix`` picks the layer out
    of a whole model's state dict."""
    names = {key[len(prefix):] for key in state_dict if key.startswith(prefix)}
    separate = ("W_query", "W_key", "W_value")
    if "forget_gate.f_a_proj.weight" in names:
        bare = ("forget_gate.A_log", "forget_gate.dt_bias")
        ours = rename_weights(state_dict, prefix, KIMI_NAMES, "a KDA layer", bare)
        ours["W_qkv.weight"] = torch.cat([ours.pop(f"{n}.weight") for n in separate])
        ours["A_log"] = ours["A_log"].reshape(-1)  # (1, 1, H, 1) -> (H,)
        return ours
    if "g_proj.weight" in names:
        ours = rename_weights(state_dict, prefix, OLMO_HYBRID_NAMES,
                              "an OLMo-Hybrid Gated DeltaNet layer",
                              ("A_log", "dt_bias"))
        ours["W_qkv.weight"] = torch.cat([ours.pop(f"{n}.weight") for n in separate])
        return ours  # W_qkv (C, d_in): queries, keys, values, joined as transformers
    grouped = {"in_proj_qkvz": "in_proj_qkvz", "in_proj_ba": "in_proj_ba"}
    ours = rename_weights(state_dict, prefix, {**QWEN3_5_NAMES, **grouped},
                          "a Gated DeltaNet layer", ("A_log", "dt_bias"))
    if "in_proj_qkvz.weight" in ours:  # Qwen3-Next
        ours.update(ungroup_qwen3_next(ours.pop("in_proj_qkvz.weight"),
                                       ours.pop("in_proj_ba.weight"), ours,
                                       num_key_heads))
    return ours
# --8<-- [end:from_hf]


def ungroup_qwen3_next(qkvz, ba, ours: dict, num_key_heads: int | None) -> dict:
    """Qwen3-Next's ``in_proj_qkvz`` rows come per key head as ``[q, k, v, z]``
    (``d_k, d_k, G d_v, G d_v``), its ``in_proj_ba`` rows as ``[b, a]`` (``G, G``);
    ours hold all queries, then all keys, then all values (Qwen3.5's order)."""
    if num_key_heads is None:
        raise ValueError("num_key_heads is needed to read Qwen3-Next's grouped weights")
    heads = ours["A_log"].shape[0]  # H
    value_dim = ours["out_norm.weight"].shape[0]  # d_v
    channels = ours["conv.weight"].shape[0]  # C = 2 H_k d_k + H d_v
    key_dim = (channels - heads * value_dim) // (2 * num_key_heads)  # d_k
    group = heads // num_key_heads  # G
    per_head = qkvz.view(num_key_heads, -1, qkvz.shape[-1])  # (H_k, rows, d_in)
    q, k, v, z = per_head.split([key_dim, key_dim, group * value_dim,
                                 group * value_dim], dim=1)
    b, a = ba.view(num_key_heads, 2 * group, -1).split([group, group], dim=1)
    flat = [part.reshape(-1, qkvz.shape[-1]) for part in (q, k, v, z, b, a)]
    return {"W_qkv.weight": torch.cat(flat[:3]), "W_gate.weight": flat[3],
            "W_beta.weight": flat[4], "W_decay.weight": flat[5]}
