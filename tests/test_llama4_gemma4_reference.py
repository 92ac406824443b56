"""ModernAttention, built by ``from_hf_config``, against the attention layers of Llama 4
(``Llama4TextAttention``), SmolLM3 (``SmolLM3Attention``) and Gemma 4
(``Gemma4TextAttention``) in transformers, each kind of layer the family has.

Small random configs of transformers' own config classes, eager attention, float32,
``atol = rtol = 1e-5``; nothing is downloaded (HF_HUB_OFFLINE=1). Chunks and windows of 5
tokens in a sequence of 12, so that the runs cross chunk boundaries (at 5 and 10, later in
the left-padded rows, whose chunks start at their first real token); temperature tuning from
position 3 on. The cases: a prefill, a prompt then single tokens, and calls longer than the
chunk; padded and unpadded; on the explicit path and the fast path. Gemma 4's sharing layers
run after the layer whose keys and values they reuse, in the same step, as in the model.
"""

from __future__ import annotations

import os
import pathlib

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported

import pytest  # noqa: E402
import torch  # noqa: E402

from llm_attention.chunked import ChunkedKVCache  # noqa: E402
from llm_attention.hf_config import kv_source_layer  # noqa: E402
from llm_attention.modern import ModernAttention, from_hf_state_dict  # noqa: E402
from llm_attention.rope_scaling import rope_frequencies  # noqa: E402
from llm_attention_site.llama4_gemma4_parity import (  # noqa: E402
    CHUNK, LAYERS, STEPS, T, build, configs, hf, inputs, layer_kind, max_differences, run,
)

pytestmark = pytest.mark.xdist_group(  # the worker that has transformers imported already
    (pathlib.Path(__file__).resolve().parents[1] / "docs" / "modern" / "combined.md").as_posix()
)

TOL = dict(atol=1e-5, rtol=1e-5)
CASES = [(family, i) for family, layers in LAYERS.items() for i in layers]
IDS = [f"{family}-layer{i}" for family, i in CASES]


@pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])
@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize("sizes", STEPS.values(), ids=STEPS)
@pytest.mark.parametrize("family, layer_idx", CASES, ids=IDS)
def test_equals_transformers(family, layer_idx, sizes, padded, fast_path):
    steps, _ = run(family, layer_idx, sizes, padded, fast_path)
    assert sum(got.shape[1] for got, _, _ in steps) == T
    for got, expected, real in steps:
        torch.testing.assert_close(got[real], expected[real], **TOL)


def test_the_layers_are_the_families_kinds():
    """Each family's compared layers cover its kinds, with the options read from its config."""
    chunked, nope = build("llama4", 0)[1], build("llama4", 3)[1]
    assert layer_kind("llama4", 0) == "chunked_attention" and chunked.chunk_size == CHUNK
    assert chunked.rope_interleave and chunked.q_norm is not None
    assert not list(chunked.q_norm.parameters())  # Llama 4's QK-norm has no weights
    assert nope.rope is None and nope.q_norm is None and nope.temperature_tuning == (4.0, 0.5)
    assert build("smollm3", 3)[1].rope is None and build("smollm3", 3)[1].window == 5
    assert build("smollm3", 0)[1].rope is not None
    owner_local, owner_global, reader_local, reader_global = (
        build("gemma4", i)[1] for i in range(4)
    )
    assert owner_global.values_from_keys and owner_global.W_value is None
    assert (owner_global.head_dim, owner_global.num_kv_heads) == (32, 1)  # wider, fewer heads
    assert owner_local.W_value is not None and owner_local.scale == 1.0
    for reader in (reader_local, reader_global):
        assert reader.kv_shared and reader.W_key is None and reader.W_value is None
        assert not any("v_norm" in n or "k_norm" in n for n, _ in reader.named_modules())
    config = configs()["gemma4"][0]
    assert [kv_source_layer(config, i) for i in range(4)] == [None, None, 0, 1]
    assert config.kv_sharing_modes == ["store", "store", "reuse", "reuse"]  # the same pairs
    with pytest.raises(ValueError, match="kv_shared=True keeps no cache"):
        reader_local.make_cache(2)


def test_the_chunked_cache_keeps_only_the_current_chunk():
    _, caches = run("llama4", 0, STEPS["7+1+1+1+1+1"], False, False)
    cache = caches[0]
    assert isinstance(cache, ChunkedKVCache) and cache.length == T
    assert cache.held == T % CHUNK  # 10 and 11: the chunk that started at 10
    _, caches = run("llama4", 0, STEPS["4+6+2"], True, False)
    assert caches[0].left_padding.tolist() == [0, 4, 6] and caches[0].held < CHUNK


@pytest.mark.parametrize(
    "family, layer_idx, change",
    [
        ("llama4", 0, dict(rope_interleave=False)),
        ("llama4", 0, dict(chunk_size=None)),
        ("llama4", 0, dict(qk_norm=False, qk_norm_weight=True)),
        ("llama4", 3, dict(temperature_tuning=None)),
        ("llama4", 3, dict(nope=False)),
        ("smollm3", 3, dict(nope=False)),
        ("gemma4", 0, dict(value_norm=False)),
        ("gemma4", 1, dict(partial_rotary_factor=1.0, rope_scaling=None)),
        ("gemma4", 1, dict(scale=None)),
    ],
    ids=["llama4-pairs", "llama4-chunks", "llama4-qk-norm", "llama4-temperature",
         "llama4-nope", "smollm3-nope", "gemma4-value-norm", "gemma4-proportional",
         "gemma4-scale"],
)
def test_each_option_matters(family, layer_idx, change):
    """Switched off, each option gives outputs far from transformers': the parity above
    tests the option, not a case where it does nothing."""
    reference, ours = build(family, layer_idx)
    config = configs()[family][0]
    changed = ModernAttention.from_hf_config(config, layer_idx, **change).eval()
    changed.load_state_dict(from_hf_state_dict(reference.state_dict()))
    (got, expected, real), = run(family, layer_idx, STEPS["prefill"], True, False)[0]
    x, padding = inputs(3, True)  # the run's own input
    with torch.no_grad():
        other = changed(x, padding)
    torch.testing.assert_close(got[real], expected[real], **TOL)
    assert (other[real] - expected[real]).abs().max() > 1e-3


def test_proportional_angles_equal_transformers():
    """Gemma 4's full layers: a quarter of the pairs turn at a whole head's speeds."""
    config = configs()["gemma4"][0]
    for kind in ("full_attention", "sliding_attention"):
        rope = dict(config.rope_parameters[kind])
        rope_type = rope.pop("rope_type")
        init = (hf().ROPE_INIT_FUNCTIONS[rope_type] if rope_type != "default" else
                hf().modeling_gemma4.Gemma4TextRotaryEmbedding.compute_default_rope_parameters)
        layer_config = config.per_layer_config[kind]  # as Gemma 4's rotary class reads it
        expected, factor = init(layer_config, None, layer_type=kind)
        head_dim = layer_config.head_dim
        got, our_factor = rope_frequencies(head_dim, rope.pop("rope_theta"), rope_type=rope_type,
                                           **rope)
        torch.testing.assert_close(got, expected, atol=0, rtol=0)
        assert our_factor == factor == 1.0
        if kind == "full_attention":  # 32 wide: 16 pairs, 4 of which turn
            assert got.shape == (16,) and (got[:4] > 0).all() and (got[4:] == 0).all()


def test_llama3_angles_with_equal_band_factors_equal_transformers():
    """Llama 4 configs may set low_freq_factor == high_freq_factor (no blended band):
    transformers accepts them, and so do we, with its speeds."""
    rope = dict(rope_type="llama3", rope_theta=500000.0, factor=16.0, low_freq_factor=1.0,
                high_freq_factor=1.0, original_max_position_embeddings=8192)
    config = hf().Llama4TextConfig(head_dim=128, rope_parameters=dict(rope),
                                   max_position_embeddings=2**20)
    expected, _ = hf().ROPE_INIT_FUNCTIONS["llama3"](config, None)
    got, _ = rope_frequencies(128, rope.pop("rope_theta"), **rope)
    torch.testing.assert_close(got, expected)
    layer = ModernAttention.from_hf_config(config.to_dict(), 0, context_length=16)
    assert layer.rope is not None


def test_the_pages_differences_are_those_of_the_tests():
    """The page prints max_differences: every case within the tolerance, on both paths."""
    found = {(f, i): max_differences(f, i) for f, i in CASES}
    assert all(d <= 1e-5 for cases in found.values() for d in cases.values()), found
    assert all(len(cases) == len(STEPS) * 2 * 2 for cases in found.values())


def test_a_config_object_and_its_config_json_give_the_same_layers():
    """A transformers config object carries what it derived (Llama 4's layer_types,
    Gemma 4's per_layer_config); a config.json has the fields it was derived from
    (no_rope_layers, global_head_dim, num_global_key_value_heads): both read the same."""
    from llm_attention.hf_config import modern_attention_options

    for family in ("llama4", "smollm3", "gemma4"):
        config = configs()[family][0]
        as_json = config.to_dict()
        for derived in ("layer_types", "per_layer_config", "no_rope_layers"):
            as_json.pop(derived, None)
        if family == "gemma4":  # the file's own fields, and its layer pattern
            as_json.update(global_head_dim=32, num_global_key_value_heads=1,
                           layer_types=list(config.layer_types))
        for i in range(config.num_hidden_layers):
            assert modern_attention_options(config, i) == modern_attention_options(
                as_json, i), (family, i)


def test_the_published_sizes_agree_with_transformers_config_classes():
    """Where a config class's defaults are the published model's (its docstring names the
    checkpoint), the fields copied into families.py equal them."""
    from llm_attention_site.families import DEEPSEEK_V32, PUBLISHED

    scout = PUBLISHED["Llama 4 Scout"][1]["text_config"]
    defaults = hf().Llama4TextConfig()
    for field in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                  "num_key_value_heads", "head_dim", "attention_chunk_size", "floor_scale",
                  "attn_scale", "rms_norm_eps", "no_rope_layers"):
        assert scout[field] == getattr(defaults, field), field
    smol = PUBLISHED["SmolLM3 3B"][1]
    defaults = hf().SmolLM3Config()
    for field in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                  "num_key_value_heads", "no_rope_layer_interval", "no_rope_layers"):
        assert smol[field] == getattr(defaults, field), field
    from transformers import DeepseekV32Config

    defaults = DeepseekV32Config()
    for field, value in DEEPSEEK_V32[1].items():
        if field != "model_type":
            assert value == getattr(defaults, field), field
