# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""The switches of the family table: how each mechanism is dropped from a built
transformers model, so that the parity harness can show that a tiny config reaches it.

Two kinds. An edit (``model -> None``) changes the built model for good: the harness
builds a model of its own for the mechanism, with the same weights, and edits it. A
patch (``model -> context manager``) changes transformers' code or the model's weights
for the runs inside it and puts them back after. Names are transformers' own, as
its modeling files spell them. Not a model module: it needs transformers.
"""

from __future__ import annotations

import contextlib
import copy
import fnmatch
import math
from typing import Callable

import torch


@contextlib.contextmanager
def swapped(owner, name: str, replacement):
    """``owner.name`` replaced by ``replacement`` inside, put back after."""
    original = getattr(owner, name)
    setattr(owner, name, replacement)
    try:
        yield
    finally:
        setattr(owner, name, original)


def fill(pattern: str, value: float) -> Callable:
    """Set every parameter whose name matches ``pattern`` to ``value``."""

    def edit(model) -> None:
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if fnmatch.fnmatchcase(name, pattern):
                    parameter.fill_(value)

    return edit


def replace(pattern: str, make: Callable = lambda old: torch.nn.Identity()) -> Callable:
    """Replace every submodule whose name matches ``pattern`` by ``make(old)``."""

    def edit(model) -> None:
        for name, module in list(model.named_modules()):
            if fnmatch.fnmatchcase(name, pattern):
                parent_name, _, child = name.rpartition(".")
                setattr(model.get_submodule(parent_name), child, make(module))

    return edit


def set_attribute(pattern: str, **values) -> Callable:
    """Set attributes of every submodule whose name matches ``pattern``."""

    def edit(model) -> None:
        for name, module in model.named_modules():
            if fnmatch.fnmatchcase(name, pattern):
                for attribute, value in values.items():
                    setattr(module, attribute, value)

    return edit


def open_output_gate(head_dim: int) -> Callable:
    """Qwen3-Next's gated attention: its query projection's second half of each head
    is the gate; forced to +30, ``sigmoid`` of it is 1 to 1e-13: no gate."""

    def hook(module, args, output):
        heads = output.view(*output.shape[:-1], -1, 2 * head_dim)  # (B, T, H, 2 d_h)
        heads[..., head_dim:] = 30.0
        return output

    def edit(model) -> None:
        for name, module in model.named_modules():
            if name.endswith("self_attn.q_proj"):
                module.register_forward_hook(hook)

    return edit


def identity_conv(model) -> None:
    """Short causal convolutions that pass each channel through unchanged."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if fnmatch.fnmatchcase(name, "*conv1d.weight") or fnmatch.fnmatchcase(
                name, "*_conv1d.weight"
            ):
                parameter.zero_()
                parameter[..., -1] = 1.0  # the current token's tap


def own_values(pattern: str, width: int) -> Callable:
    """Give attention modules matching ``pattern`` a value projection of their own
    (``width`` to ``width``, seeded) where their values were their keys."""

    def edit(model) -> None:
        generator = torch.Generator().manual_seed(7)
        for name, module in model.named_modules():
            if fnmatch.fnmatchcase(name, pattern):
                projection = torch.nn.Linear(width, width, bias=False)
                with torch.no_grad():
                    projection.weight.copy_(
                        torch.randn(width, width, generator=generator) * 0.2)
                module.v_proj = projection

    return edit


# --- GLM-5, MiMo-V2-Flash, Laguna ----------------------------------------------------


def glm_dense_shared_layers(model):
    """GLM-5's shared layers attend over every key instead of the reused top-k."""
    from transformers.models.glm_moe_dsa import modeling_glm_moe_dsa as modeling

    forward = modeling.GlmMoeDsaAttention.forward

    def dense(self, hidden_states, *args, prev_topk_indices=None, **kwargs):
        if self.skip_topk:  # a prefill: as many keys as queries
            batch, tokens = hidden_states.shape[:2]
            prev_topk_indices = torch.arange(tokens).expand(batch, tokens, tokens)
        return forward(self, hidden_states, *args, prev_topk_indices=prev_topk_indices,
                       **kwargs)

    return swapped(modeling.GlmMoeDsaAttention, "forward", dense)


def glm_indexer_halves(model):
    """GLM-5's indexer turns its rotary part as halves (DeepSeek-V3.2's layout), the
    attention still as neighbours."""
    from transformers.models.deepseek_v32 import modeling_deepseek_v32
    from transformers.models.glm_moe_dsa import modeling_glm_moe_dsa as modeling

    forward = modeling.GlmMoeDsaIndexer.forward

    def indexer(self, *args, **kwargs):
        with swapped(modeling, "apply_rotary_pos_emb_interleave",
                     modeling_deepseek_v32.apply_rotary_pos_emb):
            return forward(self, *args, **kwargs)

    return swapped(modeling.GlmMoeDsaIndexer, "forward", indexer)


def tie_kv_pairs(layer: int) -> Callable:
    """The layer's key/value heads made pairs of equal heads: what half as many heads,
    each shared by twice the query heads, would compute (MiMo-V2-Flash's sliding
    layers have twice the full layers' key/value heads)."""

    def edit(model) -> None:
        attention = model.model.layers[layer].self_attn
        with torch.no_grad():
            for proj, width in ((attention.k_proj, attention.head_dim),
                                (attention.v_proj, attention.v_head_dim)):
                weight = proj.weight.view(-1, 2, width, proj.weight.shape[1])
                weight[:, 1] = weight[:, 0]  # (pairs, 2, d, d_in)

    return edit


def softplus_gate_open(model):
    """Laguna's gate, ``softplus`` of a projection, made 1 everywhere."""
    return swapped(torch.nn.functional, "softplus", torch.ones_like)


def drop_heads_beyond(layer: int, heads: int) -> Callable:
    """The layer's heads from ``heads`` on no longer reach the output (Laguna's layers
    have more heads than others)."""

    def edit(model) -> None:
        attention = model.model.layers[layer].self_attn
        with torch.no_grad():
            attention.o_proj.weight[:, heads * attention.head_dim:] = 0.0

    return edit


# --- DeepSeek-V4 ----------------------------------------------------------------------


def compressors(model, kind):
    """Every compressor of that kind's layers (the CSA indexer's own included)."""
    for layer in model.model.layers:
        attention = layer.self_attn
        if attention.layer_type == kind:
            yield attention.compressor
            if kind == "compressed_sparse_attention":
                yield attention.compressor.indexer


@contextlib.contextmanager
def without_entries(model, kind):
    """The layer's compressed entries dropped: its window alone."""
    patched = list(compressors(model, kind))[:1]
    originals = [c.forward for c in patched]
    for compressor in patched:
        def forward(hidden_states, *args, _c=compressor, **kwargs):
            batch = hidden_states.shape[0]
            return hidden_states.new_zeros(batch, 1, 0, _c.head_dim), None
        compressor.forward = forward
    try:
        yield
    finally:
        for compressor, original in zip(patched, originals):
            compressor.forward = original


@contextlib.contextmanager
def halved_rate(model, kind):
    """Every compressor of that kind pools half as many tokens (its first position
    biases)."""
    saved = []
    for compressor in compressors(model, kind):
        saved.append((compressor, compressor.compress_rate, compressor.position_bias))
        compressor.compress_rate //= 2
        compressor.position_bias = torch.nn.Parameter(compressor.position_bias[
            : compressor.compress_rate].clone())
    try:
        yield
    finally:
        for compressor, rate, bias in saved:
            compressor.compress_rate, compressor.position_bias = rate, bias


@contextlib.contextmanager
def no_overlap(model):
    """CSA's first halves (the window before's tokens) weigh nothing: -inf gates."""
    saved = []
    for compressor in compressors(model, "compressed_sparse_attention"):
        bias = compressor.position_bias
        saved.append((bias, bias.detach().clone()))
        with torch.no_grad():
            bias[:, : bias.shape[1] // 2] = -torch.inf
    try:
        yield
    finally:
        with torch.no_grad():
            for bias, value in saved:
                bias.copy_(value)


@contextlib.contextmanager
def no_sinks(model):
    saved = [layer.self_attn.sinks.detach().clone() for layer in model.model.layers]
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.sinks.fill_(-torch.inf)
    try:
        yield
    finally:
        with torch.no_grad():
            for layer, value in zip(model.model.layers, saved):
                layer.self_attn.sinks.copy_(value)


@contextlib.contextmanager
def no_unrotation(model):
    """The output's turn back undone: each layer's output projection gets the heads
    turned forward again by the query's angle, before it mixes them."""
    from transformers.models.deepseek_v4 import modeling_deepseek_v4 as v4

    handles = []
    for layer in model.model.layers:
        attention, seen = layer.self_attn, {}

        def keep(module, args, kwargs, _seen=seen):
            _seen["cos_sin"] = kwargs["position_embeddings"][module.rope_layer_type]

        def turn(module, args, _seen=seen, _heads=attention.num_heads):
            grouped = args[0]  # (B, T, g, H d / g)
            shape = grouped.shape
            heads = grouped.reshape(*shape[:2], _heads, -1)  # (B, T, H, d)
            heads = heads.transpose(1, 2)  # (B, H, T, d)
            cos, sin = _seen["cos_sin"]
            turned = v4.apply_rotary_pos_emb(heads, cos, sin).transpose(1, 2)
            return (turned.reshape(shape),)

        handles.append(attention.register_forward_pre_hook(keep, with_kwargs=True))
        handles.append(attention.o_a_proj.register_forward_pre_hook(turn))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


# --- the hybrids: Mamba-2 (Nemotron-H, Granite 4, Falcon-H1, Bamba), OLMo-Hybrid ---


class _Patcher:
    """What a switch sets with ``setattr``, kept to be put back."""

    def __init__(self) -> None:
        self.saved = []

    def setattr(self, owner, name: str, value) -> None:
        self.saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    def undo(self) -> None:
        for owner, name, value in reversed(self.saved):
            setattr(owner, name, value)


def patched(switch: Callable) -> Callable:
    """A patch made of ``switch(model, patcher)``: what it sets with
    ``patcher.setattr`` is put back after the runs (the weights it changes in place stay
    changed: the harness gives each mechanism a model of its own)."""

    @contextlib.contextmanager
    def patch(model):
        patcher = _Patcher()
        switch(model, patcher)
        try:
            yield
        finally:
            patcher.undo()

    return patch


def _each(model, cls_name):
    """Every submodule of ``model`` whose class name ends with ``cls_name``."""
    return [m for m in model.modules() if type(m).__name__.endswith(cls_name)]


def _mamba(model):
    return [m for m in model.modules() if hasattr(m, "A_log") and hasattr(m, "D")]


def _set(modules, name, value):
    with torch.no_grad():
        for module in modules:
            getattr(module, name).fill_(value)


def no_state(model, patch):  # every token forgets the state at once (exp(dt A) = 0)
    _set(_mamba(model) or _each(model, "GatedDeltaNet"), "A_log", math.log(1e4))


def no_decay(model, patch):  # A = 0: the state keeps everything
    _set(_mamba(model) or _each(model, "GatedDeltaNet"), "A_log", -1e4)


def no_conv(model, patch):  # the short convolution passes each token through
    with torch.no_grad():
        for module in _mamba(model) or _each(model, "GatedDeltaNet"):
            module.conv1d.weight.zero_()
            module.conv1d.weight[..., -1] = 1
            if module.conv1d.bias is not None:
                module.conv1d.bias.zero_()


def no_gate(model, patch):  # the norm without its SiLU gate
    for module in _mamba(model):
        norm = module.norm
        patch.setattr(norm, "forward", lambda h, gate=None, norm=norm:
                      type(norm).forward(norm, h, None))


def no_norm_groups(model, patch):  # one RMS over all I channels instead of per group
    for module in _mamba(model):
        if hasattr(module.norm, "group_size"):
            patch.setattr(module.norm, "group_size", module.intermediate_size)
        else:  # Falcon-H1's norm counts groups
            patch.setattr(module.norm, "n_groups", 1)


def no_skip(model, patch):
    _set(_mamba(model), "D", 0.0)


def one_group(model, patch):  # every head reads group 0's B and C
    with torch.no_grad():
        for module in _mamba(model):
            inner, width = module.intermediate_size, module.ssm_state_size
            for start in (inner, inner + module.n_groups * width):  # B, then C rows
                rows = module.conv1d.weight[start:start + module.n_groups * width]
                rows.copy_(rows[:width].repeat(module.n_groups, 1, 1))
                if module.conv1d.bias is not None:
                    bias = module.conv1d.bias[start:start + module.n_groups * width]
                    bias.copy_(bias[:width].repeat(module.n_groups))
                proj = module.in_proj.weight[inner + start:inner + start
                                             + module.n_groups * width]
                proj.copy_(proj[:width].repeat(module.n_groups, 1))


def chunks_apart(model, patch):  # each of transformers' chunks starts from a zero state
    modeling = __import__(type(_mamba(model)[0]).__module__, fromlist=["_"])
    scan = modeling.mamba2_chunk_scan

    def apart(hidden, dt, A, B, C, chunk_size, **kw):
        kw.pop("initial_states", None)
        final = kw.get("return_final_states")
        pieces = [scan(hidden[:, s:s + chunk_size], dt[:, s:s + chunk_size], A,
                       B[:, s:s + chunk_size], C[:, s:s + chunk_size], chunk_size, **kw)
                  for s in range(0, hidden.shape[1], chunk_size)]
        outs = [p[0] if final else p for p in pieces]
        out = torch.cat(outs, dim=1)
        return (out, pieces[-1][1]) if final else out
    patch.setattr(modeling, "mamba2_chunk_scan", apart)


def no_key_groups(model, patch):  # Gated DeltaNet: every value head reads key head 0
    with torch.no_grad():
        for module in _each(model, "GatedDeltaNet"):
            width = module.head_k_dim
            for proj, start in ((module.q_proj, 0), (module.k_proj, module.key_dim)):
                proj.weight.copy_(proj.weight[:width].repeat(module.num_k_heads, 1))
                rows = module.conv1d.weight[start:start + module.key_dim]
                rows.copy_(rows[:width].repeat(module.num_k_heads, 1, 1))


SILU_OF_ONE = 1.2784645427610738  # silu(x) = 1 there: a gate that lets all through


def no_gdn_gate(model, patch):
    for module in _each(model, "GatedDeltaNet"):
        norm = module.o_norm
        patch.setattr(norm, "forward", lambda h, gate, norm=norm: type(norm).forward(
            norm, h, torch.full_like(gate, SILU_OF_ONE)))


def beta_once(model, patch):  # OLMo-Hybrid: beta in (0, 1), not (0, 2)
    for module in _each(model, "GatedDeltaNet"):
        patch.setattr(module, "allow_neg_eigval", False)


def qk_norm_per_head(model, patch):  # OLMo-Hybrid: the QK-norm over each head instead
    for attention in _each(model, "Attention"):
        for norm in (attention.q_norm, attention.k_norm):
            def per_head(h, norm=norm, d=attention.head_dim):
                heads = h.float().unflatten(-1, (-1, d))
                heads = heads * torch.rsqrt(heads.pow(2).mean(-1, keepdim=True)
                                            + norm.variance_epsilon)
                return (norm.weight * heads.flatten(-2)).to(h.dtype)
            patch.setattr(norm, "forward", per_head)


def no_rotary(model, patch):
    patch.setattr(model.model, "rotary_emb", None)


def full_rotary(model, patch):  # Bamba: turn the whole head instead of its half
    config = copy.deepcopy(model.config)
    config.rope_parameters = {**config.rope_parameters, "partial_rotary_factor": 1.0}
    patch.setattr(model.model, "rotary_emb", type(model.model.rotary_emb)(config))


def plain_attention_scale(model, patch):  # Granite: 1 / sqrt(d_h), not the multiplier
    for attention in _each(model, "Attention"):
        patch.setattr(attention, "scaling", attention.head_dim**-0.5)


def no_key_multiplier(model, patch):  # Falcon-H1
    for attention in _each(model, "Attention"):
        patch.setattr(attention, "key_multiplier", 1.0)


def no_mup_vector(model, patch):  # Falcon-H1: ssm_multipliers, outside the state dict
    for module in _mamba(model):
        patch.setattr(module, "mup_vector", torch.ones_like(module.mup_vector))


def no_ssm_in_multiplier(model, patch):  # Falcon-H1
    for module in _mamba(model):
        patch.setattr(module, "ssm_in_multiplier", 1.0)
