"""``hf_layers.layer_from_hf``: every decoder layer of tiny transformers models (random
weights, eager attention, float32; nothing downloaded) built by the one entry point, its
weights loaded from the transformers submodule, and equal to that submodule on the input
the whole model gives it (``llm_attention_site.layer_parity``), with and without left
padding. Unknown families and layer kinds are refused by name."""

from __future__ import annotations

import os
import pathlib

import pytest
import torch

from llm_attention.hf_layers import layer_from_hf, layer_kind
from llm_attention.latent import LatentAttention
from llm_attention.modern import ModernAttention
from llm_attention.sparse_latent import SparseLatentAttention

pytestmark = pytest.mark.xdist_group(  # the worker that has transformers imported already
    (pathlib.Path(__file__).resolve().parents[1] / "docs" / "modern" / "combined.md").as_posix()
)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
VOCAB, B, T = 50, 3, 9
SMALL = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
             intermediate_size=64, vocab_size=VOCAB)


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
    }


def tiny_model(config):
    from transformers import AutoModelForCausalLM

    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():  # sinks drawn wide enough to weigh in the softmax
        for name, parameter in model.named_parameters():
            if name.endswith("sinks"):
                parameter.normal_(0.0, 1.0)
    return model


KINDS = {  # the kinds of layer each tiny model has
    "gemma3_text": {"full_attention", "sliding_attention"},
    "gpt_oss": {"full_attention", "sliding_attention"},
    "llama4_text": {"full_attention", "chunked_attention"},
    "smollm3": {"full_attention", "sliding_attention"},
    "gemma4_text": {"full_attention", "sliding_attention"},
    "gemma4_text-keys-as-values": {"full_attention", "sliding_attention"},
    "deepseek_v3": {"full_attention"},
    "deepseek_v32": {"indexed_attention"},  # its config.layer_types says so
}


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "left-padded"])
@pytest.mark.parametrize("family", list(KINDS))
def test_every_layer_equals_transformers(family, padded):
    from llm_attention_site.layer_parity import every_layer

    config = tiny_configs()[family]
    model = tiny_model(config)
    ids = torch.randint(0, VOCAB, (B, T), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(B, T, dtype=torch.long)
    if padded:
        mask[1, :3] = 0
        mask[2, : T - 2] = 0
    rows = every_layer(model, config, ids, mask if padded else None)
    assert len(rows) == config.num_hidden_layers
    for row in rows:
        assert row["max_difference"] <= 1e-5, row
    expected = {"deepseek_v3": LatentAttention, "deepseek_v32": SparseLatentAttention}.get(
        family, ModernAttention)
    assert {row["module"] for row in rows} == {expected.__name__}
    assert {row["kind"] for row in rows} == KINDS[family]  # every kind is reached


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
    config = tiny_configs()["gemma3_text"]
    model = tiny_model(config)
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
