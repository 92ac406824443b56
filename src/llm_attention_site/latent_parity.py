# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""LatentAttention beside transformers' ``DeepseekV3Attention``.

A tiny random DeepSeek-V3 config built from transformers' own config class (eager
attention, float32, YaRN angles with DeepSeek's ``mscale``; nothing downloaded).
``build(q_lora)`` makes the reference layer with random weights and ours with
``LatentAttention.from_hf_config``, its weights loaded by ``from_hf_state_dict``;
``reference_forward`` runs the reference as its model does (rotary tables from the
model's rotary class, the mask from transformers' masking utilities, its own cache of
latents). The tests (``tests/test_latent_reference.py``) assert on these; the page
prints ``max_differences``. Not a model module: it needs transformers.
"""

from __future__ import annotations

import functools
import os
from types import SimpleNamespace

import torch

from llm_attention.latent import LatentAttention, from_hf_state_dict

# The families' batch, lengths and left-padded inputs (B and T are read by the tests)
from .family_parity import B, PROMPT, T, inputs  # noqa: F401

TINY = dict(
    hidden_size=32,
    num_attention_heads=4,
    num_key_value_heads=4,
    kv_lora_rank=16,
    qk_nope_head_dim=8,
    qk_rope_head_dim=4,
    v_head_dim=6,
    num_hidden_layers=1,
    max_position_embeddings=64,
    rope_parameters=dict(
        rope_type="yarn", rope_theta=10000.0, factor=4.0, beta_fast=32.0,
        beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0,
        original_max_position_embeddings=16,
    ),
    attn_implementation="eager",
)
# The query path with its own bottleneck (DeepSeek-V3) and without (V2-Lite)
Q_LORA = {"q_lora_rank=24": 24, "no q_lora_rank": None}
PATHS = [  # (absorb, fast_path)
    (False, False), (False, True), (True, False), (True, True),
]


def path_name(absorb: bool, fast_path: bool) -> str:
    return f"{'absorbed' if absorb else 'plain'}, {'fast' if fast_path else 'explicit'}"


@functools.cache
def hf() -> SimpleNamespace:
    """The parts of transformers used here, imported once, offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import DeepseekV3Config, DynamicCache
    from transformers.masking_utils import create_causal_mask
    from transformers.models.deepseek_v3 import modeling_deepseek_v3

    return SimpleNamespace(**locals())


@functools.cache
def build(q_lora_rank: int | None):
    """(config, reference layer, its rotary module, our layer), in eval mode, with the
    same random weights."""
    t = hf()
    config = t.DeepseekV3Config(**TINY, q_lora_rank=q_lora_rank)
    torch.manual_seed(0)
    reference = t.modeling_deepseek_v3.DeepseekV3Attention(config, layer_idx=0).eval()
    with torch.no_grad():
        for name, p in reference.named_parameters():
            if "layernorm" in name:  # norms start at 1: move them off it
                p.uniform_(0.5, 1.5)
            else:
                p.normal_(0.0, 0.2)
    ours = LatentAttention.from_hf_config(config).eval()
    ours.load_state_dict(from_hf_state_dict(reference.state_dict()))
    rotary = t.modeling_deepseek_v3.DeepseekV3RotaryEmbedding(config)
    return config, reference, rotary, ours


def reference_forward(built, x, attention_mask, cache=None, start=0):
    """The reference layer on ``x`` ``(B, T, d)`` at positions ``start..``."""
    config, reference, rotary, _ = built
    positions = torch.arange(start, start + x.shape[1])[None].expand(x.shape[0], -1)
    mask = hf().create_causal_mask(
        config=config, inputs_embeds=x, attention_mask=attention_mask,
        past_key_values=cache, position_ids=positions,
    )
    out, _ = reference(
        x, position_embeddings=rotary(x, positions), attention_mask=mask,
        past_key_values=cache,
    )
    return out


def set_path(ours, absorb, fast_path):
    ours.absorb, ours.fast_path = absorb, fast_path


def decode(built, sizes, padded, absorb, fast_path, seed=3):
    """Ours (with a LatentCache) and the reference (with transformers' cache), fed
    ``sizes`` tokens per call: a list of (ours, expected, real tokens) per call, and
    our cache."""
    config, *_, ours = built
    x, padding = inputs(config, seed, padded)
    set_path(ours, absorb, fast_path)
    hf_cache, our_cache = hf().DynamicCache(config=config), ours.make_cache(B)
    ends = torch.tensor(sizes).cumsum(0).tolist()
    steps = []
    with torch.no_grad():
        for start, end in zip([0, *ends[:-1]], ends):
            expected = reference_forward(
                built, x[:, start:end], padding[:, :end].long(), hf_cache, start
            )
            got = ours(
                x[:, start:end], padding[:, start:end] if padded else None,
                cache=our_cache,
            )
            steps.append((got, expected, padding[:, start:end]))
    set_path(ours, False, False)
    return steps, our_cache


def max_differences(q_lora_rank: int | None = 24) -> dict[str, float]:
    """The largest |ours - transformers| at real tokens, per path and case: prefill
    with left padding, and decoding a padded prompt then one token at a time."""
    built = build(q_lora_rank)
    config, *_, ours = built
    found = {}
    for absorb, fast_path in PATHS:
        x, padding = inputs(config, 2, True)
        set_path(ours, absorb, fast_path)
        with torch.no_grad():
            expected = reference_forward(built, x, padding.long())
            got = ours(x, padding)
        set_path(ours, False, False)
        name = path_name(absorb, fast_path)
        found[f"prefill, padded ({name})"] = (
            (got[padding] - expected[padding]).abs().max().item()
        )
        steps, _ = decode(built, [PROMPT] + [1] * (T - PROMPT), True, absorb, fast_path)
        found[f"cached decoding, padded ({name})"] = max(
            (got[real] - expected[real]).abs().max().item()
            for got, expected, real in steps
        )
    return found
