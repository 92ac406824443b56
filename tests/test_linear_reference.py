"""GatedDeltaNet and KimiDeltaAttention against transformers' ``Qwen3NextGatedDeltaNet``,
``Qwen3_5GatedDeltaNet`` and ``KimiLinearDeltaAttention``, on their pure-torch paths, beyond the
parity harness (``tests/test_parity.py`` proves every layer of the tiny hybrids of the family
table): the states our cache holds after decoding equal those of transformers' cache; the state
is kept in float32 under bfloat16 weights, on both sides; the rule functions equal
transformers' ``torch_chunk_gated_delta_rule``, ``torch_recurrent_gated_delta_rule``,
``chunk_kimi_delta_attention`` and ``recurrent_kimi_delta_attention``.
"""

from __future__ import annotations

import copy
import os
import pathlib

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported

import pytest  # noqa: E402
import torch  # noqa: E402

from llm_attention.delta_rule import chunked, recurrent  # noqa: E402
from llm_attention.linear_attention import GatedDeltaNet, KimiDeltaAttention  # noqa: E402
from llm_attention_site import parity  # noqa: E402

pytestmark = pytest.mark.xdist_group(  # the worker of the page that shows these families
    (pathlib.Path(__file__).resolve().parents[1] / "docs" / "modern" / "linear-attention.md").as_posix()
)
TOL = dict(atol=1e-5, rtol=1e-5)
HYBRIDS = ("qwen3_next", "qwen3_5", "kimi_linear")


@pytest.mark.parametrize("split", ["7+1+1+1+1+1", "4+6+2"])
@pytest.mark.parametrize("key", HYBRIDS)
def test_the_states_after_decoding_equal_transformers(key, split):
    """Each linear layer's state and convolution window, after decoding the padded batch
    with each side's own cache."""
    calls = parity.reference_run(key, None, split, True)
    real = parity.real_tokens(True)
    checked = 0
    for layer, name in parity.mixers(key):
        ours = parity.ours(key, None, layer, name)
        if not isinstance(ours, (GatedDeltaNet, KimiDeltaAttention)):
            continue
        cache = ours.make_cache(parity.B)
        with torch.no_grad():
            for (start, end), call in zip(parity.bounds(split), calls):
                ours(call[layer, name]["input"], real[:, start:end], cache=cache)
        theirs = calls.cache.layers[layer]
        torch.testing.assert_close(cache.state, theirs.recurrent_states[0], **TOL)
        kernel = ours.conv.kernel_size[0]  # transformers keeps K inputs, we keep the K - 1
        assert theirs.conv_states[0].shape[-1] == kernel
        torch.testing.assert_close(cache.conv_window, theirs.conv_states[0][..., 1:], **TOL)
        assert cache.length == parity.T
        checked += 1
    assert checked >= 2


def test_transformers_keeps_the_state_in_float32_under_bfloat16_weights():
    """What the page's table assumes: the window in the model's dtype, the state in
    float32 (ours does the same)."""
    from transformers import DynamicCache
    from transformers.models.qwen3_5 import modeling_qwen3_5

    config, _ = parity.model("qwen3_5")
    ours = parity.ours("qwen3_5", None, 0, "linear_attn")
    half = modeling_qwen3_5.Qwen3_5GatedDeltaNet(config, 0).to(torch.bfloat16).eval()
    cache = DynamicCache(config=config)
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
    from transformers.models.kimi_linear import modeling_kimi_linear
    from transformers.models.qwen3_next import modeling_qwen3_next

    if family == "qwen3_next":
        module = modeling_qwen3_next
        functions = (module.torch_chunk_gated_delta_rule, module.torch_recurrent_gated_delta_rule)
    else:
        module = modeling_kimi_linear
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
