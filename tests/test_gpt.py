"""GPTModel: causality, both paths, caches, recorded weights against a by-hand softmax, ablation, errors."""

from __future__ import annotations

import re

import pytest
import torch

from llm_attention.generate import new_caches
from llm_attention.gpt import GPTModel

PATHS = pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])


def fresh(fast_path=True, seed=0, **kwargs):
    torch.manual_seed(seed)
    sizes = dict(vocab_size=20, context_length=16, emb_dim=24, num_heads=3, num_layers=2)
    return GPTModel(**(sizes | kwargs), fast_path=fast_path).eval()


def tokens(batch=2, num_tokens=9, seed=1):
    return torch.randint(0, 20, (batch, num_tokens), generator=torch.Generator().manual_seed(seed))


@PATHS
def test_logits_shape_and_a_later_token_changes_no_earlier_logit(fast_path):
    model = fresh(fast_path)
    x = tokens()
    changed = x.clone()
    changed[:, 5:] = (x[:, 5:] + 1) % 20
    with torch.no_grad():
        before, after = model(x), model(changed)
    assert before.shape == (2, 9, 20)
    torch.testing.assert_close(after[:, :5], before[:, :5], atol=0, rtol=0)
    assert (after[:, 5:] - before[:, 5:]).abs().amax() > 1e-3


def test_explicit_and_fast_paths_share_weights_and_logits():
    explicit, fast = fresh(False), fresh(True, seed=9)
    fast.load_state_dict(explicit.state_dict())
    x = tokens()
    with torch.no_grad():
        torch.testing.assert_close(fast(x), explicit(x), atol=1e-5, rtol=0)


@PATHS
# bound = atol + eps_factor * eps(dtype) * max|logit|: an ulp or two of bfloat16 (eps = 2**-7),
# where cached and uncached matmuls of other shapes round apart. Measured: 0.0 on both paths
# (max|logit| = 1.80, bound 0.0281); over seeds 0-29 at most 0.86 eps * max, with
# ATEN_CPU_CAPABILITY=avx2 (0 with AVX512). The old 5e-2 was 3.5 eps * max.
@pytest.mark.parametrize("dtype, atol, eps_factor", [(torch.float32, 1e-5, 0), (torch.bfloat16, 0.0, 2)], ids=["f32", "bf16"])
def test_caches_prefill_then_decode_equals_one_pass(fast_path, dtype, atol, eps_factor):
    model = fresh(fast_path).to(dtype)
    x = tokens(num_tokens=10)
    padding_mask = torch.ones(2, 10, dtype=torch.bool)
    padding_mask[1, :4] = False  # left-padded second prompt
    caches = new_caches(model, 2)
    with torch.no_grad():
        expected = model(x, padding_mask)
        parts = [model(x[:, :6], padding_mask[:, :6], caches=caches)]
        parts += [model(x[:, t : t + 1], caches=caches) for t in range(6, 10)]
    assert [cache.length for cache in caches] == [10, 10]
    got = torch.cat(parts, dim=1)
    atol += eps_factor * torch.finfo(dtype).eps * expected[padding_mask].abs().max().item()
    torch.testing.assert_close(got[padding_mask], expected[padding_mask], atol=atol, rtol=0)


def by_hand_first_layer_weights(model, x):
    """Layer 0's attention weights from its parameters, written out independently."""
    block = model.trf_blocks[0]
    h = block.norm1(model.tok_emb(x) + model.pos_emb.weight[: x.shape[1]])
    q = h @ block.att.W_query.weight.T
    k = h @ block.att.W_key.weight.T
    b, t, d = q.shape
    heads = block.att.num_heads
    q = q.reshape(b, t, heads, d // heads).permute(0, 2, 1, 3)
    k = k.reshape(b, t, heads, d // heads).permute(0, 2, 1, 3)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / (d // heads) ** 0.5
    future = torch.ones(t, t).triu(1).bool()
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)


@PATHS
def test_record_attention_keeps_the_weights_and_restores_the_path(fast_path):
    model = fresh(fast_path)
    x = tokens()
    with torch.no_grad():
        plain = model(x)
        with model.record_attention() as weights:
            recorded_logits = model(x)
        expected = by_hand_first_layer_weights(model, x)
    assert [w.shape for w in weights] == [(2, 3, 9, 9)] * 2
    torch.testing.assert_close(weights[0], expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(weights[1].sum(-1), torch.ones(2, 3, 9), atol=1e-5, rtol=0)
    assert weights[1].triu(1).abs().max() == 0  # no weight on the future
    torch.testing.assert_close(recorded_logits, plain, atol=1e-5, rtol=0)
    assert all(block.att.fast_path == fast_path for block in model.trf_blocks)
    with torch.no_grad():
        model(x)
    assert len(weights) == 2  # nothing is recorded after the with block


@PATHS
def test_ablating_a_head_equals_zeroing_its_columns_of_out_proj(fast_path):
    model = fresh(fast_path)
    x = tokens()
    with torch.no_grad():
        with model.ablate([(1, 2), (0, 0)]):
            ablated = model(x)
        plain = model(x)
        surgery = fresh(fast_path)
        surgery.load_state_dict(model.state_dict())
        d_h = surgery.trf_blocks[0].att.head_dim
        surgery.trf_blocks[1].att.out_proj.weight[:, 2 * d_h : 3 * d_h] = 0.0
        surgery.trf_blocks[0].att.out_proj.weight[:, 0:d_h] = 0.0
        expected = surgery(x)
    torch.testing.assert_close(ablated, expected, atol=1e-5, rtol=0)
    assert (ablated - plain).abs().max() > 1e-3
    with torch.no_grad():
        torch.testing.assert_close(model(x), plain, atol=0, rtol=0)  # hooks removed


BAD_INPUTS = [
    (lambda: [[1, 2]], {}, TypeError, "tokens must be a torch.long tensor (B, T), got list"),
    (lambda: torch.ones(1, 3), {}, TypeError, "tokens must be a torch.long tensor (B, T), got torch.float32"),
    (lambda: torch.ones(3, dtype=torch.long), {}, ValueError, "tokens must have shape (B, T) with B, T >= 1, got (3,)"),
    (lambda: torch.ones(1, 0, dtype=torch.long), {}, ValueError, "got (1, 0)"),
    (lambda: torch.tensor([[0, 20]]), {}, ValueError, "tokens must be ids in [0, 20), got values from 0 to 20"),
    (lambda: torch.tensor([[-1, 2]]), {}, ValueError, "got values from -1 to 2"),
    (lambda: torch.zeros(1, 17, dtype=torch.long), {}, ValueError, "positions 0..16 do not fit context_length=16"),
    (lambda: torch.zeros(1, 2, dtype=torch.long), {"caches": []}, ValueError, "caches must be a list of 2 KVCache"),
    (lambda: torch.zeros(1, 2, dtype=torch.long), {"padding_mask": torch.ones(1, 2)}, TypeError,
     "padding_mask must be a torch.bool tensor (B, T), got torch.float32"),
    (lambda: torch.zeros(1, 2, dtype=torch.long), {"padding_mask": torch.ones(1, 3, dtype=torch.bool)}, ValueError,
     "padding_mask must have the shape of tokens (1, 2), got (1, 3)"),
]  # fmt: skip


@pytest.mark.parametrize("make_tokens, kwargs, error, message", BAD_INPUTS)
def test_bad_inputs_are_named(make_tokens, kwargs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        fresh()(make_tokens(), **kwargs)


def test_positions_past_the_context_with_caches():
    model = fresh()
    caches = new_caches(model, 1)
    with torch.no_grad():
        model(torch.zeros(1, 15, dtype=torch.long), caches=caches)
        with pytest.raises(ValueError, match=re.escape("positions 15..16 do not fit context_length=16")):
            model(torch.zeros(1, 2, dtype=torch.long), caches=caches)


@pytest.mark.parametrize(
    "heads, error, message",
    [
        ([(2, 0)], ValueError, "(2, 0) is not a (layer, head) of this model, which has 2 layers of 3 heads"),
        ([(0, 3)], ValueError, "(0, 3) is not a (layer, head)"),
        ([1], TypeError, "heads must hold (layer, head) int pairs, got 1"),
    ],
)
def test_bad_heads_to_ablate(heads, error, message):
    with pytest.raises(error, match=re.escape(message)):
        with fresh().ablate(heads):
            pass


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"vocab_size": 0}, ValueError, "vocab_size must be a positive int, got 0"),
        ({"num_layers": 1.5}, TypeError, "num_layers must be a positive int, got 1.5"),
        ({"num_heads": 5}, ValueError, "num_heads must divide d_out"),
    ],
)
def test_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        fresh(**kwargs)
