# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""One entry point for any decoder layer of a Hugging Face config: ``layer_from_hf``.

``layer_from_hf(config, layer_idx, state_dict=None, mixer=None)`` reads what kind of
layer ``layer_idx`` is (softmax attention, full or windowed; latent attention; ...)
from a transformers config object or the dict of a checkpoint's ``config.json``, builds
our module for it, and, when ``state_dict`` is given (the ``state_dict()`` of that
layer's transformers token mixer: ``model.layers[i].self_attn``, ``.linear_attn``,
``.mamba`` or, in Nemotron-H, ``.mixer``), loads its weights under our names.

``mixer`` names a token mixer as transformers' attribute does
(``hf_config.mixer_names``): a Falcon-H1 layer has two side by side, and needs
``mixer="mamba"`` or ``mixer="self_attn"``; on a layer with one, ``mixer`` may only
name that one. A Nemotron-H MLP or MoE block has no token mixer, and is refused. The
module computes what that submodule computes; what the decoder layer does around it
(Granite's ``residual_multiplier``, Falcon-H1's ``attention_in_multiplier``,
``attention_out_multiplier`` and ``ssm_out_multiplier``) stays outside.

The module it returns runs a causal prefill over positions ``0..T-1`` when called as
``module(x)`` on ``x`` ``(B, T, hidden_size)``, and returns ``(B, T, hidden_size)``.

================================  ===========================================
layer kind                        module
================================  ===========================================
GPT-2's attention (the chapters'  ``MultiHeadAttention`` (``multihead.py``)
module, with biases)
softmax attention: full,          ``ModernAttention`` (``modern.py``)
windowed or chunked (Llama ...
Qwen3-Next, Qwen3.5's full
layers, MiMo-V2-Flash, Laguna,
MiniMax-M3's full layers)
latent attention (DeepSeek-V3;    ``LatentAttention`` (``latent.py``)
Kimi Linear's full layers,
without rotary positions;
Mistral 4)
sparse latent attention           ``SparseLatentAttention`` (``sparse_latent.py``,
(DeepSeek-V3.2, GLM-5)            DeepSeek Sparse Attention: an indexer's top-k)
block-sparse attention            ``BlockSparseAttention`` (``block_sparse.py``:
(MiniMax-M3's sparse layers)      an indexer's top blocks of keys)
compressed attention              ``CompressedAttention``
(DeepSeek-V4: sliding, CSA, HCA)  (``compressed_attention.py``)
Gated DeltaNet (Qwen3-Next,       ``GatedDeltaNet`` (``linear_attention.py``)
Qwen3.5 and OLMo-Hybrid's linear
layers)
Kimi Delta Attention (Kimi        ``KimiDeltaAttention``
Linear's linear layers)           (``linear_attention.py``)
Mamba-2 (Nemotron-H, Granite 4.0  ``Mamba2`` (``mamba2.py``)
hybrids, Falcon-H1, Bamba)
================================  ===========================================

The attention layers of the hybrid families (Nemotron-H, Granite 4.0, Falcon-H1,
Bamba, OLMo-Hybrid) are ``ModernAttention`` with their options
(``hf_config.hybrid_attention_options``).

A Gemma 4 layer that reuses an earlier layer's keys and values
(``hf_config.kv_source_layer`` names that layer) has no key or value projection:
call it with ``cache=`` the ``kv_sharing.SharedKV`` its source layer was called
with, after the source ran on the same tokens; ``module(x)`` alone raises a
``TypeError`` that says so. A GLM-5 layer that reuses an earlier layer's top-k
(``hf_config.topk_source_layer`` names it) has no indexer: call it, and its source,
with ``topk=`` one ``kv_sharing.SharedTopK``, the source first; without one it raises a
``TypeError`` that says so.

A family or a layer kind that no module here implements is refused by name: never a
module that silently computes something else.

This module lives apart from ``hf_config.py`` because it imports every layer module:
``hf_config.py`` stays small, so copying ``modern.py`` does not bring the others.

Builds on ``block_sparse.py``, ``compressed_attention.py``, ``hf_config.py``,
``latent.py``, ``linear_attention.py``, ``mamba2.py``, ``modern.py``, ``multihead.py``
and ``sparse_latent.py`` of this package (and what they build on), imported relatively:
copy them with this file, under any package name (its API page offers the set as one
download). MIT licence: keep the first two lines of each file.
"""

from __future__ import annotations

from torch import nn

from . import (
    block_sparse, compressed_attention, latent, linear_attention, mamba2, modern,
    multihead, sparse_latent,
)
from .hf_config import (
    COMPRESSED_FAMILIES,
    COMPRESSED_KINDS,
    FAMILIES,
    MAMBA2_FAMILIES,
    SPARSE_LATENT_FAMILIES,
    config_dict,
    layer_type,
    mixer_names,
)


def _gpt2(config, layer_idx: int, overrides: dict) -> nn.Module:
    """GPT-2's attention is the chapters' module with biases: ``n_embd`` wide,
    ``n_head`` heads, ``n_positions`` tokens, scores scaled by 1/sqrt(d_h)."""
    values = config_dict(config)
    if values.get("scale_attn_weights") is False or values.get(
        "scale_attn_by_inverse_layer_idx"
    ) or values.get("reorder_and_upcast_attn"):
        raise ValueError(
            "GPT-2 configs with scale_attn_weights=False, "
            "scale_attn_by_inverse_layer_idx or reorder_and_upcast_attn are not "
            "implemented: MultiHeadAttention scales scores by 1/sqrt(d_h)"
        )
    options = dict(
        d_in=values["n_embd"], d_out=values["n_embd"],
        context_length=values["n_positions"], dropout=0.0,
        num_heads=values["n_head"], qkv_bias=True,
    )
    return multihead.MultiHeadAttention(**{**options, **overrides})


def _gpt2_weights(state_dict: dict) -> dict:
    """GPT-2's ``Conv1D`` computes ``x @ W + b`` with ``W`` ``(d_in, d_out)``: each
    weight is the transpose of the ``nn.Linear`` one; ``c_attn`` holds the query, key
    and value projections side by side."""
    unknown = sorted(set(state_dict) - {
        "c_attn.weight", "c_attn.bias", "c_proj.weight", "c_proj.bias"})
    if unknown:
        raise ValueError(
            f"state_dict keys {unknown} are not weights of GPT-2's attention; "
            "expected c_attn.<weight|bias> and c_proj.<weight|bias>"
        )
    queries, keys, values = state_dict["c_attn.weight"].chunk(3, dim=1)  # 3 x (d, d)
    biases = state_dict["c_attn.bias"].chunk(3)  # 3 x (d,)
    ours = {}
    for name, weight, bias in zip(("W_query", "W_key", "W_value"),
                                  (queries, keys, values), biases):
        ours[f"{name}.weight"] = weight.T.contiguous()  # (d_in, d_out) -> (d_out, d_in)
        ours[f"{name}.bias"] = bias
    ours["out_proj.weight"] = state_dict["c_proj.weight"].T.contiguous()  # (d, d)
    ours["out_proj.bias"] = state_dict["c_proj.bias"]
    return ours


def _modern(config, layer_idx: int, overrides: dict) -> nn.Module:
    return modern.ModernAttention.from_hf_config(config, layer_idx, **overrides)


def _latent(config, layer_idx: int, overrides: dict) -> nn.Module:
    return latent.LatentAttention.from_hf_config(config, layer_idx, **overrides)


def _sparse_latent(config, layer_idx: int, overrides: dict) -> nn.Module:
    return sparse_latent.SparseLatentAttention.from_hf_config(
        config, layer_idx, **overrides
    )


def _block_sparse(config, layer_idx: int, overrides: dict) -> nn.Module:
    return block_sparse.BlockSparseAttention.from_hf_config(
        config, layer_idx, **overrides
    )


def _compressed(config, layer_idx: int, overrides: dict) -> nn.Module:
    return compressed_attention.CompressedAttention.from_hf_config(
        config, layer_idx, **overrides
    )


def _linear(overrides: dict) -> dict:
    """A linear layer reads any number of tokens: a ``context_length`` given for the
    whole model applies to its softmax layers only."""
    return {name: value for name, value in overrides.items()
            if name != "context_length"}


def _gated_delta_net(config, layer_idx: int, overrides: dict) -> nn.Module:
    return linear_attention.GatedDeltaNet.from_hf_config(
        config, layer_idx, **_linear(overrides)
    )


def _kimi_delta(config, layer_idx: int, overrides: dict) -> nn.Module:
    return linear_attention.KimiDeltaAttention.from_hf_config(
        config, layer_idx, **_linear(overrides)
    )


def _mamba2(config, layer_idx: int, overrides: dict) -> nn.Module:
    return mamba2.Mamba2.from_hf_config(config, layer_idx, **_linear(overrides))


def _by_name(rename):
    """A renamer that needs only the weights' names, not the module built."""
    return lambda state_dict, module: rename(state_dict)


def _linear_weights(state_dict: dict, module: nn.Module) -> dict:
    """Qwen3-Next groups its projections by key head: the module says how many."""
    return linear_attention.from_hf_state_dict(
        state_dict, num_key_heads=module.num_key_heads
    )


MODERN = (_modern, _by_name(modern.from_hf_state_dict))
LATENT = (_latent, _by_name(latent.from_hf_state_dict))
# (family, layer kind) -> (builder, renamer of the transformers submodule's weights,
# called with them and the module built). A kind of None matches every layer.
BUILDERS = {
    ("gpt2", None): (_gpt2, _by_name(_gpt2_weights)),
    **{(family, "full_attention"): MODERN for family in FAMILIES},
    **{(family, "sliding_attention"): MODERN for family in FAMILIES},
    ("llama4_text", "chunked_attention"): MODERN,
    ("deepseek_v3", None): LATENT,
    ("mistral4", None): LATENT,
    ("minimax_m3_vl_text", "minimax_m3_sparse"): (
        _block_sparse, _by_name(block_sparse.from_hf_state_dict)),
    **{(family, None): (_sparse_latent, _by_name(sparse_latent.from_hf_state_dict))
       for family in SPARSE_LATENT_FAMILIES},
    ("kimi_linear", "full_attention"): LATENT,
    **{(family, kind): (_compressed, _by_name(compressed_attention.from_hf_state_dict))
       for family in COMPRESSED_FAMILIES for kind in COMPRESSED_KINDS},
    ("qwen3_next", "linear_attention"): (_gated_delta_net, _linear_weights),
    ("qwen3_5_text", "linear_attention"): (_gated_delta_net, _linear_weights),
    ("kimi_linear", "linear_attention"): (_kimi_delta, _linear_weights),
    ("olmo_hybrid", "linear_attention"): (_gated_delta_net, _linear_weights),
    **{(family, "linear_attention"): (_mamba2, _by_name(mamba2.from_hf_state_dict))
       for family in MAMBA2_FAMILIES},
}


def layer_kind(config: object, layer_idx: int) -> tuple[str, str]:
    """``(model_type, kind)`` of decoder layer ``layer_idx``: the kind is what the
    config's ``layer_types`` (or its family's pattern) says, for example
    ``"full_attention"``, ``"sliding_attention"`` or ``"linear_attention"``. A
    Qwen3.5 config's ``model_type`` is that of its text part, ``"qwen3_5_text"``."""
    values = config_dict(config)
    return values.get("model_type"), layer_type(values, layer_idx)


# --8<-- [start:layer_from_hf]
def layer_from_hf(
    config: object, layer_idx: int, state_dict: dict | None = None, *,
    mixer: str | None = None, **overrides,
) -> nn.Module:
    """Our module for decoder layer ``layer_idx`` of ``config`` (a transformers config
    or a ``config.json`` dict), in eval mode, with the weights of ``state_dict`` (that
    layer's transformers token mixer's ``state_dict()``) when given. ``mixer`` picks
    one of a layer's token mixers by transformers' name (Falcon-H1: ``"mamba"`` or
    ``"self_attn"``). ``overrides`` replace options, for example
    ``context_length=4096`` (which a linear-attention layer, having no limit,
    ignores)."""
    family, kind = layer_kind(config, layer_idx)
    kind = pick_mixer(config, layer_idx, family, kind, mixer)
    entry = BUILDERS.get((family, kind)) or BUILDERS.get((family, None))
    if entry is None:
        known = sorted({f for f, _ in BUILDERS})
        if family not in known:
            raise ValueError(
                f"model_type {family!r} is not implemented; expected one of "
                f"{', '.join(known)}"
            )
        raise ValueError(
            f"layer {layer_idx} of {family!r} is a {kind!r} layer, which no module "
            "here implements"
        )
    build, rename = entry
    module = build(config, layer_idx, overrides)
    if state_dict is not None:
        module.load_state_dict(rename(dict(state_dict), module))
    return module.eval()
# --8<-- [end:layer_from_hf]


def pick_mixer(config, layer_idx: int, family: str, kind: str, mixer) -> str:
    """The kind of the token mixer ``mixer`` names (or of the layer's only one):
    refuse a block without one, an ambiguous call, and a name the layer lacks."""
    if family not in {f for f, _ in BUILDERS}:
        return kind  # refused by name in layer_from_hf
    mixers = mixer_names(config, layer_idx)  # transformers' name -> kind
    if not mixers:
        raise ValueError(
            f"layer {layer_idx} of {family!r} is a {kind!r} block: it has no token "
            "mixer (no attention, no state), so there is no layer to build here"
        )
    if mixer is None:
        if len(mixers) > 1:
            raise ValueError(
                f"layer {layer_idx} of {family!r} has {len(mixers)} token mixers side "
                f"by side: pass mixer= one of {', '.join(map(repr, mixers))}"
            )
        return next(iter(mixers.values()))
    if mixer not in mixers:
        raise ValueError(
            f"mixer={mixer!r} is not a token mixer of layer {layer_idx} of "
            f"{family!r}; it has {', '.join(map(repr, mixers))}"
        )
    return mixers[mixer]
