"""ModernAttention, built by ``from_hf_config``, against the attention layers of the 2026 open
families in transformers: Llama 3.1 (``llama3`` scaled angles), Gemma 2, Gemma 3, gpt-oss and
Qwen3-Next, each a windowed and a full layer where the family has both.

Small random configs built from transformers' own config classes, eager attention, float32,
``atol = rtol = 1e-5``; nothing is downloaded (HF_HUB_OFFLINE=1). Each reference layer gets its
rotary tables from its model's rotary class and its mask from transformers' masking utilities,
exactly as inside the model. The cases: prefill with and without left padding, on the explicit
path and on the fast path where the fused kernel can express the layer; cached decoding (a prompt,
then single tokens, and chunks longer than the window) against transformers' DynamicCache.
"""

from __future__ import annotations

import functools
import os
import pathlib
from types import SimpleNamespace

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported

import pytest  # noqa: E402
import torch  # noqa: E402

from llm_attention.modern import ModernAttention, from_hf_state_dict  # noqa: E402
from llm_attention.rope_scaling import rope_frequencies  # noqa: E402

pytestmark = pytest.mark.xdist_group(  # the worker that has transformers imported already
    (pathlib.Path(__file__).resolve().parents[1] / "docs" / "modern" / "combined.md").as_posix()
)

TOL = dict(atol=1e-5, rtol=1e-5)
B, T, PROMPT, WINDOW = 3, 12, 7, 5
SMALL = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
             max_position_embeddings=64, attn_implementation="eager")


@functools.cache
def hf() -> SimpleNamespace:
    pytest.importorskip("transformers")
    from transformers import (DynamicCache, Gemma2Config, Gemma3TextConfig, GptOssConfig,
                              LlamaConfig, Qwen3NextConfig)
    from transformers.masking_utils import create_causal_mask, create_sliding_window_causal_mask
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.gemma2 import modeling_gemma2
    from transformers.models.gemma3 import modeling_gemma3
    from transformers.models.gpt_oss import modeling_gpt_oss
    from transformers.models.llama import modeling_llama
    from transformers.models.qwen3_next import modeling_qwen3_next

    return SimpleNamespace(**locals())


LLAMA31_ROPE = dict(rope_type="llama3", rope_theta=10000.0, factor=8.0, low_freq_factor=1.0,
                    high_freq_factor=4.0, original_max_position_embeddings=16)
YARN_ROPE = dict(rope_type="yarn", rope_theta=150000.0, factor=4.0, beta_fast=32.0,
                 beta_slow=1.0, truncate=False, original_max_position_embeddings=16)


def configs() -> dict:
    """Family -> (config, attention class, rotary class, the layers tested)."""
    t = hf()
    return {
        "llama3.1": (t.LlamaConfig(**SMALL, rope_parameters=LLAMA31_ROPE, attention_bias=True),
                     t.modeling_llama.LlamaAttention, t.modeling_llama.LlamaRotaryEmbedding, [0]),
        "gemma2": (t.Gemma2Config(**SMALL, num_hidden_layers=2, sliding_window=WINDOW,
                                  query_pre_attn_scalar=24, attn_logit_softcapping=2.0),
                   t.modeling_gemma2.Gemma2Attention, t.modeling_gemma2.Gemma2RotaryEmbedding,
                   [0, 1]),
        "gemma3": (t.Gemma3TextConfig(**SMALL, num_hidden_layers=6, sliding_window=WINDOW,
                                      query_pre_attn_scalar=24),
                   t.modeling_gemma3.Gemma3Attention, t.modeling_gemma3.Gemma3RotaryEmbedding,
                   [0, 5]),
        "gpt-oss": (t.GptOssConfig(**SMALL, num_hidden_layers=2, sliding_window=WINDOW,
                                   rope_parameters=YARN_ROPE),
                    t.modeling_gpt_oss.GptOssAttention, t.modeling_gpt_oss.GptOssRotaryEmbedding,
                    [0, 1]),
        "qwen3-next": (t.Qwen3NextConfig(**SMALL, num_hidden_layers=4),
                       t.modeling_qwen3_next.Qwen3NextAttention,
                       t.modeling_qwen3_next.Qwen3NextRotaryEmbedding, [3]),
    }


LAYERS = [
    ("llama3.1", 0), ("gemma2", 0), ("gemma2", 1), ("gemma3", 0), ("gemma3", 5),
    ("gpt-oss", 0), ("gpt-oss", 1), ("qwen3-next", 3),
]


@functools.cache
def build(family: str, layer_idx: int):
    """(config, reference layer, its rotary module, layer type, our layer)."""
    config, attention_class, rotary_class, _ = configs()[family]
    torch.manual_seed(layer_idx)
    reference = attention_class(config, layer_idx=layer_idx).eval()
    with torch.no_grad():
        for name, p in reference.named_parameters():
            p.normal_(0.0, 1.0 if name == "sinks" else 0.2)
    ours = ModernAttention.from_hf_config(config, layer_idx).eval()
    ours.load_state_dict(from_hf_state_dict(reference.state_dict()))
    kind = config.layer_types[layer_idx] if getattr(config, "layer_types", None) else None
    return config, reference, rotary_class(config), kind, ours


@pytest.fixture(params=LAYERS, ids=[f"{f}-layer{i}" for f, i in LAYERS])
def layer(request):
    return request.param, build(*request.param)


def reference_forward(built, x, attention_mask, cache=None, start=0):
    config, reference, rotary, kind, _ = built
    positions = torch.arange(start, start + x.shape[1])[None].expand(x.shape[0], -1)
    make_mask = (hf().create_sliding_window_causal_mask if kind == "sliding_attention"
                 else hf().create_causal_mask)
    mask = make_mask(config=config, inputs_embeds=x, attention_mask=attention_mask,
                     past_key_values=cache, position_ids=positions)
    per_kind = isinstance(getattr(rotary, "rope_type", None), dict)  # Gemma 3: one per kind
    cos_sin = rotary(x, positions, kind) if per_kind else rotary(x, positions)
    out, _ = reference(x, position_embeddings=cos_sin, attention_mask=mask,
                       past_key_values=cache)
    return out


def inputs(config, seed, padded):
    x = torch.randn(B, T, config.hidden_size, generator=torch.Generator().manual_seed(seed))
    padding = torch.ones(B, T, dtype=torch.bool)
    if padded:
        padding[1, :4] = False
        padding[2, : PROMPT - 1] = False
    return x, padding


def paths(ours):
    """The explicit path, and the fast one where the kernel can express the layer."""
    return [False] if ours.softcap is not None or ours.sinks is not None else [False, True]


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
def test_prefill_matches(layer, padded):
    (family, _), built = layer
    config, *_, ours = built
    x, padding = inputs(config, 2, padded)
    with torch.no_grad():
        expected = reference_forward(built, x, padding.long())
        for fast_path in paths(ours):
            ours.fast_path = fast_path
            got = ours(x, padding if padded else None)
            torch.testing.assert_close(got[padding], expected[padding], **TOL,
                                       msg=lambda m: f"fast_path={fast_path}: {m}")
    ours.fast_path = False


DECODE_STEPS = {"7+1+1+1+1+1": [PROMPT] + [1] * (T - PROMPT), "4+6+2": [4, 6, 2]}


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize("sizes", DECODE_STEPS.values(), ids=DECODE_STEPS)
def test_cached_decoding_matches(layer, padded, sizes):
    """Our KVCache, or RollingKVCache on a windowed layer, against DynamicCache."""
    (family, layer_idx), built = layer
    config, *_, kind, ours = built
    x, padding = inputs(config, 3, padded)
    ends = torch.tensor(sizes).cumsum(0).tolist()
    for fast_path in paths(ours):
        ours.fast_path = fast_path
        hf_cache, our_cache = hf().DynamicCache(config=config), ours.make_cache(B)
        with torch.no_grad():
            for start, end in zip([0, *ends[:-1]], ends):
                expected = reference_forward(
                    built, x[:, start:end], padding[:, :end].long(), hf_cache, start)
                got = ours(x[:, start:end], padding[:, start:end] if padded else None,
                           cache=our_cache)
                real = padding[:, start:end]
                torch.testing.assert_close(got[real], expected[real], **TOL)
        windowed = kind == "sliding_attention"
        assert our_cache.keys.shape[2] == (WINDOW if windowed else config.max_position_embeddings)
    ours.fast_path = False


@pytest.mark.parametrize("family", ["llama3.1", "gpt-oss", "qwen3-next"])
def test_rope_tables_match_transformers_init(family):
    """Inverse frequencies and attention factor equal transformers' rope initialisation."""
    config, *_ = configs()[family]
    rope = dict(config.rope_parameters)
    rope_type = rope.pop("rope_type")
    init = (hf().ROPE_INIT_FUNCTIONS[rope_type] if rope_type != "default"
            else hf().modeling_qwen3_next.Qwen3NextRotaryEmbedding.compute_default_rope_parameters)
    expected, expected_factor = init(config)
    base = rope.pop("rope_theta")
    got, factor = rope_frequencies(config.head_dim, base, rope_type=rope_type, **rope)
    torch.testing.assert_close(got, expected, **TOL)
    assert factor == pytest.approx(expected_factor, rel=1e-12)
    if family == "qwen3-next":  # a quarter of the 16 dimensions turn: 2 pairs
        assert got.shape == (config.head_dim * config.rope_parameters["partial_rotary_factor"] // 2,)
    if family == "gpt-oss":
        assert factor > 1  # YaRN sharpens the scores
