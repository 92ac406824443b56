"""ModernAttention against the attention layers of Llama 4, SmolLM3 and Gemma 4 in
transformers, beyond the parity harness (``tests/test_parity.py`` proves every layer of the
tiny models of the family table): the layers are the families' kinds, with the options read
from their configs; Llama 4's chunked cache keeps only the current chunk; each option of ours,
switched off, lands far from transformers' output (so the parity tests it); the rotary tables
equal transformers'; a config object and its config.json give the same layers; the published
sizes agree with transformers' config classes.
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
from llm_attention_site import parity  # noqa: E402
from llm_attention_site.families import FAMILIES, WINDOW  # noqa: E402

pytestmark = pytest.mark.xdist_group(  # the worker of the page that shows these families
    (pathlib.Path(__file__).resolve().parents[1] / "docs" / "modern"
     / "llama4-smollm3-gemma4.md").as_posix()
)

TOL = dict(atol=1e-5, rtol=1e-5)


def ours(key, layer):
    return parity.ours(key, None, layer, "self_attn")


def test_the_layers_are_the_families_kinds():
    """Each family's compared layers cover its kinds, with the options read from its config."""
    from llm_attention.hf_layers import layer_kind

    config, _ = parity.model("llama4")
    chunked, nope = ours("llama4", 0), ours("llama4", 3)
    assert layer_kind(config, 0)[1] == "chunked_attention" and chunked.chunk_size == WINDOW
    assert chunked.rope_interleave and chunked.q_norm is not None
    assert not list(chunked.q_norm.parameters())  # Llama 4's QK-norm has no weights
    assert nope.rope is None and nope.q_norm is None and nope.temperature_tuning == (4.0, 0.5)
    assert ours("smollm3", 3).rope is None and ours("smollm3", 3).window is None  # published
    assert ours("smollm3", 0).rope is not None
    local, full = ours("gemma4", 0), ours("gemma4", 2)  # 31B's kind
    assert full.values_from_keys and full.W_value is None
    assert (full.head_dim, full.num_kv_heads) == (32, 1)  # wider, fewer heads
    assert local.W_value is not None and local.scale == 1.0
    config, _ = parity.model("gemma4_e2b")  # E2B's kind: layers 3 to 5 read 1, 1 and 2
    assert [kv_source_layer(config, i) for i in range(6)] == [None] * 3 + [1, 1, 2]
    for reader in (ours("gemma4_e2b", i) for i in (3, 4, 5)):
        assert reader.kv_shared and reader.W_key is None and reader.W_value is None
        assert not any("v_norm" in n or "k_norm" in n for n, _ in reader.named_modules())
    with pytest.raises(ValueError, match="kv_shared=True keeps no cache"):
        ours("gemma4_e2b", 3).make_cache(2)


def decoded_cache(key, layer, split, padded):
    """Our layer's cache after decoding the harness's batch in the calls of ``split``."""
    module, real = ours(key, layer), parity.real_tokens(padded)
    cache = module.make_cache(parity.B)
    with torch.no_grad():
        for (start, end), call in zip(parity.bounds(split),
                                      parity.reference_run(key, None, split, padded)):
            module(call[layer, "self_attn"]["input"],
                   real[:, start:end] if padded else None, cache=cache)
    return cache


def test_the_chunked_cache_keeps_only_the_current_chunk():
    cache = decoded_cache("llama4", 0, "7+1+1+1+1+1", False)
    assert isinstance(cache, ChunkedKVCache) and cache.length == parity.T
    assert cache.held == parity.T % WINDOW  # 10 and 11: the chunk that started at 10
    cache = decoded_cache("llama4", 0, "4+6+2", True)
    assert cache.left_padding.tolist() == list(parity.PADDING) and cache.held < WINDOW


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
        ("gemma4", 2, dict(partial_rotary_factor=1.0, rope_scaling=None)),
        ("gemma4", 2, dict(scale=None)),
    ],
    ids=["llama4-pairs", "llama4-chunks", "llama4-qk-norm", "llama4-temperature",
         "llama4-nope", "smollm3-nope", "gemma4-value-norm", "gemma4-proportional",
         "gemma4-scale"],
)
def test_each_option_matters(family, layer_idx, change):
    """Switched off, each option gives outputs far from transformers': the parity above
    tests the option, not a case where it does nothing."""
    config, model = parity.model(family)
    reference = parity.decoder_layers(model, config)[layer_idx].self_attn
    changed = ModernAttention.from_hf_config(config, layer_idx, **change).eval()
    changed.load_state_dict(from_hf_state_dict(reference.state_dict()))
    at = (layer_idx, "self_attn")
    assert parity.one_pass_gap(family, ours(family, layer_idx), at) < 1e-5
    assert parity.one_pass_gap(family, changed, at) > 1e-3


def test_proportional_angles_equal_transformers():
    """Gemma 4's full layers: a quarter of the pairs turn at a whole head's speeds."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.gemma4 import modeling_gemma4

    config = parity.tiny_config("gemma4")
    for kind in ("full_attention", "sliding_attention"):
        rope = dict(config.rope_parameters[kind])
        rope_type = rope.pop("rope_type")
        init = (ROPE_INIT_FUNCTIONS[rope_type] if rope_type != "default" else
                modeling_gemma4.Gemma4TextRotaryEmbedding.compute_default_rope_parameters)
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
    from transformers import Llama4TextConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config = Llama4TextConfig(head_dim=128, rope_parameters=dict(rope),
                              max_position_embeddings=2**20)
    expected, _ = ROPE_INIT_FUNCTIONS["llama3"](config, None)
    got, _ = rope_frequencies(128, rope.pop("rope_theta"), **rope)
    torch.testing.assert_close(got, expected)
    layer = ModernAttention.from_hf_config(config.to_dict(), 0, context_length=16)
    assert layer.rope is not None


def test_a_config_object_and_its_config_json_give_the_same_layers():
    """A transformers config object carries what it derived (Llama 4's layer_types,
    Gemma 4's per_layer_config); a config.json has the fields it was derived from
    (no_rope_layers, global_head_dim, num_global_key_value_heads): both read the same."""
    from llm_attention.hf_config import modern_attention_options

    for family in ("llama4", "smollm3", "gemma4", "gemma4_e2b"):
        config = parity.tiny_config(family)
        as_json = config.to_dict()
        for derived in ("layer_types", "per_layer_config", "no_rope_layers"):
            as_json.pop(derived, None)
        if family.startswith("gemma4"):  # the file's own fields, and its layer pattern
            tiny = FAMILIES[family].tiny
            own = {k: tiny[k] for k in ("global_head_dim", "num_global_key_value_heads")
                   if k in tiny}
            as_json.update(layer_types=list(config.layer_types), **own)
        for i in range(config.num_hidden_layers):
            assert modern_attention_options(config, i) == modern_attention_options(
                as_json, i), (family, i)


def test_the_published_sizes_agree_with_transformers_config_classes():
    """Where a config class's defaults are the published model's (its docstring names the
    checkpoint), the fields copied into families.py equal them."""
    from llm_attention_site.families import DEEPSEEK_V32, PUBLISHED

    scout = PUBLISHED["Llama 4 Scout"][1]["text_config"]
    from transformers import Llama4TextConfig, SmolLM3Config

    defaults = Llama4TextConfig()
    for field in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                  "num_key_value_heads", "head_dim", "attention_chunk_size", "floor_scale",
                  "attn_scale", "rms_norm_eps", "no_rope_layers"):
        assert scout[field] == getattr(defaults, field), field
    smol = PUBLISHED["SmolLM3 3B"][1]
    defaults = SmolLM3Config()
    for field in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                  "num_key_value_heads", "no_rope_layer_interval", "no_rope_layers"):
        assert smol[field] == getattr(defaults, field), field
    from transformers import DeepseekV32Config

    defaults = DeepseekV32Config()
    for field, value in DEEPSEEK_V32[1].items():
        if field != "model_type":
            assert value == getattr(defaults, field), field
