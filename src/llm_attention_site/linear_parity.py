# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""GatedDeltaNet and KimiDeltaAttention beside transformers' linear-attention layers.

Tiny random configs built from transformers' own config classes (float32; nothing
downloaded): ``Qwen3NextGatedDeltaNet``, ``Qwen3_5GatedDeltaNet`` and
``KimiLinearDeltaAttention``, which run their pure-torch paths here (no kernel package
is installed: transformers falls back to torch). ``build(family)`` makes the reference
layer with random weights drawn wide enough to matter and ours with ``from_hf_config``,
its weights loaded by ``from_hf_state_dict``; ours reads chunks of ``CHUNK`` tokens, so
that a prompt spans several chunks and ends in a short one, while transformers reads
chunks of 64. ``decode`` feeds both, each with its own cache (transformers'
``DynamicCache`` of the hybrid model), a few tokens per call. The tests
(``tests/test_linear_reference.py``) assert on these; the page prints
``max_differences``. Not a model module: it needs transformers.
"""

from __future__ import annotations

import functools
import os
from types import SimpleNamespace

import torch

from llm_attention.linear_attention import (
    GatedDeltaNet, KimiDeltaAttention, from_hf_state_dict,
)

# The families' batch, lengths and left-padded inputs (B and T are read by the tests)
from .family_parity import B, PROMPT, T, inputs  # noqa: F401

CHUNK = 5  # ours: 12 tokens are chunks of 5, 5 and 2
FAMILIES = ("qwen3_next", "qwen3_5", "kimi_linear")
LABELS = {"qwen3_next": "Qwen3NextGatedDeltaNet", "qwen3_5": "Qwen3_5GatedDeltaNet",
          "kimi_linear": "KimiLinearDeltaAttention"}
QWEN_SIZES = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                  head_dim=16, num_hidden_layers=4, linear_num_key_heads=2,
                  linear_num_value_heads=4, linear_key_head_dim=8,
                  linear_value_head_dim=6)
KIMI_SIZES = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=4,
                  num_hidden_layers=4, linear_num_heads=4, linear_head_dim=8,
                  kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4,
                  v_head_dim=6, pad_token_id=None, bos_token_id=None,
                  eos_token_id=None)
# The prompt and calls of cached decoding: one token at a time, and chunks
DECODE_STEPS = {"7+1+1+1+1+1": [PROMPT] + [1] * (T - PROMPT), "4+6+2": [4, 6, 2]}


@functools.cache
def hf() -> SimpleNamespace:
    """The parts of transformers used here, imported once, offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import DynamicCache, KimiLinearConfig, Qwen3NextConfig
    from transformers.models.kimi_linear import modeling_kimi_linear
    from transformers.models.qwen3_5 import modeling_qwen3_5
    from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig
    from transformers.models.qwen3_next import modeling_qwen3_next

    return SimpleNamespace(**locals())


def config(family: str):
    """A tiny config of ``family`` from transformers' config class."""
    t = hf()
    if family == "qwen3_next":
        return t.Qwen3NextConfig(**QWEN_SIZES)
    if family == "qwen3_5":
        return t.Qwen3_5TextConfig(**QWEN_SIZES)
    return t.KimiLinearConfig(**KIMI_SIZES)


def reference_class(family: str):
    t = hf()
    return {
        "qwen3_next": t.modeling_qwen3_next.Qwen3NextGatedDeltaNet,
        "qwen3_5": t.modeling_qwen3_5.Qwen3_5GatedDeltaNet,
        "kimi_linear": t.modeling_kimi_linear.KimiLinearDeltaAttention,
    }[family]


def randomize(module: torch.nn.Module) -> None:
    """Weights away from their starting values, so that every part weighs in: norms
    around 1, decays of every speed, projections wide."""
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            if "norm" in name:
                parameter.uniform_(0.5, 1.5)
            elif name.endswith("A_log"):
                parameter.uniform_(-2.0, 1.0)
            elif name.endswith("dt_bias"):
                parameter.normal_(0.0, 1.0)
            else:
                parameter.normal_(0.0, 0.3)


@functools.cache
def build(family: str):
    """(config, reference layer, our layer), in eval mode, with the same weights."""
    cfg = config(family)
    torch.manual_seed(0)
    reference = reference_class(family)(cfg, 0).eval()
    randomize(reference)
    cls = KimiDeltaAttention if family == "kimi_linear" else GatedDeltaNet
    ours = cls.from_hf_config(cfg, 0, chunk_size=CHUNK).eval()
    ours.load_state_dict(from_hf_state_dict(reference.state_dict(),
                                            num_key_heads=ours.num_key_heads))
    return cfg, reference, ours


def reference_forward(built, x, padding=None, cache=None):
    """The reference layer on ``x`` ``(B, T, d)``, as its decoder layer calls it:
    the 2D padding mask of the new tokens (none for a single token), its cache."""
    _, reference, _ = built
    mask = None if padding is None or x.shape[1] == 1 else padding.long()
    return reference(x, cache_params=cache, attention_mask=mask)


def decode(built, sizes, padded, seed=3):
    """Ours (a ``DeltaStateCache``) and the reference (transformers' cache), fed
    ``sizes`` tokens per call: a list of (ours, expected, real tokens) per call, our
    cache and theirs."""
    cfg, _, ours = built
    x, padding = inputs(cfg, seed, padded)
    hf_cache, our_cache = hf().DynamicCache(config=cfg), ours.make_cache(B)
    ends = torch.tensor(sizes).cumsum(0).tolist()
    steps = []
    with torch.no_grad():
        for start, end in zip([0, *ends[:-1]], ends):
            new = padding[:, start:end]
            expected = reference_forward(built, x[:, start:end], new, hf_cache)
            got = ours(x[:, start:end], new if padded else None, cache=our_cache)
            steps.append((got, expected, new))
    return steps, our_cache, hf_cache


def gap(got, expected, real) -> float:
    return (got[real] - expected[real]).abs().max().item()


def max_differences(family: str) -> dict[str, float]:
    """The largest |ours - transformers| at real tokens, per case: prefill of a
    left-padded batch (its first row has no padding) in each form; cached decoding of
    it, one token at a time and chunk by chunk."""
    built = build(family)
    cfg, _, ours = built
    found = {}
    x, padding = inputs(cfg, 2, True)
    with torch.no_grad():
        expected = reference_forward(built, x, padding)
        for form in ("chunked", "recurrent"):
            ours.form = form
            found[f"prefill, left-padded ({form})"] = gap(ours(x, padding), expected,
                                                          padding)
    ours.form = "chunked"
    for label, sizes in DECODE_STEPS.items():
        steps, *_ = decode(built, sizes, True)
        found[f"cached decoding, padded, {label}"] = max(gap(*s) for s in steps)
    return found
