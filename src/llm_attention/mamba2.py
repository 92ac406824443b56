# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""The Mamba-2 layer of the 2026 hybrid families (Nemotron-H, Granite 4.0 hybrids,
Falcon-H1, Bamba), read as linear attention with one decay per head.

Shapes: ``B`` batch, ``T`` tokens, ``d_in`` input width, ``H`` heads, ``P`` head width,
``I = H P`` the inner width, ``G`` groups of heads sharing keys and queries, ``N`` the
state size (key width), ``K`` the convolution's kernel size,
``C = I + 2 G N`` the convolved channels.

    [z, x, B, C, dt_raw] = (s_in X) W_in * m     (B, T, I + I + G N + G N + H)
    [x, B, C] = SiLU(conv_K([x, B, C]))          (B, T, C): causal, depth-wise
    dt = clamp(softplus(dt_raw + dt_bias))       (B, T, H): the step sizes, > 0
    g = dt * A,  A = -exp(A_log)                 (B, T, H): log of each head's decay
    y = ssd(q=C, k=B, v=x, g, dt) + D x          (B, H, T, P)   (``ssd.py``)
    out = norm(y, z) W_out                       (B, T, d_out)

In attention terms: ``C`` is the query, ``B`` the key, ``x`` the value; ``dt`` scales
how much each token writes and ``exp(dt * A)`` is how much of the state each head
keeps per token; the ``G`` groups of ``B`` and ``C`` are shared by ``H / G`` heads
each (consecutive heads share a group): here the keys and the queries are shared and
each head has its own values, the other way round from grouped-query attention,
which shares keys and values among its queries.
``D`` adds each head's value straight to its output (a skip past the state). The norm
is an RMSNorm over each group's ``I / G`` channels and a SiLU gate ``z``: gate then
norm (Nemotron-H, Granite, Bamba), norm then gate, or the gate alone (Falcon-H1's
options). ``s_in`` and ``m`` (one multiplier per part) are Falcon-H1's; 1 elsewhere.
Its decoder layer also scales this layer's output (``ssm_out_multiplier``): that stays
outside, as it is outside transformers' ``FalconH1Mixer``.

Padding: left padding only (``delta_cache.check_left_padding``). A padded position
enters the convolution as zeros (after the projection: a projection bias does not
leak into the next tokens) and leaves the state as it was (``dt = 0``: no decay, no
write), so a padded row computes what its prompt alone computes; its outputs at
padded positions are zeros.

The cache is a ``DeltaStateCache`` (``delta_cache.py``): the convolution's last
``K - 1`` inputs and the state ``(B, H, N, P)``; with ``save_at``/``snapshot`` it keeps
the state of a prefix for reuse.

``from_hf_config`` reads a Nemotron-H, Granite 4.0 hybrid, Falcon-H1 or Bamba config;
``from_hf_state_dict`` renames transformers' ``NemotronHMamba2Mixer``,
``GraniteMoeHybridMambaLayer``, ``FalconH1Mixer`` or ``BambaMixer`` weights.

Builds on ``checks.py``, ``delta_cache.py``, ``hf_config.py`` and ``ssd.py`` of this
package (and what they build on), imported relatively: copy them with this file, under
any package name (its API page offers the set as one download). MIT licence: keep the
first two lines of each file.
"""

from __future__ import annotations

import math
import numbers

import torch
import torch.nn.functional as F
from torch import nn

from .checks import check_flag, check_size
from .delta_cache import (
    DeltaStateCache, check_state_call, make_state_cache, run_in_pieces,
    state_cache_shapes,
)
from .hf_config import mamba2_options, rename_weights
from .ssd import chunked, recurrent, step_in_place

FORMS = ("chunked", "recurrent")


class GroupedGatedRMSNorm(nn.Module):
    """RMSNorm over each of ``groups`` groups of channels, with a SiLU gate:
    ``w * rms_g(y * silu(z))`` (gate first) or ``w * rms_g(y) * silu(z)``
    (``norm_before_gate``), in float32 at least. ``y``, ``z`` ``(..., width)``."""

    def __init__(self, width: int, groups: int, eps: float,
                 norm_before_gate: bool = False) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))  # (I,)
        self.groups, self.eps, self.norm_before_gate = groups, eps, norm_before_gate

    def forward(self, y: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        dtype = torch.promote_types(y.dtype, torch.float32)
        y, gate = y.to(dtype), F.silu(gate.to(dtype))  # (..., I)
        if not self.norm_before_gate:
            y = y * gate  # (..., I): gate first
        grouped = y.unflatten(-1, (self.groups, -1))  # (..., G, I / G)
        mean_square = grouped.pow(2).mean(-1, keepdim=True)  # (..., G, 1)
        grouped = grouped * torch.rsqrt(mean_square + self.eps)  # (..., G, I / G)
        y = self.weight.to(dtype) * grouped.flatten(-2)  # (..., I)
        return y * gate if self.norm_before_gate else y  # (..., I)

    def extra_repr(self) -> str:
        return (f"{self.weight.shape[0]}, groups={self.groups}, eps={self.eps}, "
                f"norm_before_gate={self.norm_before_gate}")


# --8<-- [start:class]
class Mamba2(nn.Module):
    r"""Mamba-2: linear attention with one decay per head and token, keys and
    queries shared by groups of heads, a short convolution, a skip term and a gated
    norm.

    $$S_t = e^{\Delta_t A}\,S_{t-1} + \Delta_t\, B_t x_t^\top, \qquad
      y_t = S_t^\top C_t + D\,x_t$$

    per head, with ``C`` the query, ``B`` the key, ``x`` the value and ``dt`` (here
    $\Delta$) the step size.

    Args:
        d_in: width of each input token vector (the model width).
        d_out: width of the output (the model width too).
        num_heads: ``H``, each with its own state, decay and skip.
        head_dim: ``P``, the width of each head's values.
        state_size: ``N``, the width of keys and queries.
        num_groups: ``G``, the key/query groups (a divisor of ``H``).
        conv_kernel: ``K``, the short convolution's length.
        chunk_size: tokens per chunk in the chunked form.
        form: ``"chunked"`` or ``"recurrent"`` for prompts (same result); one token
            always takes one step.
        time_step_limit: ``(low, high)``: ``dt`` is clamped to it.
        in_bias: a bias on the input projection.
        conv_bias: a bias on the short convolution.
        out_bias: a bias on the output projection.
        norm: the RMSNorm before the output projection; without it, the gate alone.
        norm_before_gate: norm then gate (Falcon-H1's default) instead of gate then
            norm.
        norm_eps: the norm's epsilon.
        in_multiplier: ``s_in``, the input's scale (Falcon-H1's
            ``ssm_in_multiplier``).
        projection_multipliers: ``m``, five scales of the projection's parts
            ``z, x, B, C, dt`` (Falcon-H1's ``ssm_multipliers``); None for ones.

    Shapes:
        ``forward(x, padding_mask=None, *, cache=None)``: ``x`` ``(B, T, d_in)``,
        ``padding_mask`` ``(B, T)`` bool (True = real token; left padding),
        ``cache`` a ``DeltaStateCache`` from ``make_cache``; output ``(B, T, d_out)``.
    """

    def __init__(
        self, d_in: int, d_out: int, num_heads: int, *, head_dim: int,
        state_size: int, num_groups: int = 1, conv_kernel: int = 4,
        chunk_size: int = 256, form: str = "chunked",
        time_step_limit: tuple[float, float] = (0.0, math.inf),
        in_bias: bool = False, conv_bias: bool = True, out_bias: bool = False,
        norm: bool = True, norm_before_gate: bool = False, norm_eps: float = 1e-5,
        in_multiplier: float = 1.0, projection_multipliers: list | None = None,
    ) -> None:
        sizes = dict(d_in=d_in, d_out=d_out, num_heads=num_heads, head_dim=head_dim,
                     state_size=state_size, num_groups=num_groups,
                     conv_kernel=conv_kernel, chunk_size=chunk_size)
        for name, value in sizes.items():
            check_size(name, value)
        if num_heads % num_groups:
            raise ValueError(
                "num_groups must divide num_heads (each group of keys and queries "
                f"serves num_heads // num_groups heads), got num_heads={num_heads}, "
                f"num_groups={num_groups}"
            )
        flags = dict(in_bias=in_bias, conv_bias=conv_bias, out_bias=out_bias,
                     norm=norm, norm_before_gate=norm_before_gate)
        for name, flag in flags.items():
            check_flag(name, flag)
        check_form(form)
        low, high = check_limit(time_step_limit)
        for name, value in (("norm_eps", norm_eps), ("in_multiplier", in_multiplier)):
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(f"{name} must be a float, got {value!r}")
        if not norm_eps > 0:
            raise ValueError(f"norm_eps must be a positive float, got {norm_eps!r}")
        multipliers = check_multipliers(projection_multipliers)
        super().__init__()
        self.num_heads, self.head_dim, self.state_size = num_heads, head_dim, state_size
        self.num_groups, self.chunk_size, self.form = num_groups, chunk_size, form
        self.time_step_limit = (low, high)
        self.in_multiplier = float(in_multiplier)
        inner = num_heads * head_dim  # I
        channels = inner + 2 * num_groups * state_size  # C: x, B and C convolved
        sizes = (inner, inner, num_groups * state_size, num_groups * state_size,
                 num_heads)  # z, x, B, C, dt
        self.W_in = nn.Linear(d_in, sum(sizes), bias=in_bias)  # (2I + 2GN + H, d_in)
        scales = torch.cat([torch.full((size,), m)
                            for size, m in zip(sizes, multipliers)])  # (2I + 2GN + H,)
        self.register_buffer("projection_scales", scales, persistent=False)  # (2I+..,)
        self.conv = nn.Conv1d(channels, channels, conv_kernel, groups=channels,
                              bias=conv_bias)  # (C, 1, K): one kernel per channel
        self.A_log = nn.Parameter(torch.zeros(num_heads))  # (H,): A = -exp(A_log)
        self.dt_bias = nn.Parameter(torch.zeros(num_heads))  # (H,)
        self.D = nn.Parameter(torch.ones(num_heads))  # (H,): the skip
        self.out_norm = (GroupedGatedRMSNorm(inner, num_groups, norm_eps,
                                             norm_before_gate) if norm else None)
        self.out_proj = nn.Linear(inner, d_out, bias=out_bias)  # (d_out, I)

    @classmethod
    def from_hf_config(cls, config, layer_idx: int = 0, **overrides):
        """The Mamba-2 layer ``layer_idx`` of a Nemotron-H, Granite 4.0 hybrid,
        Falcon-H1 or Bamba config (transformers object or ``config.json`` dict)."""
        return cls(**{**mamba2_options(config, layer_idx), **overrides})

    def forward(self, x, padding_mask=None, *, cache=None):
        """Read ``x`` ``(B, T, d_in)``; return ``(B, T, d_out)``. With a
        ``DeltaStateCache``, ``x`` holds only the new tokens."""
        check_state_call(x, padding_mask, cache, self.W_in.weight,
                         self.make_cache_shapes)
        check_form(self.form)
        pieces = run_in_pieces(self, x, padding_mask, cache)  # stops to keep snapshots
        if pieces is not None:
            return pieces  # (B, T, d_out)
        b, num_tokens, _ = x.shape
        real = None if padding_mask is None else padding_mask.unsqueeze(-1)  # (B, T, 1)
        if real is not None:
            x = x * real  # (B, T, d_in): padding reads as zeros
        projected = self.W_in(x * self.in_multiplier) * self.projection_scales
        inner = self.num_heads * self.head_dim  # I
        channels = self.conv.in_channels  # C = I + 2 G N
        gate, mixed, dt = projected.split([inner, channels, self.num_heads],
                                          dim=-1)  # (B, T, I), (B, T, C), (B, T, H)
        if real is not None:
            mixed = mixed * real  # (B, T, C): the convolution sees zeros at padding
        window = cache.conv_window if cache is not None else x.new_zeros(
            b, self.conv.in_channels, self.conv.kernel_size[0] - 1
        )  # (B, C, K - 1): the inputs before these tokens
        mixed, window = self.short_conv(mixed, window)  # (B, T, C), (B, C, K - 1)
        dtype = torch.promote_types(x.dtype, torch.float32)  # the rule in float32+
        values, keys, queries = self.split_heads(mixed.to(dtype))
        dt = F.softplus(dt.to(dtype) + self.dt_bias.to(dtype))  # (B, T, H), > 0
        dt = dt.clamp(*self.time_step_limit)  # (B, T, H)
        if real is not None:
            dt = dt * real  # (B, T, H): a padded position neither decays nor writes
        dt = dt.transpose(1, 2)  # (B, H, T)
        g = -self.A_log.to(dtype).exp().unsqueeze(-1) * dt  # (B, H, T): dt * A, <= 0
        state = None if cache is None else cache.state  # (B, H, N, P)
        out, state = self.rule(queries, keys, values, g, dt, state)  # (B, H, T, P)
        out = out + self.D.to(dtype)[:, None, None] * values  # (B, H, T, P): skip
        out = out.transpose(1, 2).reshape(b, num_tokens, inner)  # (B, T, I)
        if self.out_norm is not None:
            out = self.out_norm(out, gate)  # (B, T, I)
        else:
            out = out * F.silu(gate.to(dtype))  # (B, T, I): the gate alone
        if cache is not None:
            cache.update(window, state, num_tokens, padding_mask)
        out = self.out_proj(out.to(x.dtype))  # (B, T, d_out)
        return out if real is None else out * real  # (B, T, d_out): zeros at padding

    def short_conv(self, mixed: torch.Tensor, window: torch.Tensor):
        """SiLU of the causal depth-wise convolution of ``mixed`` ``(B, T, C)``, read
        after ``window`` ``(B, C, K - 1)``; returns it and the next window."""
        inputs = torch.cat((window, mixed.transpose(1, 2)), dim=-1)  # (B, C, K-1+T)
        out = F.silu(self.conv(inputs))  # (B, C, T): no padding, the window is it
        return out.transpose(1, 2), inputs[:, :, mixed.shape[1]:]  # .., (B, C, K - 1)

    def split_heads(self, mixed: torch.Tensor):
        """``(B, T, C)`` -> values ``(B, H, T, P)``, keys and queries
        ``(B, H, T, N)``: each group's ``B`` and ``C`` repeated for its heads."""
        b, num_tokens, _ = mixed.shape
        width = self.num_groups * self.state_size
        inner = self.num_heads * self.head_dim  # I
        x, keys, queries = mixed.split([inner, width, width], -1)  # (B, T, I), ..
        values = x.view(b, num_tokens, self.num_heads, -1).transpose(1, 2)  # (B,H,T,P)
        group = self.num_heads // self.num_groups  # heads per group
        shared = (b, num_tokens, self.num_groups, self.state_size)
        keys = keys.reshape(shared).transpose(1, 2)  # (B, G, T, N)
        queries = queries.reshape(shared).transpose(1, 2)  # (B, G, T, N)
        keys = keys.repeat_interleave(group, dim=1)  # (B, H, T, N)
        queries = queries.repeat_interleave(group, dim=1)  # (B, H, T, N)
        return values, keys, queries  # (B, H, T, P), (B, H, T, N) twice

    def rule(self, queries, keys, values, g, dt, state):
        """The rule in this layer's ``form``; one token (decoding) is one ``step``,
        which is what ``recurrent`` runs for it."""
        if queries.shape[2] == 1 and state is not None and state.is_contiguous() and (
            not torch.is_grad_enabled()
        ):  # decoding: the cache's state updated where it lies, no new tensor
            one = (queries[:, :, 0], keys[:, :, 0], values[:, :, 0], g[:, :, 0],
                   dt[:, :, 0])  # (B, H, N), ..., (B, H)
            return step_in_place(*one, state).unsqueeze(2), state  # (B, H, 1, P), ..
        if self.form == "recurrent" or queries.shape[2] == 1:
            return recurrent(queries, keys, values, g, dt, state)  # (B, H, T, P), ..
        return chunked(queries, keys, values, g, dt, state, self.chunk_size)

    def make_cache_shapes(self, batch_size: int) -> tuple:
        """The window's and the state's shapes for ``batch_size`` sequences."""
        return state_cache_shapes(batch_size, self.num_heads, self.state_size,
                                  self.head_dim, self.conv)

    def make_cache(self, batch_size: int) -> DeltaStateCache:
        """An empty ``DeltaStateCache`` for this layer: the window ``(B, C, K - 1)``
        and the state ``(B, H, N, P)``."""
        return make_state_cache(batch_size, self.num_heads, self.state_size,
                                self.head_dim, self.conv)

    def extra_repr(self) -> str:
        return (f"num_heads={self.num_heads}, head_dim={self.head_dim}, "
                f"state_size={self.state_size}, num_groups={self.num_groups}, "
                f"form={self.form!r}, chunk_size={self.chunk_size}, "
                f"time_step_limit={self.time_step_limit}")
# --8<-- [end:class]


def check_form(form: object) -> None:
    """``form`` must name one of ``FORMS``."""
    if form not in FORMS:
        raise ValueError(f"form must be one of {', '.join(FORMS)}, got {form!r}")


def check_limit(limit: object) -> tuple[float, float]:
    """``time_step_limit`` must be ``(low, high)`` with ``0 <= low < high``."""
    pair = tuple(limit) if isinstance(limit, tuple | list) else ()
    if len(pair) != 2 or not all(
        isinstance(v, numbers.Real) and not isinstance(v, bool) for v in pair
    ) or not 0 <= pair[0] < pair[1]:
        raise ValueError(
            f"time_step_limit must be (low, high) with 0 <= low < high, got {limit!r}"
        )
    return float(pair[0]), float(pair[1])


def check_multipliers(multipliers: object) -> tuple:
    """``projection_multipliers``: None (ones) or five real numbers."""
    if multipliers is None:
        return (1.0,) * 5
    values = tuple(multipliers) if isinstance(multipliers, tuple | list) else ()
    if len(values) != 5 or not all(
        isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values
    ):
        raise ValueError(
            "projection_multipliers must be None or five numbers (z, x, B, C, dt), "
            f"got {multipliers!r}"
        )
    return tuple(float(v) for v in values)


HF_NAMES = {  # Hugging Face name -> ours (every family's mixer names them alike)
    "in_proj": "W_in", "conv1d": "conv", "norm": "out_norm", "out_proj": "out_proj",
    "A_log": "A_log", "dt_bias": "dt_bias", "D": "D",
}


def from_hf_state_dict(state_dict: dict, prefix: str = "") -> dict:
    """Rename one transformers Mamba-2 mixer's weights to ours (``in_proj`` ->
    ``W_in``, ``conv1d`` -> ``conv``, ``norm`` -> ``out_norm``). Falcon-H1's
    ``mup_vector`` is not in the mixer's state dict: it comes from the config
    (``projection_multipliers``). ``prefix`` picks the layer out of a whole model's
    state dict."""
    return rename_weights(state_dict, prefix, HF_NAMES, "a Mamba-2 layer",
                          bare=("A_log", "dt_bias", "D"))
