# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""ModernAttention beside the attention layers of Llama 4, SmolLM3 and Gemma 4 in
transformers: chunks, layers without positions, temperature tuning, a weightless
QK-norm, keys as values, proportional rotary and layers that reuse an earlier layer's
keys and values.

Tiny random configs of transformers' own config classes (eager attention, float32;
nothing downloaded). ``build(family, layer_idx)`` makes the reference layer with random
weights and ours with ``ModernAttention.from_hf_config``, the weights loaded by
``from_hf_state_dict``; a Gemma 4 layer that reuses keys and values comes with the
layer it reads them from (``hf_config.kv_source_layer``). ``run`` feeds both, as their
models do (rotary tables from the model's rotary class, masks from transformers'
masking utilities, a ``DynamicCache`` and Gemma 4's shared key/value states), in one
prefill or a prompt and then more calls. The tests
(``tests/test_llama4_gemma4_reference.py``) assert on these; the page prints
``max_differences``. Not a model module: it needs transformers.
"""

from __future__ import annotations

import functools
import os
from types import SimpleNamespace

import torch

from llm_attention.hf_config import kv_source_layer
from llm_attention.kv_sharing import SharedKV
from llm_attention.modern import ModernAttention, from_hf_state_dict

B, T, PROMPT, CHUNK, WINDOW = 3, 12, 7, 5, 5
SMALL = dict(
    hidden_size=32,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=64,
    attn_implementation="eager",
)
# Family -> the layers compared, one of each kind
LAYERS = {
    "llama4": [0, 3],  # chunked with positions; full without, temperature-tuned
    "smollm3": [0, 3],  # full with positions; windowed without
    "gemma4": [0, 1, 2, 3],  # windowed, full (keys as values), and their two readers
}
# the calls of a run: a prefill, or a prompt then tokens; all cross a chunk boundary
STEPS = {
    "prefill": (T,),
    "7+1+1+1+1+1": (PROMPT,) + (1,) * (T - PROMPT),
    "4+6+2": (4, 6, 2),
}


@functools.cache
def hf() -> SimpleNamespace:
    """The parts of transformers used here, imported once, offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers
    from transformers import (
        DynamicCache,
        Gemma4TextConfig,
        Llama4TextConfig,
        SmolLM3Config,
    )
    from transformers.cache_utils import KVSharingDict
    from transformers.masking_utils import (
        create_causal_mask,
        create_chunked_causal_mask,
        create_sliding_window_causal_mask,
    )
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.gemma4 import modeling_gemma4
    from transformers.models.llama4 import modeling_llama4
    from transformers.models.smollm3 import modeling_smollm3

    version = transformers.__version__
    return SimpleNamespace(**locals())


@functools.cache
def configs() -> dict:
    """Family -> (config, attention class, rotary class). Temperature tuning from
    position 3 on (``floor_scale`` 4, ``attn_scale`` 0.5), so that it bites within
    the 12 tokens; Llama 3.1-style stretched angles on Llama 4's chunked layers."""
    t = hf()
    import logging

    logging.getLogger("transformers").setLevel(logging.ERROR)  # no notes on defaults
    llama3 = dict(rope_type="llama3", rope_theta=500000.0, factor=8.0,
                  low_freq_factor=1.0, high_freq_factor=4.0,
                  original_max_position_embeddings=16)
    return {
        "llama4": (
            t.Llama4TextConfig(**SMALL, num_hidden_layers=4, attention_chunk_size=CHUNK,
                               floor_scale=4, attn_scale=0.5, rope_parameters=llama3,
                               num_local_experts=2, intermediate_size=32,
                               intermediate_size_mlp=32),
            t.modeling_llama4.Llama4TextAttention,
            t.modeling_llama4.Llama4TextRotaryEmbedding,
        ),
        "smollm3": (
            t.SmolLM3Config(**SMALL, num_hidden_layers=4, use_sliding_window=True,
                            sliding_window=WINDOW),
            t.modeling_smollm3.SmolLM3Attention,
            t.modeling_smollm3.SmolLM3RotaryEmbedding,
        ),
        "gemma4": (
            t.Gemma4TextConfig(
                **SMALL, num_hidden_layers=4, sliding_window=WINDOW,
                layer_types=["sliding_attention", "full_attention"] * 2,
                num_kv_shared_layers=2, attention_k_eq_v=True, global_head_dim=32,
                num_global_key_value_heads=1, hidden_size_per_layer_input=0,
            ),
            t.modeling_gemma4.Gemma4TextAttention,
            t.modeling_gemma4.Gemma4TextRotaryEmbedding,
        ),
    }


def layer_kind(family: str, layer_idx: int) -> str:
    return configs()[family][0].layer_types[layer_idx]


@functools.cache
def build(family: str, layer_idx: int) -> tuple:
    """(reference layer, our layer), both in eval mode with the same random weights."""
    config, attention_class, _ = configs()[family]
    torch.manual_seed(layer_idx)
    reference = attention_class(config, layer_idx=layer_idx).eval()
    with torch.no_grad():
        for p in reference.parameters():
            p.normal_(0.0, 0.2)
    ours = ModernAttention.from_hf_config(config, layer_idx).eval()
    ours.load_state_dict(from_hf_state_dict(reference.state_dict()))
    return reference, ours


def layers_run(family: str, layer_idx: int) -> list[int]:
    """The layers a run feeds, in order: the source of the keys first, if any."""
    source = kv_source_layer(configs()[family][0], layer_idx)
    return [layer_idx] if source is None else [source, layer_idx]


def inputs(seed: int, padded: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` ``(B, T, d)`` and its padding: left padding of 0, 4 and PROMPT - 1
    tokens when ``padded`` (the chunks of those rows start later)."""
    x = torch.randn(B, T, SMALL["hidden_size"],
                    generator=torch.Generator().manual_seed(seed))
    padding = torch.ones(B, T, dtype=torch.bool)
    if padded:
        padding[1, :4] = False
        padding[2, : PROMPT - 1] = False
    return x, padding


def _mask(family, kind, x, attention_mask, cache, positions):
    t = hf()
    make = {"chunked_attention": t.create_chunked_causal_mask,
            "sliding_attention": t.create_sliding_window_causal_mask,
            "full_attention": t.create_causal_mask}[kind]
    return make(config=configs()[family][0], inputs_embeds=x,
                attention_mask=attention_mask, past_key_values=cache,
                position_ids=positions)


def _reference_call(family, layer_idx, x, mask, cache, start, shared):
    kind = layer_kind(family, layer_idx)
    reference, _ = build(family, layer_idx)
    positions = torch.arange(start, start + x.shape[1])[None].expand(x.shape[0], -1)
    rotary = _rotary(family)
    if family == "gemma4":
        cos_sin = rotary(x, positions, kind)
        extra = dict(shared_kv_states=shared)
    else:
        cos_sin, extra = rotary(x, positions), {}
    out, _ = reference(x, position_embeddings=cos_sin, attention_mask=mask,
                       past_key_values=cache, **extra)
    return out


@functools.cache
def _rotary(family):
    config, _, rotary_class = configs()[family]
    return rotary_class(config)


@functools.cache  # the tests and the page ask for the same runs
def run(family: str, layer_idx: int, sizes: tuple, padded: bool, fast_path: bool,
        seed: int = 3):
    """Ours and the reference fed ``sizes`` tokens per call, each side with its own
    cache (none for a single prefill): per call, (ours, theirs, real tokens) of layer
    ``layer_idx``; and our caches, by layer."""
    config = configs()[family][0]
    x, padding = inputs(seed, padded)
    order = layers_run(family, layer_idx)
    cached = len(sizes) > 1
    hf_cache = hf().DynamicCache(config=config) if cached else None
    ours = {i: build(family, i)[1] for i in order}
    our_caches = {i: ours[i].make_cache(B) if cached else None for i in order[:1]}
    shared = SharedKV(our_caches[order[0]]) if len(order) > 1 else None
    ends = torch.tensor(sizes).cumsum(0).tolist()
    steps = []
    with torch.no_grad():
        for start, end in zip([0, *ends[:-1]], ends):
            hf_shared = hf().KVSharingDict()
            positions = torch.arange(start, end)[None].expand(B, -1)
            masks = {  # made before any layer runs, as the model makes them
                i: _mask(family, layer_kind(family, i), x[:, start:end],
                         padding[:, :end].long(), hf_cache, positions)
                for i in order
            }
            for i in order:
                expected = _reference_call(
                    family, i, x[:, start:end], masks[i], hf_cache, start, hf_shared
                )
                module = ours[i]
                module.fast_path = fast_path
                try:
                    got = module(
                        x[:, start:end], padding[:, start:end] if padded else None,
                        cache=shared if shared is not None else our_caches[i],
                    )
                finally:
                    module.fast_path = False
            steps.append((got, expected, padding[:, start:end]))
    return steps, our_caches


def max_differences(family: str, layer_idx: int) -> dict[str, float]:
    """The largest |ours - transformers| at real tokens, per case: each run of
    ``STEPS``, padded or not, on both paths."""
    found = {}
    for fast_path in (False, True):
        path = "fast" if fast_path else "explicit"
        for name, sizes in STEPS.items():
            for padded in (False, True):
                steps, _ = run(family, layer_idx, sizes, padded, fast_path)
                case = f"{name}{', padded' if padded else ''} ({path})"
                found[case] = max(
                    (got[real] - expected[real]).abs().max().item()
                    for got, expected, real in steps
                )
    return found
