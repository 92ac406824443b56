"""LatentAttention, built by ``from_hf_config``, against transformers' ``DeepseekV3Attention``.

A tiny random DeepSeek-V3 config from transformers' own config class (YaRN angles with DeepSeek's
mscale, interleaved rotary pairs), eager attention, float32, ``atol = rtol = 1e-5``; nothing is
downloaded (HF_HUB_OFFLINE=1). The reference gets its rotary tables from the model's rotary class,
its mask from transformers' masking utilities and its cache of latents from ``DynamicCache``. Each
case runs on the four paths: plain and absorbed, explicit and fast; with and without the query's
own bottleneck (``q_lora_rank``).
"""

from __future__ import annotations

import os
import pathlib

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported

import pytest  # noqa: E402
import torch  # noqa: E402

from llm_attention.latent import LatentAttention, from_hf_state_dict  # noqa: E402
from llm_attention.rope_scaling import rope_frequencies  # noqa: E402
from llm_attention_site.latent_parity import (  # noqa: E402
    B, PATHS, PROMPT, Q_LORA, T, build, decode, hf, inputs, path_name,
    reference_forward, set_path,
)

pytestmark = pytest.mark.xdist_group(  # the worker that has transformers imported already
    (pathlib.Path(__file__).resolve().parents[1] / "docs" / "modern" / "combined.md").as_posix()
)

TOL = dict(atol=1e-5, rtol=1e-5)
PATH_IDS = [path_name(*p).replace(", ", "-") for p in PATHS]


@pytest.fixture(params=list(Q_LORA.values()), ids=list(Q_LORA))
def built(request):
    pytest.importorskip("transformers")
    return build(request.param)


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize("path", PATHS, ids=PATH_IDS)
def test_prefill_matches(built, padded, path):
    config, *_, ours = built
    x, padding = inputs(config, 2, padded)
    with torch.no_grad():
        expected = reference_forward(built, x, padding.long())
        set_path(ours, *path)
        got = ours(x, padding if padded else None)
        set_path(ours, False, False)
    torch.testing.assert_close(got[padding], expected[padding], **TOL)


DECODE_STEPS = {"7+1+1+1+1+1": [PROMPT] + [1] * (T - PROMPT), "4+6+2": [4, 6, 2]}


@pytest.mark.parametrize("sizes", DECODE_STEPS.values(), ids=DECODE_STEPS)
@pytest.mark.parametrize("path", PATHS, ids=PATH_IDS)
def test_cached_decoding_matches(built, path, sizes):
    """Our LatentCache against transformers' cache of latents, a left-padded prompt."""
    config, *_, ours = built
    steps, cache = decode(built, sizes, True, *path)
    for got, expected, real in steps:
        torch.testing.assert_close(got[real], expected[real], **TOL)
    assert cache.length == T
    # the cache holds d_c + d_r numbers per token and nothing per head
    assert cache.entries.shape == (B, config.max_position_embeddings,
                                   config.kv_lora_rank + config.qk_rope_head_dim)


def test_scale_and_rope_tables_match_transformers(built):
    config, reference, rotary, ours = built
    assert ours.scale == pytest.approx(reference.scaling, rel=1e-12)
    assert ours.scale != pytest.approx((config.qk_nope_head_dim + config.qk_rope_head_dim) ** -0.5)
    rope = dict(config.rope_parameters)
    expected, factor = hf().modeling_deepseek_v3.ROPE_INIT_FUNCTIONS["yarn"](config)
    got, got_factor = rope_frequencies(config.qk_rope_head_dim, rope.pop("rope_theta"), **rope)
    torch.testing.assert_close(got, expected, **TOL)
    assert got_factor == pytest.approx(factor, rel=1e-12)
    torch.testing.assert_close(rotary.inv_freq, got, **TOL)


@pytest.mark.parametrize("change", ["rope_interleave", "scale", "latent_norm"])
def test_a_wrong_setting_is_caught(built, change):
    """Negative controls: each setting the parity relies on moves the output when wrong."""
    config, reference, _, ours = built
    overrides = {"rope_interleave": dict(rope_interleave=False), "scale": dict(scale=0.5),
                 "latent_norm": {}}[change]
    wrong = LatentAttention.from_hf_config(config, **overrides).eval()
    state = from_hf_state_dict(reference.state_dict())
    if change == "latent_norm":
        state["latent_norm.weight"] = torch.ones_like(state["latent_norm.weight"])
    wrong.load_state_dict(state)
    x, padding = inputs(config, 2, False)
    with torch.no_grad():
        gap = (wrong(x) - reference_forward(built, x, padding.long())).abs().max().item()
    assert gap > 1e-3, gap


@pytest.mark.parametrize("q_lora_rank", [24, None], ids=["q_lora_rank=24", "no q_lora_rank"])
def test_a_config_json_dict_turns_the_pairs_as_transformers_does(q_lora_rank):
    """DeepSeek-V3's config.json has no rope_interleave field (transformers' to_dict()
    always writes one, so the layers built from config objects never miss it). Read as a
    plain dict, it must give the layer transformers' default: neighbouring pairs."""
    t = hf()
    values = dict(  # a config.json as published, in miniature
        model_type="deepseek_v3", hidden_size=32, num_attention_heads=4,
        num_key_value_heads=4, q_lora_rank=q_lora_rank, kv_lora_rank=16,
        qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6, num_hidden_layers=1,
        max_position_embeddings=64, rope_theta=10000.0, rms_norm_eps=1e-6,
        attention_bias=False,
        rope_scaling={"type": "yarn", "factor": 4.0, "beta_fast": 32, "beta_slow": 1,
                      "mscale": 1.0, "mscale_all_dim": 1.0,
                      "original_max_position_embeddings": 16},
    )
    assert "rope_interleave" not in values
    config = t.DeepseekV3Config(**{k: v for k, v in values.items() if k != "model_type"},
                                attn_implementation="eager")
    assert config.rope_interleave is True  # transformers' default
    torch.manual_seed(0)
    reference = t.modeling_deepseek_v3.DeepseekV3Attention(config, layer_idx=0).eval()
    with torch.no_grad():
        for name, p in reference.named_parameters():
            p.uniform_(0.5, 1.5) if "layernorm" in name else p.normal_(0.0, 0.2)
    ours = LatentAttention.from_hf_config(values).eval()  # the plain dict
    ours.load_state_dict(from_hf_state_dict(reference.state_dict()))
    rotary = t.modeling_deepseek_v3.DeepseekV3RotaryEmbedding(config)
    x, padding = inputs(config, 2, False)
    with torch.no_grad():
        expected = reference_forward((config, reference, rotary, ours), x, padding.long())
        torch.testing.assert_close(ours(x), expected, **TOL)
