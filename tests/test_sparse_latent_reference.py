"""SparseLatentAttention against transformers' ``DeepseekV32Attention`` (and its
``DeepseekV32Indexer``), beyond the parity harness (``tests/test_parity.py`` proves the tiny
DeepSeek-V3.2 of the family table, with random indexer weights and with every score tied, and
the sparse-attention page asserts the selection's margin and the padded rows): the scales equal
transformers'; a wrong detail of our indexer lands far from transformers' output; the published
sizes are transformers' defaults.
"""

from __future__ import annotations

import os
import pathlib

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported

import pytest  # noqa: E402
import torch  # noqa: E402

from llm_attention import lightning_indexer  # noqa: E402
from llm_attention.latent import deinterleave  # noqa: E402
from llm_attention.rope import apply_rope  # noqa: E402
from llm_attention.sparse_latent import SparseLatentAttention, from_hf_state_dict  # noqa: E402
from llm_attention_site import parity  # noqa: E402
from llm_attention_site.sparse_costs import DEEPSEEK_V32  # noqa: E402

pytestmark = pytest.mark.xdist_group(  # the worker of the page that shows this family
    (pathlib.Path(__file__).resolve().parents[1] / "docs" / "modern" / "sparse-attention.md").as_posix()
)
AT = (0, "self_attn")


def test_scales_match_transformers():
    config, model = parity.model("deepseek_v32")
    reference, ours = model.model.layers[0].self_attn, parity.ours("deepseek_v32", None, *AT)
    assert ours.scale == pytest.approx(reference.scaling, rel=1e-12)
    assert ours.indexer.head_dim**-0.5 == reference.indexer.softmax_scale
    assert ours.indexer.key_norm.eps == reference.indexer.k_norm.eps == 1e-6


def neighbours_first(x, cos, sin, start):
    """The indexer's rotation with DeepSeek's other layout: neighbours gathered into halves
    first, as the latent attention does."""
    d_r = cos.shape[-1]
    x = torch.cat((deinterleave(x[..., :d_r]), x[..., d_r:]), dim=-1)
    return apply_rope(x, cos, sin, start)


@pytest.mark.parametrize("change", ["pairs", "key_norm_bias", "head_weights"])
def test_a_wrong_indexer_is_caught(monkeypatch, change):
    """Negative controls: each detail of the indexer moves the output when wrong."""
    config, model = parity.model("deepseek_v32")
    reference = model.model.layers[0].self_attn
    wrong = SparseLatentAttention.from_hf_config(config, 0).eval()
    state = from_hf_state_dict(reference.state_dict())
    if change == "key_norm_bias":
        state["indexer.key_norm.bias"] = torch.zeros_like(state["indexer.key_norm.bias"])
    if change == "head_weights":  # every head weighed alike
        state["indexer.W_head_weights.weight"] = state["indexer.W_head_weights.weight"].abs()
    wrong.load_state_dict(state)
    assert parity.one_pass_gap("deepseek_v32", parity.ours("deepseek_v32", None, *AT)) < 1e-5
    if change == "pairs":
        monkeypatch.setattr(lightning_indexer, "apply_rope", neighbours_first)
    gap = parity.one_pass_gap("deepseek_v32", wrong)
    assert gap > 1e-3, gap


def test_the_published_sizes_are_transformers_defaults():
    """transformers' DeepseekV32Config defaults are DeepSeek-V3.2's sizes: our copied fields
    agree, the indexer's included."""
    from transformers import DeepseekV32Config

    defaults = DeepseekV32Config()
    _, config = DEEPSEEK_V32
    for field in ("hidden_size", "num_hidden_layers", "num_attention_heads", "q_lora_rank",
                  "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                  "index_n_heads", "index_head_dim", "index_topk", "max_position_embeddings",
                  "rms_norm_eps", "attention_bias"):
        assert getattr(defaults, field) == config[field], field
