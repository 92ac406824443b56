"""``ModernAttention.from_hf_config`` and ``rope_scaling``: published configs read layer by layer,
the same layer from a config object and from its JSON, and a clear refusal of everything the
module does not implement. No transformers needed: the parity with transformers' own layers is
in test_families_reference.py."""

from __future__ import annotations

import json

import pytest
import torch

from llm_attention.hf_config import kv_source_layer, layer_type, modern_attention_options
from llm_attention.modern import ModernAttention
from llm_attention.rope_scaling import rope_frequencies, rotary_dim
from llm_attention_site.families import PUBLISHED
from llm_attention_site.family_rows import family_row


def options(name: str, layer_idx: int) -> dict:
    return modern_attention_options(PUBLISHED[name][1], layer_idx)


def test_llama31_reads_its_scaled_angles():
    o = options("Llama 3.1 405B", 125)
    assert (o["num_heads"], o["num_kv_heads"], o["head_dim"]) == (128, 8, 128)
    assert o["rope_base"] == 500000.0 and o["rope_scaling"]["rope_type"] == "llama3"
    assert o.get("window") is None


def test_gemma3_layers_have_their_own_window_and_base():
    local, full = options("Gemma 3 27B", 0), options("Gemma 3 27B", 5)
    assert (local["window"], local["rope_base"], local["rope_scaling"]) == (1024, 10000.0, None)
    assert full.get("window") is None and full["rope_base"] == 1000000.0
    assert full["rope_scaling"] == {"rope_type": "linear", "factor": 8.0}
    assert local["scale"] == pytest.approx(168**-0.5) and local["norm_unit_offset"]
    kinds = [options("Gemma 3 27B", i).get("window") is None for i in range(12)]
    assert kinds == [False] * 5 + [True] + [False] * 5 + [True]  # five local, one global


def test_gemma2_and_gpt_oss_alternate():
    for name, window in (("Gemma 2 9B", 4096), ("gpt-oss-120b", 128)):
        assert [options(name, i).get("window") for i in range(4)] == [window, None] * 2
    assert options("Gemma 2 9B", 1)["softcap"] == 50.0
    oss = options("gpt-oss-120b", 1)
    assert oss["sinks"] and oss["qkv_bias"] and oss["out_bias"]
    assert oss["rope_scaling"]["rope_type"] == "yarn"


def test_own_score_scale_means_one_that_differs_from_the_head_width():
    """Gemma 2 9B sets query_pre_attn_scalar = 256 = its head width: the default scale, not
    an idea of its own; Gemma 3 27B's 168 with heads of 128 is one."""
    gemma2 = options("Gemma 2 9B", 0)
    assert gemma2["scale"] == 256**-0.5 == gemma2["head_dim"] ** -0.5
    assert "own score scale" not in family_row("Gemma 2 9B")["ideas"]
    assert "own score scale" in family_row("Gemma 3 27B")["ideas"]


def test_qwen3_next_attention_layers_only():
    gated = options("Qwen3-Next 80B-A3B", 3)
    assert gated["output_gate"] and gated["partial_rotary_factor"] == 0.25
    with pytest.raises(ValueError, match="layer 0 of 'qwen3_next' is a 'linear_attention' layer"):
        options("Qwen3-Next 80B-A3B", 0)
    assert family_row("Qwen3-Next 80B-A3B")["attention_layers"] == 12  # 48 / 4


def test_llama4_chunks_three_layers_and_drops_positions_on_the_fourth():
    chunked, full = options("Llama 4 Scout", 0), options("Llama 4 Scout", 3)
    assert chunked["chunk_size"] == 8192 and not chunked.get("nope")
    assert chunked["qk_norm"] and chunked["qk_norm_weight"] is False
    assert chunked["rope_interleave"] and chunked["rope_scaling"]["rope_type"] == "llama3"
    assert full["nope"] and full["temperature_tuning"] == (8192, 0.1)
    assert "chunk_size" not in full and not full.get("qk_norm")
    assert [bool(options("Llama 4 Scout", i).get("nope")) for i in range(8)] == [
        False, False, False, True] * 2


def test_smollm3_every_fourth_layer_has_no_positions():
    flags = [options("SmolLM3 3B", i).get("nope") for i in range(36)]
    assert flags == [False, False, False, True] * 9
    assert options("SmolLM3 3B", 3).get("window") is None  # no window in the 3B


def test_gemma4_global_layers_are_wider_and_use_keys_as_values():
    local, full = options("Gemma 4 31B", 0), options("Gemma 4 31B", 5)
    assert (local["num_kv_heads"], local["head_dim"], local["window"]) == (16, 256, 1024)
    assert (full["num_kv_heads"], full["head_dim"]) == (4, 512) and "window" not in full
    assert full["values_from_keys"] and not local["values_from_keys"]
    assert full["rope_scaling"] == {"rope_type": "proportional"}
    assert full["partial_rotary_factor"] == 0.25 and full["rope_base"] == 1e6
    for o in (local, full):
        assert o["scale"] == 1.0 and o["qk_norm"] and o["value_norm"]
        assert not o.get("norm_unit_offset") and not o["kv_shared"]


def test_gemma4_e2b_shares_the_keys_of_its_last_own_layers():
    config = PUBLISHED["Gemma 4 E2B"][1]
    sources = [kv_source_layer(config, i) for i in range(35)]
    assert sources[:15] == [None] * 15
    assert sources[15:] == [13, 13, 13, 13, 14] * 4  # the last windowed and full owner
    reader, owner = options("Gemma 4 E2B", 19), options("Gemma 4 E2B", 14)
    assert reader["kv_shared"] and not reader["value_norm"]
    assert (owner["num_kv_heads"], owner["head_dim"]) == (1, 512)  # no keys as values here
    assert not owner["values_from_keys"]
    assert family_row("Gemma 4 E2B")["sharing_layers"] == 20


def test_gemma4_last_layer_is_full_as_transformers_makes_it():
    """transformers turns a Gemma 4 config's last layer into a full one whatever its
    layer_types say; a config.json read here does the same."""
    text = dict(PUBLISHED["Gemma 4 31B"][1]["text_config"], num_hidden_layers=3,
                layer_types=["sliding_attention"] * 3)
    kinds = [layer_type(text, i) for i in range(3)]
    assert kinds == ["sliding_attention"] * 2 + ["full_attention"]


@pytest.mark.parametrize("name", list(PUBLISHED))
def test_every_published_layer_builds_a_small_module(name):
    """At a width of 64 (the published widths would take gigabytes), with every other option
    as published: each attention layer's options make a module that runs."""
    row = family_row(name)
    layer = next(i for i in range(row["layers"]) if row["attention_layers"] == row["layers"]
                 or i % 4 == 3)
    o = options(name, layer)
    heads, kv, head_dim = o["num_heads"], o["num_kv_heads"], o["head_dim"]
    scale_down = dict(d_in=64, d_out=64, context_length=16, num_heads=heads // kv * 2,
                      num_kv_heads=2, head_dim=16 if head_dim >= 16 else head_dim)
    module = ModernAttention.from_hf_config(PUBLISHED[name][1], layer, **scale_down)
    assert module(torch.randn(1, 5, 64)).shape == (1, 5, 64)


def test_config_object_and_its_json_build_the_same_layer():
    transformers = pytest.importorskip("transformers")
    config = transformers.GptOssConfig(hidden_size=32, num_attention_heads=4,
                                       num_key_value_heads=2, head_dim=8,
                                       num_hidden_layers=2, max_position_embeddings=32)
    from_object = modern_attention_options(config, 1)
    from_json = modern_attention_options(json.loads(config.to_json_string()), 1)
    assert from_object == from_json and from_object["sinks"]


def test_llama4_defaults_are_transformers_own():
    """A Llama 4 config.json silent on the temperature tuning, the QK-norm and its epsilon
    gets the values transformers' Llama4TextConfig fills in for the same file."""
    transformers = pytest.importorskip("transformers")
    published = PUBLISHED["Llama 4 Scout"][1]
    silent = ("floor_scale", "attn_scale", "attn_temperature_tuning", "use_qk_norm",
              "rms_norm_eps")
    text = {k: v for k, v in published["text_config"].items() if k not in silent}
    config = transformers.Llama4TextConfig(**text)
    chunked, full = (modern_attention_options({**published, "text_config": text}, i)
                     for i in (0, 3))
    assert full["nope"] and full["temperature_tuning"] == (config.floor_scale, config.attn_scale)
    assert config.attn_temperature_tuning and config.use_qk_norm  # so both must be on here
    assert chunked["qk_norm"] and chunked["norm_eps"] == config.rms_norm_eps
    for i in (0, 3):  # transformers' config object, with every default written out
        assert modern_attention_options(config, i) == modern_attention_options(text, i)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(model_type="deepseek_v3"), "model_type 'deepseek_v3' is not implemented"),
        (dict(rope_scaling={"rope_type": "longrope", "factor": 4.0}),
         "rope_type 'longrope' is not implemented"),
        (dict(rope_scaling={"rope_type": "llama3", "factor": 8.0}),
         "rope_type 'llama3' needs low_freq_factor, high_freq_factor, "
         "original_max_position_embeddings"),
        (dict(rope_scaling={"rope_type": "linear", "factor": 2.0, "short_factor": [1.0]}),
         "rope_type 'linear' has no parameter short_factor"),
        (dict(use_bidirectional_attention=True), "use_bidirectional_attention=True is not"),
        (dict(rope_theta=None), "gives no rope_theta"),
    ],
)
def test_refuses_what_it_does_not_implement(change, message):
    config = {**PUBLISHED["Llama 3.1 8B"][1], **change}
    with pytest.raises(ValueError, match=message):
        ModernAttention.from_hf_config(config, 0, context_length=16)


def test_refuses_what_the_new_families_do_not_implement():
    text = PUBLISHED["Llama 4 Scout"][1]["text_config"]
    with pytest.raises(ValueError, match="layer 0 of 'llama4_text' is chunked but the config "
                                         "gives no attention_chunk_size"):
        modern_attention_options({**text, "attention_chunk_size": None}, 0)
    gemma = PUBLISHED["Gemma 4 31B"][1]["text_config"]
    with pytest.raises(ValueError, match="use_bidirectional_attention='all' is not implemented"):
        modern_attention_options({**gemma, "use_bidirectional_attention": "all"}, 0)
    assert modern_attention_options({**gemma, "use_bidirectional_attention": "vision"}, 0)


def test_layer_index_and_config_type_errors():
    with pytest.raises(ValueError, match="layer_idx=32 is beyond the config's 32 layers"):
        modern_attention_options(PUBLISHED["Llama 3.1 8B"][1], 32)
    with pytest.raises(TypeError, match="config must be a transformers config or the dict"):
        modern_attention_options("config.json", 0)


def test_fast_path_is_refused_where_the_kernel_cannot_follow():
    with pytest.raises(ValueError, match="fast_path=True cannot express softcap"):
        ModernAttention(16, 16, 8, 0.0, 2, 1, softcap=5.0, fast_path=True)
    layer = ModernAttention(16, 16, 8, 0.0, 2, 1, sinks=True)
    layer.fast_path = True  # set after construction: refused at the call, not ignored
    with pytest.raises(ValueError, match="fast_path=True cannot express sinks"):
        layer(torch.randn(1, 3, 16))


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(softcap=0.0), ValueError, "softcap must be positive, got 0.0"),
        (dict(scale="0.1"), TypeError, "scale must be a float, got '0.1'"),
        (dict(sinks=1), TypeError, "sinks must be True or False, got 1"),
        (dict(norm_unit_offset=True), ValueError, "norm_unit_offset=True needs qk_norm=True"),
        (dict(rope_scaling="yarn"), ValueError, "rope_scaling must be None or a dict"),
        (dict(partial_rotary_factor=0.1), ValueError,
         r"even number >= 2 of dimensions to turn, got int\(8 \* 0.1\) = 0"),
        (dict(qk_norm_weight=False), ValueError, "qk_norm_weight=False needs qk_norm=True"),
        (dict(window=3, chunk_size=4), ValueError, "cannot both be set"),
        (dict(chunk_size=0), ValueError, "chunk_size must be at least 1, got 0"),
        (dict(temperature_tuning=(8192,)), ValueError,
         r"temperature_tuning must be None or \(floor_scale, attn_scale\)"),
        (dict(temperature_tuning=(8192, -0.1)), ValueError, "two positive numbers"),
        (dict(nope=1), TypeError, "nope must be True or False, got 1"),
        (dict(kv_shared=True, values_from_keys=True), ValueError,
         "value_norm, values_from_keys and chunk_size belong to that layer"),
        (dict(rope_scaling=dict(rope_type="proportional", factor=0.0)), ValueError,
         "factor must be a positive number"),
        (dict(rope_interleave=True, partial_rotary_factor=0.5), ValueError,
         "partial_rotary_factor=0.5 only part of it turns: not implemented"),
    ],
)
def test_option_errors(kwargs, error, message):
    with pytest.raises(error, match=message):
        ModernAttention(16, 16, 8, 0.0, 2, 1, **kwargs)


def test_llama3_keeps_fast_pairs_and_divides_slow_ones():
    plain, _ = rope_frequencies(128, 500000.0)
    scaled, factor = rope_frequencies(128, 500000.0, **LLAMA31)
    wavelength = 2 * torch.pi / plain
    fast, slow = wavelength < 8192 / 4, wavelength > 8192 / 1
    assert factor == 1.0 and fast.any() and slow.any() and (~fast & ~slow).any()
    torch.testing.assert_close(scaled[fast], plain[fast])
    torch.testing.assert_close(scaled[slow], plain[slow] / 8)
    between = ~fast & ~slow
    assert ((scaled[between] < plain[between]) & (scaled[between] > plain[between] / 8)).all()


LLAMA31 = dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
               original_max_position_embeddings=8192)


def test_llama3_with_equal_band_factors_switches_without_a_blend():
    """low_freq_factor == high_freq_factor (the bounds meet): every pair is kept or
    divided, none blended, and nothing divides by zero; a high bound below the low one
    is refused."""
    plain, _ = rope_frequencies(128, 500000.0)
    scaled, _ = rope_frequencies(128, 500000.0, **{**LLAMA31, "factor": 16.0,
                                                   "high_freq_factor": 1.0})
    slow = 2 * torch.pi / plain > 8192
    assert slow.any() and (~slow).any() and torch.isfinite(scaled).all()
    torch.testing.assert_close(scaled, torch.where(slow, plain / 16, plain))
    with pytest.raises(ValueError, match="high_freq_factor must be at least low_freq"):
        rope_frequencies(128, 500000.0, **{**LLAMA31, "high_freq_factor": 0.5})


def test_yarn_attention_factor_and_partial_rotary():
    _, factor = rope_frequencies(64, 150000.0, rope_type="yarn", factor=32.0,
                                 original_max_position_embeddings=4096, truncate=False)
    assert factor == pytest.approx(0.1 * torch.log(torch.tensor(32.0)).item() + 1)
    assert rotary_dim(256, 0.25) == 64
    inv_freq, _ = rope_frequencies(256, 1e7, partial_rotary_factor=0.25)
    assert inv_freq.shape == (32,)
