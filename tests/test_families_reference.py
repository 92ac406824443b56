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

import os
import pathlib

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported

import pytest  # noqa: E402
import torch  # noqa: E402

from llm_attention.rope_scaling import rope_frequencies  # noqa: E402
from llm_attention_site.family_parity import (  # noqa: E402
    B, LAYERS, PROMPT, T, WINDOW, build, configs, decode, hf, inputs, max_differences, paths,
    reference_forward,
)

pytestmark = pytest.mark.xdist_group(  # the worker that has transformers imported already
    (pathlib.Path(__file__).resolve().parents[1] / "docs" / "modern" / "combined.md").as_posix()
)

TOL = dict(atol=1e-5, rtol=1e-5)
LAYER_CASES = [(family, i) for family, layers in LAYERS.items() for i in layers]


@pytest.fixture(params=LAYER_CASES, ids=[f"{f}-layer{i}" for f, i in LAYER_CASES])
def layer(request):
    pytest.importorskip("transformers")
    return request.param, build(*request.param)


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
    """Our KVCache, or RollingKVCache on a windowed layer, against DynamicCache; chunks of
    6 are longer than the window of 5."""
    _, built = layer
    config, *_, kind, ours = built
    for fast_path in paths(ours):
        steps, our_cache = decode(built, sizes, padded, fast_path)
        for got, expected, real in steps:
            torch.testing.assert_close(got[real], expected[real], **TOL)
        windowed = kind == "sliding_attention"
        assert our_cache.keys.shape[2] == (WINDOW if windowed else config.max_position_embeddings)
        assert our_cache.length == T


def test_the_pages_differences_are_those_of_the_tests():
    """The pages print max_differences: every case within the tolerance, both paths
    where the kernel can express the layer, one where it cannot."""
    found = {(f, i): max_differences(f, i) for f, i in LAYER_CASES}
    assert all(d <= 1e-5 for cases in found.values() for d in cases.values()), found
    assert len(found[("llama3.1", 0)]) == 6 and len(found[("gpt-oss", 0)]) == 3


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


def _published_rope(values, layer_idx=0):
    """(ours, transformers') speeds and attention factor for a published config dict."""
    from llm_attention.hf_config import latent_attention_options, modern_attention_options
    from llm_attention_site.family_parity import published_config

    if values["model_type"] == "deepseek_v3":
        options = latent_attention_options(values, layer_idx)
        head_dim = options["qk_rope_head_dim"]
    else:
        options = modern_attention_options(values, layer_idx)
        head_dim = options["head_dim"]
    rope = options["rope_scaling"]
    got, got_factor = rope_frequencies(head_dim, options["rope_base"], **rope)
    expected, factor = hf().ROPE_INIT_FUNCTIONS[rope["rope_type"]](published_config(values))
    return got, got_factor, expected, factor


@pytest.mark.parametrize("name", ["Llama 3.1 8B", "gpt-oss-120b", "DeepSeek-V3"])
def test_stretched_speeds_equal_transformers_at_the_published_sizes(name):
    """At the published sizes every branch of the stretch is taken (pairs kept, between
    and divided); DeepSeek-V3 leaves YaRN's ``truncate`` at its default (True), so the
    ramp's bounds are rounded, outwards."""
    from llm_attention_site.families import DEEPSEEK_V3, PUBLISHED

    values = DEEPSEEK_V3[1] if name == "DeepSeek-V3" else PUBLISHED[name][1]
    got, got_factor, expected, factor = _published_rope(values)
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=0)
    assert got_factor == pytest.approx(factor, rel=1e-12)


def test_reading_a_published_config_leaves_it_unchanged():
    """transformers adds rope_theta to the rope_scaling dict it is given; the published
    dict that pages and other tests read must not change with it."""
    import copy

    from llm_attention_site.families import PUBLISHED
    from llm_attention_site.family_parity import published_config

    values = PUBLISHED["gpt-oss-120b"][1]
    before = copy.deepcopy(values)
    published_config(values)
    assert values == before


def test_yarn_attention_factor_with_mscale_and_mscale_all_dim_that_differ():
    """The factor is the ratio of two: mscale's on top, mscale_all_dim's below (every
    published config has them equal, which hides a swap)."""
    from llm_attention_site.families import DEEPSEEK_V3

    values = dict(DEEPSEEK_V3[1])
    values["rope_scaling"] = {**values["rope_scaling"], "mscale": 0.707, "mscale_all_dim": 1.0}
    got, got_factor, expected, factor = _published_rope(values)
    assert factor == pytest.approx((0.0707 * torch.log(torch.tensor(40.0)).item() + 1)
                                   / (0.1 * torch.log(torch.tensor(40.0)).item() + 1))
    assert got_factor == pytest.approx(factor, rel=1e-12) and factor < 0.95
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=0)


QWEN_WINDOWS = {  # the fields of a config.json beside use_sliding_window=True
    "window from layer 2": dict(max_window_layers=2, sliding_window=8),
    "window from layer 0": dict(max_window_layers=0, sliding_window=8),
    "window from layer 3": dict(max_window_layers=3, sliding_window=8),
    "max_window_layers absent": dict(sliding_window=8),
    "no window size": dict(max_window_layers=1, sliding_window=None),
}


@pytest.mark.parametrize("family", ["qwen2", "qwen3"])
@pytest.mark.parametrize("fields", QWEN_WINDOWS.values(), ids=list(QWEN_WINDOWS))
def test_qwen_layer_kinds_are_transformers_layer_types(family, fields):
    """A Qwen config.json with use_sliding_window (read as a plain dict, which has no
    layer_types) gives each layer the kind transformers' config class gives it."""
    from transformers import Qwen2Config, Qwen3Config

    from llm_attention.hf_config import layer_type

    values = dict(model_type=family, num_hidden_layers=4, hidden_size=32,
                  num_attention_heads=4, use_sliding_window=True, **fields)
    config_class = {"qwen2": Qwen2Config, "qwen3": Qwen3Config}[family]
    expected = config_class(**{k: v for k, v in values.items() if k != "model_type"})
    assert [layer_type(values, i) for i in range(4)] == expected.layer_types
