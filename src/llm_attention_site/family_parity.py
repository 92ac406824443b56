# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""ModernAttention beside the transformers attention layers of the open families.

Tiny random configs built from transformers' own config classes (eager attention,
float32; nothing downloaded): Llama 3.1 (``llama3`` angles), Gemma 2, Gemma 3, gpt-oss
(YaRN) and Qwen3-Next. ``build(family, layer_idx)`` makes the reference layer with
random weights and ours with ``ModernAttention.from_hf_config``, the weights loaded by
``from_hf_state_dict``; ``reference_forward`` runs the reference as its model does
(rotary tables from the model's rotary class, the mask from transformers' masking
utilities). The tests (``tests/test_families_reference.py``) assert on these; the pages
print ``max_differences``. Not a model module: it needs transformers.
"""

from __future__ import annotations

import copy
import functools
import os
from types import SimpleNamespace

import torch

from llm_attention.modern import ModernAttention, from_hf_state_dict

B, T, PROMPT, WINDOW = 3, 12, 7, 5
SMALL = dict(
    hidden_size=32,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=64,
    attn_implementation="eager",
)
LLAMA31_ROPE = dict(
    rope_type="llama3",
    rope_theta=10000.0,
    factor=8.0,
    low_freq_factor=1.0,
    high_freq_factor=4.0,
    original_max_position_embeddings=32,  # heads of 16: pairs kept, blended, divided
)
YARN_ROPE = dict(  # a low base: heads of 16 then have pairs kept, ramped and divided
    rope_type="yarn",
    rope_theta=10.0,
    factor=4.0,
    beta_fast=32.0,
    beta_slow=1.0,
    truncate=False,
    original_max_position_embeddings=16,  # factor x 16 = max_position_embeddings
)
# Family -> the layers compared: a windowed and a full one where the family has both
LAYERS = {
    "llama3.1": [0],
    "gemma2": [0, 1],
    "gemma3": [0, 5],
    "gpt-oss": [0, 1],
    "qwen3-next": [3],
}


@functools.cache
def hf() -> SimpleNamespace:
    """The parts of transformers used here, imported once, offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import (
        AutoConfig,
        DynamicCache,
        Gemma2Config,
        Gemma3TextConfig,
        GptOssConfig,
        LlamaConfig,
        Qwen3NextConfig,
    )
    from transformers.masking_utils import (
        create_causal_mask,
        create_sliding_window_causal_mask,
    )
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.gemma2 import modeling_gemma2
    from transformers.models.gemma3 import modeling_gemma3
    from transformers.models.gpt_oss import modeling_gpt_oss
    from transformers.models.llama import modeling_llama
    from transformers.models.qwen3_next import modeling_qwen3_next

    return SimpleNamespace(**locals())


@functools.cache
def configs() -> dict:
    """Family -> (config, attention class, rotary class)."""
    t = hf()
    return {
        "llama3.1": (
            t.LlamaConfig(**SMALL, rope_parameters=LLAMA31_ROPE, attention_bias=True),
            t.modeling_llama.LlamaAttention,
            t.modeling_llama.LlamaRotaryEmbedding,
        ),
        "gemma2": (
            t.Gemma2Config(
                **SMALL,
                num_hidden_layers=2,
                sliding_window=WINDOW,
                query_pre_attn_scalar=24,
                attn_logit_softcapping=2.0,
            ),
            t.modeling_gemma2.Gemma2Attention,
            t.modeling_gemma2.Gemma2RotaryEmbedding,
        ),
        "gemma3": (
            t.Gemma3TextConfig(
                **SMALL,
                num_hidden_layers=6,
                sliding_window=WINDOW,
                query_pre_attn_scalar=24,
            ),
            t.modeling_gemma3.Gemma3Attention,
            t.modeling_gemma3.Gemma3RotaryEmbedding,
        ),
        "gpt-oss": (
            t.GptOssConfig(
                **SMALL,
                num_hidden_layers=2,
                sliding_window=WINDOW,
                rope_parameters=YARN_ROPE,
            ),
            t.modeling_gpt_oss.GptOssAttention,
            t.modeling_gpt_oss.GptOssRotaryEmbedding,
        ),
        "qwen3-next": (
            t.Qwen3NextConfig(**SMALL, num_hidden_layers=4),
            t.modeling_qwen3_next.Qwen3NextAttention,
            t.modeling_qwen3_next.Qwen3NextRotaryEmbedding,
        ),
    }


def published_config(values: dict):
    """The transformers config object of a published ``config.json`` dict (its class
    found by ``model_type``), for ``ROPE_INIT_FUNCTIONS`` and the reference layers.
    The fields are copied: transformers writes ``rope_theta`` into the ``rope_scaling``
    dict it is given, which would change the published dict for every later reader."""
    fields = copy.deepcopy({k: v for k, v in values.items() if k != "model_type"})
    return hf().AutoConfig.for_model(values["model_type"], **fields)


@functools.cache
def build(family: str, layer_idx: int):
    """(config, reference layer, its rotary module, layer type, our layer), both in eval
    mode, with the same random weights (sinks drawn wider, to weigh in the softmax)."""
    config, attention_class, rotary_class = configs()[family]
    torch.manual_seed(layer_idx)
    reference = attention_class(config, layer_idx=layer_idx).eval()
    with torch.no_grad():
        for name, p in reference.named_parameters():
            p.normal_(0.0, 1.0 if name == "sinks" else 0.2)
    ours = ModernAttention.from_hf_config(config, layer_idx).eval()
    ours.load_state_dict(from_hf_state_dict(reference.state_dict()))
    kind = (
        config.layer_types[layer_idx] if getattr(config, "layer_types", None) else None
    )
    return config, reference, rotary_class(config), kind, ours


def reference_forward(built, x, attention_mask, cache=None, start=0):
    """The reference layer on ``x`` ``(B, T, d)`` at positions ``start..``, as its model
    calls it."""
    config, reference, rotary, kind, _ = built
    positions = torch.arange(start, start + x.shape[1])[None].expand(x.shape[0], -1)
    make_mask = (
        hf().create_sliding_window_causal_mask
        if kind == "sliding_attention"
        else hf().create_causal_mask
    )
    mask = make_mask(
        config=config,
        inputs_embeds=x,
        attention_mask=attention_mask,
        past_key_values=cache,
        position_ids=positions,
    )
    per_kind = isinstance(
        getattr(rotary, "rope_type", None), dict
    )  # Gemma 3: one per kind
    cos_sin = rotary(x, positions, kind) if per_kind else rotary(x, positions)
    out, _ = reference(
        x, position_embeddings=cos_sin, attention_mask=mask, past_key_values=cache
    )
    return out


def inputs(config, seed, padded):
    """``x`` ``(B, T, d)`` and its padding mask: left padding of 0, 4 and PROMPT - 1
    tokens when ``padded``, else none."""
    x = torch.randn(
        B, T, config.hidden_size, generator=torch.Generator().manual_seed(seed)
    )
    padding = torch.ones(B, T, dtype=torch.bool)
    if padded:
        padding[1, :4] = False
        padding[2, : PROMPT - 1] = False
    return x, padding


def paths(ours) -> list[bool]:
    """The explicit path, and the fast one where the fused kernel can follow."""
    return (
        [False] if ours.softcap is not None or ours.sinks is not None else [False, True]
    )


def decode(built, sizes, padded, fast_path, seed=3):
    """Ours and the reference, each with its own cache, fed ``sizes`` tokens per call:
    a list of (ours, expected, real tokens) per call."""
    config, *_, ours = built
    x, padding = inputs(config, seed, padded)
    ours.fast_path = fast_path
    hf_cache, our_cache = hf().DynamicCache(config=config), ours.make_cache(B)
    ends = torch.tensor(sizes).cumsum(0).tolist()
    steps = []
    with torch.no_grad():
        for start, end in zip([0, *ends[:-1]], ends):
            expected = reference_forward(
                built, x[:, start:end], padding[:, :end].long(), hf_cache, start
            )
            got = ours(
                x[:, start:end],
                padding[:, start:end] if padded else None,
                cache=our_cache,
            )
            steps.append((got, expected, padding[:, start:end]))
    ours.fast_path = False
    return steps, our_cache


def max_differences(family: str, layer_idx: int) -> dict[str, float]:
    """The largest |ours - transformers| at real tokens, per case: prefill with and
    without left padding, and decoding a padded prompt then one token at a time, on each
    path the layer can take."""
    built = build(family, layer_idx)
    config, *_, ours = built
    found = {}
    for fast_path in paths(ours):
        name = "fast" if fast_path else "explicit"
        for padded in (False, True):
            x, padding = inputs(config, 2, padded)
            ours.fast_path = fast_path
            with torch.no_grad():
                expected = reference_forward(built, x, padding.long())
                got = ours(x, padding if padded else None)
            ours.fast_path = False
            case = f"prefill{', padded' if padded else ''} ({name})"
            found[case] = (got[padding] - expected[padding]).abs().max().item()
        steps, _ = decode(built, [PROMPT] + [1] * (T - PROMPT), True, fast_path)
        found[f"cached decoding, padded ({name})"] = max(
            (got[real] - expected[real]).abs().max().item()
            for got, expected, real in steps
        )
    return found
