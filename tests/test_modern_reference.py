"""ModernAttention against Hugging Face transformers' own attention layers.

Small random configs only: nothing is downloaded, and HF_HUB_OFFLINE=1 makes sure nothing
reaches a hub. Each reference layer (eager attention, float32) gets its rotary tables from
its model's rotary class and its mask from transformers' masking utilities, exactly as
inside the model; its weights are loaded into ours with ``from_hf_state_dict``:

- Llama: grouped-query attention and RoPE (biases on, to check every name maps);
- Mistral: the same plus a sliding window, with transformers' sliding cache when decoding,
  and sequences one shorter than the window, as long, and one longer;
- Qwen3: QK-norm, and a head width that is not hidden_size / num_heads.

Outputs are compared at real tokens (a padding query has no meaning in either).
"""

from __future__ import annotations

import functools
import os
import pathlib
from types import SimpleNamespace

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported

import pytest  # noqa: E402
import torch  # noqa: E402

from llm_attention.modern import ModernAttention, from_hf_state_dict  # noqa: E402

# transformers takes seconds to import: it is imported when a test first needs it, not when the
# tests are collected, and these tests run in the worker that runs the combined-module page's
# code (which imports it too).
pytestmark = pytest.mark.xdist_group(
    (pathlib.Path(__file__).resolve().parents[1] / "docs" / "modern" / "combined.md").as_posix()
)

# The tolerance stated on the combined-module page: float32, outputs of size about 1.
TOL = dict(atol=1e-5, rtol=1e-5)
COMMON = dict(max_position_embeddings=32, attn_implementation="eager")
FAMILY_NAMES = ["llama", "mistral", "qwen3"]


@functools.cache
def hf() -> SimpleNamespace:
    """The parts of transformers these tests use; skips the tests where it is not installed."""
    pytest.importorskip("transformers")
    from transformers import DynamicCache, LlamaConfig, MistralConfig, Qwen3Config
    from transformers.masking_utils import create_causal_mask, create_sliding_window_causal_mask
    from transformers.models.llama import modeling_llama
    from transformers.models.mistral import modeling_mistral
    from transformers.models.qwen3 import modeling_qwen3

    return SimpleNamespace(**locals())


def families() -> dict:
    """Name -> (config, attention class, rotary class, mask maker, our layer's options)."""
    t = hf()
    return {
        "llama": (
            t.LlamaConfig(hidden_size=48, num_attention_heads=6, num_key_value_heads=2,
                          attention_bias=True, rope_theta=500000.0, **COMMON),
            t.modeling_llama.LlamaAttention, t.modeling_llama.LlamaRotaryEmbedding,
            t.create_causal_mask, dict(qkv_bias=True, out_bias=True),
        ),
        "mistral": (
            t.MistralConfig(hidden_size=64, num_attention_heads=8, num_key_value_heads=2,
                            sliding_window=5, **COMMON),
            t.modeling_mistral.MistralAttention, t.modeling_mistral.MistralRotaryEmbedding,
            t.create_sliding_window_causal_mask, dict(window=5),
        ),
        "qwen3": (
            t.Qwen3Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=1,
                          head_dim=16, rms_norm_eps=1e-6, **COMMON),
            t.modeling_qwen3.Qwen3Attention, t.modeling_qwen3.Qwen3RotaryEmbedding,
            t.create_causal_mask, dict(qk_norm=True, head_dim=16, norm_eps=1e-6),
        ),
    }


B, T, PROMPT = 3, 12, 7
# Tokens per call when decoding: the prompt, then the new tokens of each step.
DECODE_STEPS = {
    "7+1+1+1+1+1": [PROMPT] + [1] * (T - PROMPT),
    "7+3+2": [PROMPT, 3, 2],
    "4+6+2": [4, 6, 2],  # a chunk longer than Mistral's window, padding inside it
}


@pytest.fixture(scope="module", params=FAMILY_NAMES)
def pair(request):
    """(config, reference layer, its rotary module, its mask maker, our layer), built
    once per family for the whole module."""
    config, attention_class, rotary_class, make_mask, options = families()[request.param]
    torch.manual_seed(FAMILY_NAMES.index(request.param))
    reference = attention_class(config, layer_idx=0).eval()
    with torch.no_grad():  # norms start at one: make their weights count too
        for name, p in reference.named_parameters():
            p.normal_(1.0 if "norm" in name else 0.0, 0.2)
    ours = ModernAttention(
        config.hidden_size, config.hidden_size, config.max_position_embeddings, 0.0,
        config.num_attention_heads, config.num_key_value_heads,
        rope_base=config.rope_parameters["rope_theta"], **options,
    ).eval()
    ours.load_state_dict(from_hf_state_dict(reference.state_dict()))
    return request.param, config, reference, rotary_class(config), make_mask, ours


def reference_forward(pair, x, attention_mask, cache=None, start=0):
    _, config, reference, rotary, make_mask, _ = pair
    positions = torch.arange(start, start + x.shape[1])[None].expand(x.shape[0], -1)
    mask = make_mask(config=config, inputs_embeds=x, attention_mask=attention_mask,
                     past_key_values=cache, position_ids=positions)
    assert mask is not None  # eager attention needs the causal mask spelled out
    out, _ = reference(x, position_embeddings=rotary(x, positions),
                       attention_mask=mask, past_key_values=cache)
    return out


def inputs(config, seed, padded):
    """x (B, T, hidden_size) and a padding mask: left padding of 0, 4 and PROMPT - 1
    tokens when ``padded``, else all True."""
    x = torch.randn(B, T, config.hidden_size, generator=torch.Generator().manual_seed(seed))
    padding = torch.ones(B, T, dtype=torch.bool)
    if padded:
        padding[1, :4] = False
        padding[2, : PROMPT - 1] = False
    return x, padding


@pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])
@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
def test_prefill_matches(pair, padded, fast_path):
    name, config, *_, ours = pair
    x, padding = inputs(config, 2, padded)
    ours.fast_path = fast_path
    with torch.no_grad():
        expected = reference_forward(pair, x, padding.long())
        got = ours(x, padding if padded else None)
    torch.testing.assert_close(got[padding], expected[padding], **TOL)


@pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])
@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize("sizes", DECODE_STEPS.values(), ids=DECODE_STEPS)
def test_cached_decoding_matches(pair, padded, fast_path, sizes):
    """A prompt, then one or several tokens at a time, each side with its own cache
    (transformers' DynamicCache; ours: KVCache, or RollingKVCache with a window)."""
    name, config, *_, ours = pair
    x, padding = inputs(config, 3, padded)
    ours.fast_path = fast_path
    hf_cache, our_cache = hf().DynamicCache(config=config), ours.make_cache(B)
    ends = torch.tensor(sizes).cumsum(0).tolist()
    steps = list(zip([0, *ends[:-1]], ends))  # (start, end) of each call
    with torch.no_grad():
        for start, end in steps:
            expected = reference_forward(
                pair, x[:, start:end], padding[:, :end].long(), hf_cache, start
            )
            got = ours(x[:, start:end], padding[:, start:end] if padded else None,
                       cache=our_cache)
            real = padding[:, start:end]
            torch.testing.assert_close(got[real], expected[real], **TOL)
    assert our_cache.length == T
    if name == "mistral":  # the rolling cache holds the window, no more
        assert our_cache.keys.shape[2] == config.sliding_window


@pytest.mark.parametrize("pair", ["mistral"], indirect=True)
@pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])
@pytest.mark.parametrize("extra", [-1, 0, 1], ids=["T=window-1", "T=window", "T=window+1"])
def test_prefill_around_the_window_matches(pair, extra, fast_path):
    """No padding, no cache, T up to the window: no key is window or more back, and our
    fast path leaves all masking to the kernel; one token more, and the window hides
    the first key from the last query."""
    _, config, *_, ours = pair
    num_tokens = config.sliding_window + extra
    x, _ = inputs(config, 4, False)
    x = x[:, :num_tokens]
    ours.fast_path = fast_path
    with torch.no_grad():
        expected = reference_forward(pair, x, torch.ones(B, num_tokens, dtype=torch.long))
        got = ours(x)
    torch.testing.assert_close(got, expected, **TOL)


def test_whole_model_state_dict_loads_by_prefix():
    config = hf().Qwen3Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=1,
                              head_dim=16, num_hidden_layers=2, intermediate_size=64,
                              vocab_size=10, **COMMON)
    torch.manual_seed(0)
    model = hf().modeling_qwen3.Qwen3Model(config)
    prefix = "layers.1.self_attn."
    renamed = from_hf_state_dict(model.state_dict(), prefix)
    assert sorted(renamed) == sorted(
        f"{ours}.weight" for ours in ("W_query", "W_key", "W_value", "out_proj",
                                      "q_norm", "k_norm")
    )
    layer = model.layers[1].self_attn
    assert torch.equal(renamed["W_key.weight"], layer.k_proj.weight)
    assert torch.equal(renamed["k_norm.weight"], layer.k_norm.weight)
    ours = ModernAttention(32, 32, 32, 0.0, 4, 1, head_dim=16, qk_norm=True)
    ours.load_state_dict(renamed)  # strict: every name and shape fits


def test_from_hf_state_dict_errors():
    with pytest.raises(TypeError, match="state_dict must be a dict"):
        from_hf_state_dict([("q_proj.weight", torch.zeros(1))])
    with pytest.raises(ValueError, match="'mlp.up_proj.weight' is not a weight of an attention layer"):
        from_hf_state_dict({"mlp.up_proj.weight": torch.zeros(1)})
    with pytest.raises(ValueError, match="no key starting with prefix 'layers.9.'"):
        from_hf_state_dict({"q_proj.weight": torch.zeros(1)}, "layers.9.")
