"""GatedDeltaNet and KimiDeltaAttention against transformers' ``Qwen3NextGatedDeltaNet``,
``Qwen3_5GatedDeltaNet`` and ``KimiLinearDeltaAttention``, on their pure-torch paths.

Tiny random configs from transformers' own config classes, weights drawn wide, float32,
``atol = rtol = 1e-5``; nothing downloaded (HF_HUB_OFFLINE=1). Ours reads chunks of 5 tokens,
transformers chunks of 64, so the chunking itself is under test. The cases: prefill unpadded and
left-padded in both forms; cached decoding of a left-padded prompt against transformers' own
cache of the hybrid model (a prompt then single tokens; chunks), with the two caches' states
compared too; the rule functions against transformers' ``torch_chunk_gated_delta_rule``,
``torch_recurrent_gated_delta_rule``, ``chunk_kimi_delta_attention`` and
``recurrent_kimi_delta_attention``.
"""

from __future__ import annotations

import copy
import os
import pathlib

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported

import pytest  # noqa: E402
import torch  # noqa: E402

from llm_attention.delta_rule import chunked, recurrent  # noqa: E402
from llm_attention_site.linear_parity import (  # noqa: E402
    DECODE_STEPS, FAMILIES, build, decode, hf, inputs, max_differences, reference_forward,
)

pytestmark = pytest.mark.xdist_group(  # the worker that has transformers imported already
    (pathlib.Path(__file__).resolve().parents[1] / "docs" / "modern" / "combined.md").as_posix()
)
TOL = dict(atol=1e-5, rtol=1e-5)


@pytest.fixture(params=FAMILIES)
def built(request):
    pytest.importorskip("transformers")
    return build(request.param)


@pytest.mark.parametrize("form", ["chunked", "recurrent"])
@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "left-padded"])
def test_prefill_matches(built, padded, form):
    config, _, ours = built
    x, padding = inputs(config, 2, padded)
    ours.form = form
    with torch.no_grad():
        expected = reference_forward(built, x, padding if padded else None)
        got = ours(x, padding if padded else None)
    ours.form = "chunked"
    assert expected.abs().max() > 0.5  # outputs large enough for the tolerance to mean it
    torch.testing.assert_close(got[padding], expected[padding], **TOL)


@pytest.mark.parametrize("sizes", DECODE_STEPS.values(), ids=DECODE_STEPS)
def test_cached_decoding_matches_with_their_cache(built, sizes):
    config, reference, ours = built
    steps, our_cache, hf_cache = decode(built, sizes, True)
    for got, expected, real in steps:
        torch.testing.assert_close(got[real], expected[real], **TOL)
    layer = hf_cache.layers[0]
    torch.testing.assert_close(our_cache.state, layer.recurrent_states[0], **TOL)
    kernel = ours.conv.kernel_size[0]  # transformers keeps K inputs, we keep the K - 1 used
    torch.testing.assert_close(our_cache.conv_window, layer.conv_states[0][..., 1:], **TOL)
    assert layer.conv_states[0].shape[-1] == kernel
    assert our_cache.length == sum(sizes)


def test_transformers_keeps_the_state_in_float32_under_bfloat16_weights():
    """What the page's table assumes: the window in the model's dtype, the state in
    float32 (ours does the same)."""
    pytest.importorskip("transformers")
    config, reference, ours = build("qwen3_5")
    half = hf().modeling_qwen3_5.Qwen3_5GatedDeltaNet(config, 0).to(torch.bfloat16).eval()
    cache = hf().DynamicCache(config=config)
    with torch.no_grad():
        half(torch.randn(1, 4, config.hidden_size, dtype=torch.bfloat16), cache_params=cache)
    layer = cache.layers[0]
    assert layer.conv_states[0].dtype == torch.bfloat16
    assert layer.recurrent_states[0].dtype == torch.float32
    ours_cache = copy.deepcopy(ours).to(torch.bfloat16).make_cache(1)  # not the shared one
    assert ours_cache.conv_window.dtype == torch.bfloat16
    assert ours_cache.state.dtype == torch.float32


@pytest.mark.parametrize("family", ["qwen3_next", "kimi_linear"])
def test_the_rule_matches_transformers_functions(family):
    pytest.importorskip("transformers")
    t = hf()
    if family == "qwen3_next":
        module = t.modeling_qwen3_next
        functions = (module.torch_chunk_gated_delta_rule, module.torch_recurrent_gated_delta_rule)
    else:
        module = t.modeling_kimi_linear
        functions = (module.chunk_kimi_delta_attention, module.recurrent_kimi_delta_attention)
    gen = torch.Generator().manual_seed(0)
    b, h, n, d_k, d_v = 2, 4, 70, 16, 12  # two of transformers' chunks, the second short
    q, k = torch.randn(b, h, n, d_k, generator=gen), torch.randn(b, h, n, d_k, generator=gen)
    v = torch.randn(b, h, n, d_v, generator=gen)
    per_channel = family == "kimi_linear"
    g = -torch.rand((b, h, n, d_k) if per_channel else (b, h, n), generator=gen)
    beta = torch.rand(b, h, n, generator=gen)
    state = torch.randn(b, h, d_k, d_v, generator=gen)
    qn, kn = (torch.nn.functional.normalize(x, dim=-1, eps=0.0) for x in (q, k))
    want_c, want_r = [], []
    for form in (lambda *a: chunked(*a, chunk_size=16), recurrent):
        out, final = form(qn * d_k**-0.5, kn, v, g, beta, state)
        want_c.append(out), want_r.append(final)
    seq = [x.transpose(1, 2) for x in (q, k, v, g, beta)]  # theirs: (B, T, H, ...)
    for function, want, final in zip(functions, want_c, want_r):
        out, their_final = function(*seq[:3], g=seq[3], beta=seq[4], initial_state=state,
                                    output_final_state=True, use_qk_l2norm_in_kernel=True)
        torch.testing.assert_close(out.transpose(1, 2), want, **TOL)
        torch.testing.assert_close(their_final, final, **TOL)


def test_max_differences_cover_every_case():
    pytest.importorskip("transformers")
    found = max_differences("qwen3_5")
    assert len(found) == 4 and max(found.values()) <= 1e-5
    assert {"prefill, left-padded (recurrent)", "cached decoding, padded, 4+6+2"} <= set(found)
