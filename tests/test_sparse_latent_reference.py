"""SparseLatentAttention, built by ``from_hf_config``, against transformers'
``DeepseekV32Attention`` with its ``DeepseekV32Indexer``.

A tiny random DeepSeek-V3.2 config from transformers' own config class (YaRN angles, interleaved
pairs in the attention, halves in the indexer), eager attention, float32, top-k 4 of 12 tokens,
``atol = rtol = 1e-5`` at real tokens (padded query rows are compared nowhere: the reference
spreads its softmax there over every key of the sequence, ours returns zeros, a test pins
both); nothing is downloaded (HF_HUB_OFFLINE=1). Every
form: masked (plain and absorbed) and gathered, explicit and fast kernels. The reference gets its
rotary tables from the model's rotary class, its mask from transformers' masking utilities and its
cache of latents and indexer keys from ``DynamicCache``.
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
from llm_attention_site.sparse_costs import DEEPSEEK_V32  # noqa: E402
from llm_attention_site.sparse_parity import (  # noqa: E402
    DECODE_STEPS, FORMS, T, TOP_K, build, decode, dense_gap, form_name, hf, inputs,
    padded_rows, prefill, reference_forward, selection_margin,
)

pytestmark = pytest.mark.xdist_group(  # the worker that has transformers imported already
    (pathlib.Path(__file__).resolve().parents[1] / "docs" / "modern" / "combined.md").as_posix()
)

TOL = dict(atol=1e-5, rtol=1e-5)
FORM_IDS = [form_name(*f).replace(", ", "-") for f in FORMS]


@pytest.fixture(params=[False, True], ids=["scores", "all-tied"])
def built(request):
    """The layer pair, and the same with every index score tied at 0 (the indexer's head
    weights zero): the choice is then torch.topk's tie-breaking alone, and must match."""
    pytest.importorskip("transformers")
    return build(request.param)


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize("form", FORMS, ids=FORM_IDS)
def test_prefill_matches(built, padded, form):
    got, expected, real = prefill(built, padded, form)
    torch.testing.assert_close(got[real], expected[real], **TOL)


DECODE_CASES = {  # the steps of the cache, unpadded and left-padded
    f"{name}-{'padded' if padded else 'unpadded'}": (sizes, padded)
    for name, sizes in DECODE_STEPS.items()
    for padded in ((False, True) if name == "7+1+1+1+1+1" else (True,))
}


@pytest.mark.parametrize("case", DECODE_CASES.values(), ids=DECODE_CASES)
@pytest.mark.parametrize("form", FORMS, ids=FORM_IDS)
def test_cached_decoding_matches(built, form, case):
    """Our SparseLatentCache against transformers' cache of latents and indexer keys, a
    prompt with and without left padding, then one token or several at a time."""
    config, *_ = built
    sizes, padded = case
    steps, cache = decode(built, sizes, padded, form)
    for got, expected, real in steps:
        torch.testing.assert_close(got[real], expected[real], **TOL)
    assert cache.length == T
    assert cache.index_keys.shape == (3, config.max_position_embeddings, config.index_head_dim)


def test_the_selection_bites_and_is_not_decided_by_rounding():
    """Top-k 4 of up to 12 tokens: dense latent attention with the same weights lands far from
    the reference, and every real query that sees more than 4 keys has a clear gap between its
    4th and 5th best score, so the parity above is not luck of rounding."""
    assert TOP_K < T
    assert dense_gap() > 0.1
    assert selection_margin() > 1e-4


def test_padded_rows_are_zeros_where_the_reference_spreads_over_every_key():
    """No real token reads a padding query's output: ours is zero there; the reference's is
    the same on every padded row of a sequence (its softmax spread over all the keys), so
    the two are compared at real tokens only."""
    spread, ours = padded_rows()
    assert spread < 1e-6 and ours == 0


def test_scales_match_transformers():
    config, reference, _, ours = build()
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
    config, reference, _, _ = build()
    wrong = SparseLatentAttention.from_hf_config(config).eval()
    state = from_hf_state_dict(reference.state_dict())
    if change == "key_norm_bias":
        state["indexer.key_norm.bias"] = torch.zeros_like(state["indexer.key_norm.bias"])
    if change == "head_weights":  # every head weighed alike
        state["indexer.W_head_weights.weight"] = state["indexer.W_head_weights.weight"].abs()
    wrong.load_state_dict(state)
    if change == "pairs":
        monkeypatch.setattr(lightning_indexer, "apply_rope", neighbours_first)
    x, padding = inputs(config, 2, False)
    with torch.no_grad():
        gap = (wrong(x) - reference_forward(build(), x, padding.long())).abs().max().item()
    assert gap > 1e-3, gap


def test_the_published_sizes_are_transformers_defaults():
    """transformers' DeepseekV32Config defaults are DeepSeek-V3.2's sizes: our copied fields
    agree, the indexer's included."""
    defaults = hf().DeepseekV32Config()
    _, config = DEEPSEEK_V32
    for field in ("hidden_size", "num_hidden_layers", "num_attention_heads", "q_lora_rank",
                  "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                  "index_n_heads", "index_head_dim", "index_topk", "max_position_embeddings",
                  "rms_norm_eps", "attention_bias"):
        assert getattr(defaults, field) == config[field], field
