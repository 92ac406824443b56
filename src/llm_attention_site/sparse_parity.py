# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""SparseLatentAttention beside transformers' ``DeepseekV32Attention`` (with its
``DeepseekV32Indexer``).

A tiny random DeepSeek-V3.2 config from transformers' own config class (eager
attention, float32, YaRN angles with DeepSeek's ``mscale``; nothing downloaded), with
``index_topk`` = 4 of the 12 tokens, so that the selection decides what each query
sees. ``build()`` makes the reference layer with random weights and ours with
``SparseLatentAttention.from_hf_config``, the weights loaded by ``from_hf_state_dict``;
``reference_forward`` runs the reference as its model does (rotary tables from the
model's rotary class, the mask from transformers' masking utilities, its own cache of
latents and indexer keys). The tests (``tests/test_sparse_latent_reference.py``) assert
on these; the page prints ``max_differences``. Not a model module: it needs
transformers.

Padded query rows (left padding) are compared nowhere: the reference's mask holds the
float minimum at every key of such a row, so its softmax spreads evenly over every key
of the sequence, future ones included, whatever its top-k picked; ours returns zeros
(``padded_rows`` measures both).
"""

from __future__ import annotations

import functools
import os
from types import SimpleNamespace

import torch

from llm_attention.latent import LatentAttention
from llm_attention.sparse_latent import SparseLatentAttention, from_hf_state_dict

# The families' batch, lengths and left-padded inputs (B and T are read by the tests)
from .family_parity import B, PROMPT, T, inputs  # noqa: F401

TOP_K = 4
TINY = dict(
    hidden_size=32,
    num_attention_heads=4,
    num_key_value_heads=4,
    q_lora_rank=24,
    kv_lora_rank=16,
    qk_nope_head_dim=8,
    qk_rope_head_dim=4,
    v_head_dim=6,
    index_n_heads=4,
    index_head_dim=8,
    index_topk=TOP_K,
    num_hidden_layers=1,
    max_position_embeddings=64,
    rope_parameters=dict(
        rope_type="yarn", rope_theta=10000.0, factor=4.0, beta_fast=32.0,
        beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0,
        original_max_position_embeddings=16,
    ),
    attn_implementation="eager",
)
# (gathered, absorb, fast_path): the masked form on the four latent paths, the gathered
# form (always in latent space) on both kernels
FORMS = [
    (False, False, False), (False, False, True), (False, True, False),
    (False, True, True), (True, False, False), (True, False, True),
]
DECODE_STEPS = {"7+1+1+1+1+1": [PROMPT] + [1] * (T - PROMPT), "4+6+2": [4, 6, 2]}


def form_name(gathered: bool, absorb: bool, fast_path: bool) -> str:
    kernel = "fast" if fast_path else "explicit"
    if gathered:
        return f"gathered, {kernel}"
    return f"masked, {'absorbed' if absorb else 'plain'}, {kernel}"


@functools.cache
def hf() -> SimpleNamespace:
    """The parts of transformers used here, imported once, offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import DeepseekV32Config, DynamicCache
    from transformers.masking_utils import create_causal_mask
    from transformers.models.deepseek_v32 import modeling_deepseek_v32

    return SimpleNamespace(**locals())


@functools.cache
def build(tied: bool = False):
    """(config, reference layer, its rotary module, our layer), in eval mode, with the
    same random weights. ``tied``: the indexer's head weights are all zero, so every
    score is 0 and the choice among keys is torch.topk's tie-breaking alone."""
    t = hf()
    config = t.DeepseekV32Config(**TINY)
    torch.manual_seed(0)
    reference = t.modeling_deepseek_v32.DeepseekV32Attention(config, layer_idx=0)
    reference.eval()
    with torch.no_grad():
        for name, p in reference.named_parameters():
            if "layernorm" in name or name.endswith("k_norm.weight"):
                p.uniform_(0.5, 1.5)  # norms start at 1: move them off it
            else:
                p.normal_(0.0, 0.2)
        if tied:
            reference.indexer.weights_proj.weight.zero_()
    ours = SparseLatentAttention.from_hf_config(config).eval()
    ours.load_state_dict(from_hf_state_dict(reference.state_dict()))
    rotary = t.modeling_deepseek_v32.DeepseekV32RotaryEmbedding(config)
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


def set_form(ours, gathered=False, absorb=False, fast_path=False):
    ours.gathered, ours.absorb, ours.fast_path = gathered, absorb, fast_path


def prefill(built, padded, form, seed=2):
    """(ours, expected, real tokens) for a whole prompt at once."""
    config, *_, ours = built
    x, padding = inputs(config, seed, padded)
    set_form(ours, *form)
    with torch.no_grad():
        expected = reference_forward(built, x, padding.long())
        got = ours(x, padding if padded else None)
    set_form(ours)
    return got, expected, padding


def decode(built, sizes, padded, form, seed=3):
    """Ours (with a SparseLatentCache) and the reference (with transformers' cache),
    fed ``sizes`` tokens per call: a list of (ours, expected, real tokens) per call, and
    our cache."""
    config, *_, ours = built
    x, padding = inputs(config, seed, padded)
    set_form(ours, *form)
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
    set_form(ours)
    return steps, our_cache


def largest_gap(pairs) -> float:
    """The largest |ours - expected| at real tokens over (ours, expected, real)."""
    return max((got[real] - want[real]).abs().max().item() for got, want, real in pairs)


def max_differences(tied: bool = False) -> dict[str, dict[str, float]]:
    """Per form: the largest |ours - transformers| at real tokens in prefill and in
    cached decoding (a prompt, then one token at a time), each unpadded and
    left-padded."""
    built = build(tied)
    found = {}
    for form in FORMS:
        gaps = {}
        for padded in (False, True):
            gaps["prefill" + ", padded" * padded] = largest_gap(
                [prefill(built, padded, form)])
        for padded in (False, True):
            steps, _ = decode(built, DECODE_STEPS["7+1+1+1+1+1"], padded, form)
            gaps["decoding" + ", padded" * padded] = largest_gap(steps)
        found[form_name(*form)] = gaps
    return found


def padded_rows(seed: int = 2) -> tuple[float, float]:
    """At the query rows of left padding, which no real token reads: how far the
    reference's outputs differ from row to row within a sequence (0 when its softmax
    is spread over the same keys on every such row, every key of the sequence), and
    the largest |ours| there."""
    built = build()
    config, *_, ours = built
    x, padding = inputs(config, seed, True)
    with torch.no_grad():
        expected = reference_forward(built, x, padding.long())  # (B, T, d)
        got = ours(x, padding)  # (B, T, d)
    spread = 0.0
    for rows, pad in zip(expected, padding):  # (T, d), (T,)
        if (~pad).sum() > 1:
            spread = max(spread, (rows[~pad] - rows[~pad][0]).abs().max().item())
    return spread, got[~padding].abs().max().item()


def dense_gap(seed: int = 2) -> float:
    """How far plain latent attention over every earlier token (the same weights, the
    indexer ignored) lands from the reference at real tokens: the selection at work."""
    built = build()
    config, *_, ours = built
    x, padding = inputs(config, seed, True)
    with torch.no_grad():
        expected = reference_forward(built, x, padding.long())
        dense = LatentAttention.forward(ours, x, padding)  # (B, T, d): no selection
    return (dense[padding] - expected[padding]).abs().max().item()


def selection_margin(seed: int = 2) -> float:
    """The smallest gap, over real query rows that see more than ``index_topk`` keys,
    between the k-th and the (k+1)-th largest index score: a selection decided by a
    margin, not by rounding."""
    from llm_attention.grouped_query import attention_mask

    built = build()
    config, *_, ours = built
    x, padding = inputs(config, seed, True)
    with torch.no_grad():
        query_latent = ours.query_norm(ours.W_query_down(x))
        cos, sin = ours.rope.cos, ours.rope.sin
        keys = ours.indexer.keys(x, cos, sin, 0)
        scores = ours.indexer.scores(x, query_latent, keys, cos, sin, 0)  # (B, T, T)
    hidden = attention_mask(0, T, 0, T, key_padding=padding).squeeze(1)  # (B, T, T)
    ranked = scores.masked_fill(hidden, -torch.inf).sort(dim=-1, descending=True).values
    seen = (~hidden).sum(-1)  # (B, T): keys each query may see
    rows = padding & (seen > TOP_K)
    gaps = ranked[..., TOP_K - 1] - ranked[..., TOP_K]  # (B, T)
    return gaps[rows].min().item()
