"""``hf_layers.layer_from_hf``: the one entry point builds our module for any decoder layer
of a transformers config (or a ``config.json`` dict), loads the transformers submodule's
weights, and refuses what it does not implement by name. (Every layer of every family's tiny
model equals transformers' on the input the model gives it: ``tests/test_parity.py``.) The
tiny models are those of the family table (``llm_attention_site.parity.model``)."""

from __future__ import annotations

import os
import pathlib

import pytest
import torch

from llm_attention.hf_layers import layer_from_hf, layer_kind
from llm_attention.latent import LatentAttention
from llm_attention.linear_attention import GatedDeltaNet, KimiDeltaAttention
from llm_attention.modern import ModernAttention
from llm_attention.multihead import MultiHeadAttention
from llm_attention_site import parity
from llm_attention_site.families import LINEAR

pytestmark = pytest.mark.xdist_group(  # the worker that has transformers imported already
    (pathlib.Path(__file__).resolve().parents[1] / "docs" / "modern" / "combined.md").as_posix()
)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# family -> the module class of each layer kind of its tiny model
EXPECTED = {
    "gpt2": {"full_attention": MultiHeadAttention},
    "gemma3": {"full_attention": ModernAttention, "sliding_attention": ModernAttention},
    "deepseek_v3": {"full_attention": LatentAttention},
    "qwen3_next": {"linear_attention": GatedDeltaNet, "full_attention": ModernAttention},
    "kimi_linear": {"linear_attention": KimiDeltaAttention, "full_attention": LatentAttention},
}


def tiny(key):
    return parity.model(key)


@pytest.mark.parametrize("key", list(EXPECTED))
def test_each_kind_gets_its_module(key):
    config, model = tiny(key)
    for layer, name in parity.mixers(key):
        kind = layer_kind(config, layer)[1]
        assert isinstance(parity.ours(key, None, layer, name), EXPECTED[key][kind]), layer


def test_gpt2_is_the_chapters_module_with_its_fused_weights_split():
    config, model = tiny("gpt2")
    attention = model.transformer.h[1].attn
    built = layer_from_hf(config, 1, attention.state_dict())
    queries, keys, values = attention.c_attn.weight.chunk(3, dim=1)  # (d, d) each
    assert torch.equal(built.W_key.weight, keys.T) and torch.equal(built.W_value.weight, values.T)
    assert torch.equal(built.out_proj.weight, attention.c_proj.weight.T)
    assert built.num_heads == config.n_head and built.W_query.bias is not None
    with pytest.raises(ValueError, match=r"keys \['mlp.c_fc.weight'\] are not weights"):
        layer_from_hf(config, 1, {**attention.state_dict(), "mlp.c_fc.weight": queries})
    with pytest.raises(ValueError, match="scale_attn_weights=False"):
        layer_from_hf({**config.to_dict(), "scale_attn_weights": False}, 0)


def test_gemma4_sharing_layers_read_their_source_and_say_so_alone():
    """The last three layers of the tiny Gemma 4 have no key or value projection; called
    alone, the module says what it needs; its source is the last layer of its kind."""
    from llm_attention.hf_config import kv_source_layer

    config, model = tiny("gemma4_e2b")
    assert [kv_source_layer(config, i) for i in range(6)] == [None] * 3 + [1, 1, 2]
    reader = layer_from_hf(config, 3, model.model.layers[3].self_attn.state_dict())
    assert reader.kv_shared and reader.W_key is None
    with pytest.raises(TypeError, match="pass that layer's SharedKV"):
        reader(torch.randn(1, 4, 32))


def test_weights_are_loaded_and_the_module_is_in_eval_mode():
    config, model = tiny("gemma3")
    reference = model.model.layers[5].self_attn
    built = layer_from_hf(config, 5, reference.state_dict())
    assert not built.training
    assert torch.equal(built.W_query.weight, reference.q_proj.weight)
    fresh = layer_from_hf(config, 5)  # no state_dict: the module's own random weights
    assert not torch.equal(fresh.W_query.weight, reference.q_proj.weight)
    assert built.window is None and layer_from_hf(config, 0).window == 5


def test_a_config_json_dict_gives_the_same_layer():
    config = parity.tiny_config("gpt_oss")
    from_object = layer_from_hf(config, 0)
    from_dict = layer_from_hf(config.to_dict(), 0)
    assert repr(from_object) == repr(from_dict)
    assert layer_kind(config.to_dict(), 0) == ("gpt_oss", "sliding_attention")


def test_unknown_families_and_layer_kinds_are_refused_by_name():
    with pytest.raises(ValueError, match=r"model_type 'bert' is not implemented"):
        layer_from_hf({"model_type": "bert", "num_hidden_layers": 2}, 0)
    weird = dict(model_type="llama", num_hidden_layers=2, layer_types=["full_attention", "mamba"],
                 hidden_size=32, num_attention_heads=4, max_position_embeddings=16,
                 rope_theta=1e4)
    assert isinstance(layer_from_hf(weird, 0), ModernAttention)
    with pytest.raises(ValueError, match=r"layer 1 of 'llama' is a 'mamba' layer"):
        layer_from_hf(weird, 1)
    with pytest.raises(ValueError, match=r"layer_idx=2 is beyond the config's 2 layers"):
        layer_from_hf(weird, 2)


def test_linear_layers_load_the_weights_of_each_layout():
    for family, index in (("qwen3_next", 0), ("qwen3_5", 1), ("kimi_linear", 2)):
        config, model = tiny(family)
        layer = model.model.layers[index]
        reference = getattr(layer, "linear_attn", None) or layer.self_attn
        built = layer_from_hf(config, index, reference.state_dict())
        assert torch.equal(built.conv.weight, reference.conv1d.weight)
        assert torch.equal(built.A_log.flatten(), reference.state_dict()[
            "forget_gate.A_log" if family == "kimi_linear" else "A_log"].flatten())
        if family == "qwen3_5":  # the same order as ours: a plain copy
            assert torch.equal(built.W_qkv.weight, reference.in_proj_qkv.weight)


def test_published_config_json_layouts_are_read():
    # Kimi Linear's config.json names its layers in 1-based lists and nests the KDA sizes
    kimi = dict(model_type="kimi_linear", hidden_size=32, num_hidden_layers=5,
                num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=16,
                q_lora_rank=None, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6,
                model_max_length=64, rms_norm_eps=1e-5, mla_use_nope=True,
                linear_attn_config=dict(full_attn_layers=[4, 5], kda_layers=[1, 2, 3],
                                        head_dim=8, num_heads=4, short_conv_kernel_size=4))
    kinds = [layer_kind(kimi, i)[1] for i in range(5)]
    assert kinds == ["linear_attention"] * 3 + ["full_attention"] * 2
    kda, mla = layer_from_hf(kimi, 0), layer_from_hf(kimi, 3)
    assert isinstance(kda, KimiDeltaAttention) and kda.num_heads == 4 and kda.key_head_dim == 8
    assert isinstance(mla, LatentAttention) and mla.rope is None and mla.context_length == 64
    # Qwen3.5's config.json wraps the text model's fields in text_config
    text = dict(model_type="qwen3_5_text", hidden_size=32, num_hidden_layers=4,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                max_position_embeddings=64, rms_norm_eps=1e-6, **LINEAR,
                layer_types=["linear_attention"] * 3 + ["full_attention"],
                rope_parameters=dict(rope_type="default", rope_theta=1e7,
                                     partial_rotary_factor=0.25, mrope_interleaved=True,
                                     mrope_section=[11, 11, 10]))
    wrapped = dict(model_type="qwen3_5", text_config=text, vision_config={})
    assert layer_kind(wrapped, 3) == ("qwen3_5_text", "full_attention")
    assert repr(layer_from_hf(wrapped, 0)) == repr(layer_from_hf(text, 0))
    full = layer_from_hf(wrapped, 3)
    assert full.output_gate and full.rope.cos.shape[1] == 4  # a quarter of 16 turned


def test_what_the_linear_layers_do_not_implement_is_refused_by_name():
    from llm_attention.hf_config import linear_attention_options

    config = parity.tiny_config("qwen3_next")
    with pytest.raises(ValueError, match=r"layer 0 of 'qwen3_next' is a 'linear_attention'"):
        ModernAttention.from_hf_config(config, 0)
    with pytest.raises(ValueError, match=r"layer 3 of 'qwen3_next' is a 'full_attention' layer"):
        GatedDeltaNet.from_hf_config(config, 3)
    with pytest.raises(ValueError, match=r"'qwen3_next' has no Kimi Delta Attention layers"):
        KimiDeltaAttention.from_hf_config(config, 0)
    bounded = dict(model_type="kimi_linear", hidden_size=32, num_hidden_layers=1,
                   linear_attn_config=dict(kda_layers=[1], head_dim=8, num_heads=4,
                                           gate_lower_bound=-5.0))
    with pytest.raises(ValueError, match=r"linear_attn_config\['gate_lower_bound'\] is not"):
        linear_attention_options(bounded, 0)
    gelu = {**config.to_dict(), "hidden_act": "gelu"}
    with pytest.raises(ValueError, match=r"hidden_act='gelu' is not implemented"):
        layer_from_hf(gelu, 0)
    kimi = parity.tiny_config("kimi_linear").to_dict()
    with pytest.raises(ValueError, match=r"mla_use_nope=False"):
        layer_from_hf({**kimi, "mla_use_nope": False}, 1)


@pytest.mark.parametrize("name", ["Qwen3-Next 80B-A3B", "Qwen3.5 9B", "Kimi Linear 48B-A3B"])
def test_published_hybrids_read_as_transformers_reads_them(name):
    """The page's published config.json fields, read by us and by transformers' own config
    class, give the same layers; and the values are those the config class defaults to,
    but for the longer context the checkpoints publish (and Kimi Linear's layer lists)."""
    import transformers as t

    from llm_attention.hf_config import config_dict
    from llm_attention_site.families import HYBRIDS

    published = HYBRIDS[name][1]
    cls = {"Qwen3-Next 80B-A3B": t.Qwen3NextConfig, "Qwen3.5 9B": t.Qwen3_5Config,
           "Kimi Linear 48B-A3B": t.KimiLinearConfig}[name]
    theirs = cls(**{k: v for k, v in published.items() if k != "model_type"})
    if name == "Qwen3.5 9B":
        theirs = theirs.text_config
    ours = config_dict(published)
    count = ours["num_hidden_layers"]
    assert [layer_kind(theirs, i)[1] for i in range(count)] == [
        layer_kind(published, i)[1] for i in range(count)]
    with torch.device("meta"):
        for kind in ("linear_attention", "full_attention"):
            i = [layer_kind(published, j)[1] for j in range(count)].index(kind)
            assert repr(layer_from_hf(theirs, i, context_length=8)) == repr(
                layer_from_hf(published, i, context_length=8))
    defaults = (t.Qwen3_5TextConfig() if name == "Qwen3.5 9B" else cls()).to_dict()
    differ = {k for k in ours if k in defaults and defaults[k] != ours[k]}
    assert differ <= {"max_position_embeddings", "rope_parameters"}, differ
    if name == "Kimi Linear 48B-A3B":  # the nested sizes are the class's defaults too
        nested = published["linear_attn_config"]
        assert (nested["num_heads"], nested["head_dim"], nested["short_conv_kernel_size"]) == (
            defaults["linear_num_heads"], defaults["linear_head_dim"],
            defaults["linear_conv_kernel_dim"])
