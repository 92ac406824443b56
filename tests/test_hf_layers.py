"""``hf_layers.layer_from_hf``: every decoder layer of tiny transformers models (random
weights, eager attention, float32; nothing downloaded) built by the one entry point, its
weights loaded from the transformers submodule, and equal to that submodule on the input
the whole model gives it (``llm_attention_site.layer_parity``), with and without left
padding: Gemma 3, gpt-oss, DeepSeek-V3, and the hybrids Qwen3-Next, Qwen3.5 (Gated DeltaNet
and gated softmax attention) and Kimi Linear (Kimi Delta Attention and latent attention without
rotary positions). Unknown families and layer kinds are refused by name."""

from __future__ import annotations

import functools
import os
import pathlib

import pytest
import torch

from llm_attention_site.linear_parity import randomize

from llm_attention.hf_layers import layer_from_hf, layer_kind
from llm_attention.latent import LatentAttention
from llm_attention.linear_attention import GatedDeltaNet, KimiDeltaAttention
from llm_attention.modern import ModernAttention
from llm_attention.sparse_latent import SparseLatentAttention

pytestmark = pytest.mark.xdist_group(  # the worker that has transformers imported already
    (pathlib.Path(__file__).resolve().parents[1] / "docs" / "modern" / "combined.md").as_posix()
)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
VOCAB, B, T = 50, 3, 9
SMALL = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
             intermediate_size=64, vocab_size=VOCAB)
LINEAR = dict(linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
              linear_value_head_dim=6)
MOE = dict(num_experts=2, num_experts_per_tok=1, moe_intermediate_size=32)
# family -> the module class of each layer kind
SOFTMAX = {"full_attention": ModernAttention, "sliding_attention": ModernAttention}
EXPECTED = {
    "gemma3_text": SOFTMAX,
    "gpt_oss": SOFTMAX,
    "llama4_text": {"full_attention": ModernAttention, "chunked_attention": ModernAttention},
    "smollm3": SOFTMAX,
    "gemma4_text": SOFTMAX,
    "gemma4_text-keys-as-values": SOFTMAX,
    "deepseek_v3": {"full_attention": LatentAttention},
    "deepseek_v32": {"indexed_attention": SparseLatentAttention},
    "qwen3_next": {"linear_attention": GatedDeltaNet, "full_attention": ModernAttention},
    "qwen3_5_text": {"linear_attention": GatedDeltaNet, "full_attention": ModernAttention},
    "kimi_linear": {"linear_attention": KimiDeltaAttention, "full_attention": LatentAttention},
}


@functools.cache
def tiny_configs() -> dict:
    import transformers as t

    return {
        "gemma3_text": t.Gemma3TextConfig(
            **SMALL, num_hidden_layers=6, sliding_window=5, query_pre_attn_scalar=24),
        "gpt_oss": t.GptOssConfig(
            **SMALL, num_hidden_layers=2, sliding_window=5, num_local_experts=2,
            num_experts_per_tok=1),
        "llama4_text": t.Llama4TextConfig(  # chunks of 4: three in 9 tokens
            **SMALL, num_hidden_layers=4, attention_chunk_size=4, floor_scale=2,
            num_local_experts=2, intermediate_size_mlp=64),
        "smollm3": t.SmolLM3Config(  # a window on the layer without positions
            **SMALL, num_hidden_layers=4, use_sliding_window=True, sliding_window=5,
            pad_token_id=0),
        "gemma4_text": t.Gemma4TextConfig(  # E2B's kind: the last three layers share
            **SMALL, num_hidden_layers=6, sliding_window=5, global_head_dim=32,
            layer_types=["sliding_attention", "sliding_attention", "full_attention"] * 2,
            num_kv_shared_layers=3, hidden_size_per_layer_input=8,
            vocab_size_per_layer_input=VOCAB),
        "gemma4_text-keys-as-values": t.Gemma4TextConfig(  # 31B's kind: no sharing
            **SMALL, num_hidden_layers=3, sliding_window=5, global_head_dim=32,
            attention_k_eq_v=True, num_global_key_value_heads=1,
            layer_types=["sliding_attention", "sliding_attention", "full_attention"],
            hidden_size_per_layer_input=0),
        "deepseek_v3": t.DeepseekV3Config(
            hidden_size=64, num_attention_heads=4, num_key_value_heads=4,
            num_hidden_layers=2, kv_lora_rank=16, q_lora_rank=24, qk_nope_head_dim=8,
            qk_rope_head_dim=8, v_head_dim=8, intermediate_size=64,
            moe_intermediate_size=32, n_routed_experts=2, num_experts_per_tok=1,
            n_group=1, topk_group=1, first_k_dense_replace=1, vocab_size=VOCAB),
        "deepseek_v32": t.DeepseekV32Config(  # the indexer keeps 4 of up to 9 tokens
            hidden_size=64, num_attention_heads=4, num_key_value_heads=4,
            num_hidden_layers=2, kv_lora_rank=16, q_lora_rank=24, qk_nope_head_dim=8,
            qk_rope_head_dim=8, v_head_dim=8, index_n_heads=4, index_head_dim=16,
            index_topk=4, intermediate_size=64, moe_intermediate_size=32,
            n_routed_experts=2, num_experts_per_tok=1, n_group=1, topk_group=1,
            first_k_dense_replace=1, vocab_size=VOCAB),
        "qwen3_next": t.Qwen3NextConfig(
            **SMALL, **LINEAR, **MOE, num_hidden_layers=4, shared_expert_intermediate_size=32),
        "qwen3_5_text": t.Qwen3_5TextConfig(**SMALL, **LINEAR, num_hidden_layers=4),
        "kimi_linear": t.KimiLinearConfig(  # KDA, latent, KDA: as Kimi Linear mixes them
            hidden_size=32, num_attention_heads=4, num_key_value_heads=4, num_hidden_layers=3,
            intermediate_size=64, vocab_size=VOCAB, linear_num_heads=4, linear_head_dim=8,
            kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6, **MOE,
            model_max_length=64, pad_token_id=None, bos_token_id=None, eos_token_id=None,
            layer_types=["linear_attention", "full_attention", "linear_attention"]),
    }


@functools.cache
def family_model(family: str):
    """The tiny model of ``family``, built once per process (the tests only read it)."""
    return tiny_model(tiny_configs()[family])


def tiny_model(config):
    from transformers import AutoModelForCausalLM

    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():  # sinks drawn wide enough to weigh in the softmax
        for name, parameter in model.named_parameters():
            if name.endswith("sinks"):
                parameter.normal_(0.0, 1.0)
    for layer in model.model.layers:  # linear layers' decays of every speed, wide weights
        linear = getattr(layer, "linear_attn", None) or getattr(layer, "self_attn")
        if hasattr(linear, "conv1d"):
            randomize(linear)
    return model


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "left-padded"])
@pytest.mark.parametrize("family", list(EXPECTED))
def test_every_layer_equals_transformers(family, padded):
    from llm_attention_site.layer_parity import every_layer

    config, model = tiny_configs()[family], family_model(family)
    ids = torch.randint(0, VOCAB, (B, T), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(B, T, dtype=torch.long)
    if padded:
        mask[1, :3] = 0
        mask[2, : T - 2] = 0
    rows = every_layer(model, config, ids, mask if padded else None)
    assert len(rows) == config.num_hidden_layers
    for row in rows:
        assert row["max_difference"] <= 1e-5, row
        assert row["module"] == EXPECTED[family][row["kind"]].__name__, row
    assert {row["kind"] for row in rows} == set(EXPECTED[family])  # every kind reached


def test_gemma4_sharing_layers_read_their_source_and_say_so_alone():
    """The last three layers of the tiny Gemma 4 have no key or value projection; called
    alone, the module says what it needs; its source is the last layer of its kind."""
    from llm_attention.hf_config import kv_source_layer

    config = tiny_configs()["gemma4_text"]
    assert [kv_source_layer(config, i) for i in range(6)] == [None] * 3 + [1, 1, 2]
    model = tiny_model(config)
    reader = layer_from_hf(config, 3, model.model.layers[3].self_attn.state_dict())
    assert reader.kv_shared and reader.W_key is None
    with pytest.raises(TypeError, match="pass that layer's SharedKV"):
        reader(torch.randn(1, 4, 32))


def test_deepseek_v32_layers_attend_over_the_selected_keys_only():
    """In the whole tiny model the indexer's choice matters: dense latent attention with the
    same weights, on the same input, gives another output."""
    from llm_attention_site.layer_parity import record_layers

    config = tiny_configs()["deepseek_v32"]
    ids = torch.randint(0, VOCAB, (B, T), generator=torch.Generator().manual_seed(1))
    for index, record in enumerate(record_layers(tiny_model(config), ids)):
        ours = layer_from_hf(config, index, record["module"].state_dict())
        with torch.no_grad():
            dense = LatentAttention.forward(ours, record["input"])  # every earlier token
            sparse = ours(record["input"])
        torch.testing.assert_close(sparse, record["output"], atol=1e-5, rtol=1e-5)
        assert (dense - record["output"]).abs().max() > 1e-3, index


def test_weights_are_loaded_and_the_module_is_in_eval_mode():
    config, model = tiny_configs()["gemma3_text"], family_model("gemma3_text")
    reference = model.model.layers[5].self_attn
    built = layer_from_hf(config, 5, reference.state_dict())
    assert not built.training
    assert torch.equal(built.W_query.weight, reference.q_proj.weight)
    fresh = layer_from_hf(config, 5)  # no state_dict: the module's own random weights
    assert not torch.equal(fresh.W_query.weight, reference.q_proj.weight)
    assert built.window is None and layer_from_hf(config, 0).window == 5


def test_a_config_json_dict_gives_the_same_layer():
    config = tiny_configs()["gpt_oss"]
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
    for family, index in (("qwen3_next", 0), ("qwen3_5_text", 1), ("kimi_linear", 2)):
        config, model = tiny_configs()[family], family_model(family)
        layer = model.model.layers[index]
        reference = getattr(layer, "linear_attn", None) or layer.self_attn
        built = layer_from_hf(config, index, reference.state_dict())
        assert torch.equal(built.conv.weight, reference.conv1d.weight)
        assert torch.equal(built.A_log.flatten(), reference.state_dict()[
            "forget_gate.A_log" if family == "kimi_linear" else "A_log"].flatten())
        if family == "qwen3_5_text":  # the same order as ours: a plain copy
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

    config = tiny_configs()["qwen3_next"]
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
    kimi = tiny_configs()["kimi_linear"].to_dict()
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
