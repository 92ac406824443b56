# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""The rows of the at-a-glance tables, derived from the family table's published
configs (``families.py``).

``family_row`` reads each softmax model through
``hf_config.modern_attention_options``, layer by layer, the way
``ModernAttention.from_hf_config`` does, and derives what the combined page's table
shows: nothing in it is typed by hand. ``latent_row`` does the same for
the latent-attention families (DeepSeek-V3, and V3.2 with its indexer's keys). Not a
model module.
"""

from __future__ import annotations

import math

from llm_attention.hf_config import (
    config_dict,
    kv_source_layer,
    layer_type,
    modern_attention_options,
)

from .families import HYBRIDS, LATENT_PUBLISHED, PUBLISHED

ATTENTION_KINDS = ("full_attention", "sliding_attention", "chunked_attention")
BYTES_PER_NUMBER = 2  # bfloat16, as most of these checkpoints are published


def latent_row(name: str) -> dict:
    """What one token leaves in the cache of a latent-attention model: per layer, the
    latent (``kv_lora_rank``) and the rotary key shared by every head
    (``qk_rope_head_dim``); with DeepSeek sparse attention, the indexer's key too
    (``index_head_dim``), so that later tokens can score this one."""
    source, values = LATENT_PUBLISHED[name]
    latent = values["kv_lora_rank"] + values["qk_rope_head_dim"]  # numbers per layer
    indexer = values.get("index_head_dim", 0)  # numbers per layer (V3.2 only)
    layers = values["num_hidden_layers"]
    return dict(
        name=name, source=source, layers=layers,
        num_heads=values["num_attention_heads"],
        latent_numbers=latent, indexer_numbers=indexer,
        top_k=values.get("index_topk"),
        bytes_per_token=(latent + indexer) * layers * BYTES_PER_NUMBER,
    )


def hybrid_memory(name: str) -> tuple[int, int, int, int]:
    """What one sequence keeps in a hybrid of ``HYBRIDS``: ``(full layers, bytes of
    their caches per token, linear layers, bytes of each one's state)``, weighed with
    the layers' own caches (``make_cache(1).nbytes``, built on the ``meta`` device),
    bfloat16 but for the linear layers' state, which is float32."""
    import torch

    from llm_attention.hf_layers import layer_from_hf

    config = HYBRIDS[name][1]
    count = config_dict(config)["num_hidden_layers"]
    kinds = [layer_type(config_dict(config), i) for i in range(count)]
    with torch.device("meta"):  # shapes only: nothing allocated
        full = layer_from_hf(config, kinds.index("full_attention"), context_length=1)
        linear = layer_from_hf(config, kinds.index("linear_attention"))
        per_token = full.to(torch.bfloat16).make_cache(1).nbytes  # room for one token
        state = linear.to(torch.bfloat16).make_cache(1).nbytes
    full_count = kinds.count("full_attention")
    return full_count, per_token, kinds.count("linear_attention"), state


def ideas(options: dict) -> list[str]:
    """The options of a layer that differ from plain grouped-query attention."""
    found = []
    turns = not options.get("nope")  # a layer without positions has no angles
    rope_type = turns and (options.get("rope_scaling") or {}).get("rope_type")
    partial = options.get("partial_rotary_factor", 1.0) if turns else 1.0
    if rope_type == "proportional":  # a share of the pairs, spread over the head
        found.append(f"proportional angles on {partial:g} of the pairs")
    elif rope_type:
        found.append(f"{rope_type} angles")
    if partial < 1 and rope_type != "proportional":
        found.append(f"{partial:g} of a head turned")
    if options.get("qk_norm"):
        found.append(
            "(1 + w) QK-norm" if options.get("norm_unit_offset") else "QK-norm"
        )
    scale = options.get("scale")
    if scale == 1.0:
        found.append("score scale 1")
    elif scale and not math.isclose(scale, options["head_dim"] ** -0.5):
        found.append("own score scale")  # not 1 / sqrt(d_h), whatever the field says
    if options.get("softcap"):
        found.append(f"soft cap {options['softcap']:g}")
    if options.get("sinks"):
        found.append("sinks")
    if options.get("output_gate"):
        found.append("output gate")
    if options.get("qkv_bias"):
        found.append("biases")
    if options.get("chunk_size"):
        found.append(f"chunks of {options['chunk_size']:,}")
    if options.get("nope"):
        found.append("layers without positions")
    if options.get("temperature_tuning"):
        found.append("temperature tuning")
    if options.get("qk_norm") and options.get("qk_norm_weight") is False:
        found[found.index("QK-norm")] = "QK-norm without weights"
    if options.get("value_norm"):
        found.append("value norm")
    if options.get("values_from_keys"):
        found.append("keys as values")
    if options.get("kv_shared"):
        found.append("shared keys and values")
    return found


def family_row(name: str) -> dict:
    """One model's attention, read layer by layer from its published config.

    The cache per token sums each layer that owns one: a key and a value per key/value
    head (a layer that reuses an earlier layer's keys and values owns none). A local
    layer (a window, or chunks) stops growing at its span, so past it only the full
    layers that own a cache add to it."""
    source, config = PUBLISHED[name]
    values = config_dict(config)
    num_layers = values["num_hidden_layers"]
    kinds = [layer_type(values, i) for i in range(num_layers)]
    attention = [i for i, kind in enumerate(kinds) if kind in ATTENTION_KINDS]
    layers = {i: modern_attention_options(config, i) for i in attention}
    def span_of(i: int) -> int | None:  # the window or the chunk of a local layer
        return layers[i].get("window") or layers[i].get("chunk_size")

    local = [i for i in attention if span_of(i)]
    owners = [i for i in attention if kv_source_layer(values, i) is None]

    def cache_bytes(i: int) -> int:  # K and V of one layer, one token
        return 2 * layers[i]["num_kv_heads"] * layers[i]["head_dim"] * BYTES_PER_NUMBER

    first = layers[attention[0]]
    span = next((span_of(i) for i in local), None)
    shapes = sorted({(o["num_kv_heads"], o["head_dim"]) for o in layers.values()})
    extra = [
        f"full layers {kv} x {d}" for kv, d in shapes
        if (kv, d) != (first["num_kv_heads"], first["head_dim"])
    ]  # other key/value heads on some layers (Gemma 4)
    return dict(
        name=name,
        source=source,
        layers=num_layers,
        attention_layers=len(attention),
        windowed_layers=len(local),
        window=span,
        chunked=any(layers[i].get("chunk_size") for i in local),
        sharing_layers=len(attention) - len(owners),
        num_heads=first["num_heads"],
        num_kv_heads=first["num_kv_heads"],
        head_dim=first["head_dim"],
        rope_types=sorted(
            {
                "none" if o.get("nope") else
                (o["rope_scaling"] or {"rope_type": "default"})["rope_type"]
                for o in layers.values()
            }
        ),
        ideas=sorted({idea for o in layers.values() for idea in ideas(o)} | set(extra)),
        bytes_per_token=sum(cache_bytes(i) for i in owners),
        bytes_per_token_beyond_window=sum(
            cache_bytes(i) for i in owners if i not in local
        ),
        bytes_per_token_unshared=sum(cache_bytes(i) for i in attention),
    )
