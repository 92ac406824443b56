"""generate: a naive loop written here, cached against uncached (tokens and logits), sampling, errors."""

from __future__ import annotations

import re

import pytest
import torch

from llm_attention.generate import generate, new_caches
from llm_attention.gpt import GPTModel

PATHS = pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])


def fresh(fast_path=True, dtype=torch.float32, seed=0):
    torch.manual_seed(seed)
    return GPTModel(30, 24, 32, 4, 2, fast_path=fast_path).to(dtype).eval()


def prompt(batch=3, num_tokens=6):
    tokens = torch.randint(0, 30, (batch, num_tokens), generator=torch.Generator().manual_seed(2))
    padding_mask = torch.ones(batch, num_tokens, dtype=torch.bool)
    padding_mask[0, :2] = False  # the first prompt is 4 tokens, left-padded
    return tokens, padding_mask


def test_greedy_equals_a_loop_written_out():
    model = fresh()
    tokens, _ = prompt()
    got, logits = generate(model, tokens, 5, use_cache=False)
    sequence = tokens
    with torch.no_grad():
        for step in range(5):
            last = model(sequence)[:, -1]
            torch.testing.assert_close(logits[:, step], last, atol=0, rtol=0)
            sequence = torch.cat([sequence, last.argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(got, sequence)
    assert logits.shape == (3, 5, 30)


@PATHS
# bound = atol + eps_factor * eps(dtype) * max|logit|: an ulp or two of bfloat16 (eps = 2**-7),
# where cached and uncached matmuls of other shapes round apart. Measured (max|logit| = 2.06,
# bound 0.0322): 0.0 explicit, 0.0039 = 0.24 eps * max fast (0.49 with ATEN_CPU_CAPABILITY=avx2);
# over seeds 0-29 at most 0.62 eps * max. The old 5e-2 was 3.1 eps * max.
@pytest.mark.parametrize("dtype, atol, eps_factor", [(torch.float32, 1e-5, 0), (torch.bfloat16, 0.0, 2)], ids=["f32", "bf16"])
def test_cached_generation_gives_the_uncached_tokens_and_logits(fast_path, dtype, atol, eps_factor):
    model = fresh(fast_path, dtype)
    tokens, padding_mask = prompt()
    slow, slow_logits = generate(model, tokens, 12, padding_mask=padding_mask, use_cache=False)
    fast, fast_logits = generate(model, tokens, 12, padding_mask=padding_mask, use_cache=True)
    assert torch.equal(fast, slow)
    atol += eps_factor * torch.finfo(dtype).eps * slow_logits.abs().max().item()
    torch.testing.assert_close(fast_logits, slow_logits, atol=atol, rtol=0)


@PATHS
def test_what_sits_in_padded_slots_changes_nothing(fast_path):
    model = fresh(fast_path)
    tokens, padding_mask = prompt()
    changed = tokens.clone()
    changed[0, :2] = (tokens[0, :2] + 7) % 30  # other ids in the padded slots
    for use_cache in (False, True):
        first, logits_first = generate(model, tokens, 6, padding_mask=padding_mask, use_cache=use_cache)
        again, logits_again = generate(model, changed, 6, padding_mask=padding_mask, use_cache=use_cache)
        assert torch.equal(again[:, 2:], first[:, 2:])
        torch.testing.assert_close(logits_again, logits_first, atol=1e-5, rtol=0)
    _, unpadded_logits = generate(model, changed, 6)  # ...while without the mask they count
    assert not torch.allclose(unpadded_logits[0], logits_first[0], atol=1e-3)


@PATHS
@pytest.mark.parametrize("use_cache", [False, True], ids=["uncached", "cached"])
def test_a_left_padded_prompt_continues_as_it_would_alone(fast_path, use_cache):
    """Positions count from each row's first real token: however many pads come first, a
    prompt generates the same tokens, with the same logits, as it does alone."""
    model = fresh(fast_path)
    tokens = torch.randint(1, 30, (3, 5), generator=torch.Generator().manual_seed(5))
    alone = [generate(model, tokens[row : row + 1], 7, use_cache=use_cache) for row in range(3)]
    for pads in (1, 2, 4):
        batch = torch.cat([torch.zeros(3, pads, dtype=torch.long), tokens], dim=1)  # (3, pads + 5)
        padding_mask = torch.ones_like(batch, dtype=torch.bool)
        padding_mask[:, :pads] = False
        got, logits = generate(model, batch, 7, padding_mask=padding_mask, use_cache=use_cache)
        for row, (want, want_logits) in enumerate(alone):
            assert torch.equal(got[row : row + 1, pads:], want), (pads, row)
            torch.testing.assert_close(logits[row : row + 1], want_logits, atol=1e-5, rtol=0)


def test_rows_padded_differently_each_continue_as_alone():
    model = fresh()
    prompts = [torch.randint(1, 30, (1, n), generator=torch.Generator().manual_seed(n)) for n in (2, 5, 3)]
    width = 5
    batch = torch.zeros(3, width, dtype=torch.long)
    padding_mask = torch.zeros(3, width, dtype=torch.bool)
    for row, one in enumerate(prompts):
        batch[row, width - one.shape[1] :] = one[0]
        padding_mask[row, width - one.shape[1] :] = True
    got, logits = generate(model, batch, 6, padding_mask=padding_mask)
    for row, one in enumerate(prompts):
        want, want_logits = generate(model, one, 6)
        assert torch.equal(got[row, width - one.shape[1] :], want[0])
        torch.testing.assert_close(logits[row], want_logits[0], atol=1e-5, rtol=0)


@PATHS
def test_sampling_is_reproducible_and_the_same_with_or_without_cache(fast_path):
    model = fresh(fast_path)
    tokens, _ = prompt()
    runs = [
        generate(model, tokens, 10, temperature=1.5, generator=torch.Generator().manual_seed(4), use_cache=cached)[0]
        for cached in (True, True, False)
    ]
    assert torch.equal(runs[0], runs[1]) and torch.equal(runs[0], runs[2])
    greedy, _ = generate(model, tokens, 10)
    assert not torch.equal(runs[0], greedy)  # a hot temperature leaves the greedy path
    top1, _ = generate(model, tokens, 10, temperature=1.0, top_k=1, generator=torch.Generator().manual_seed(4))
    assert torch.equal(top1, greedy)


def test_top_k_only_draws_from_the_k_most_likely():
    model = fresh()
    tokens, _ = prompt(batch=1)
    out, logits = generate(model, tokens, 10, temperature=5.0, top_k=3, generator=torch.Generator().manual_seed(0))
    top3 = logits.topk(3, dim=-1).indices  # (1, 10, 3)
    assert (top3 == out[:, 6:, None]).any(-1).all()


def test_new_caches_fit_the_model():
    model = fresh().to(torch.bfloat16)
    caches = new_caches(model, 5)
    assert len(caches) == 2
    assert caches[0].keys.shape == (5, 4, 24, 8) and caches[0].keys.dtype == torch.bfloat16
    with pytest.raises(TypeError, match="model must be a GPTModel, got Linear"):
        new_caches(torch.nn.Linear(2, 2), 1)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"model": torch.nn.Linear(2, 2)}, TypeError, "model must be a GPTModel, got Linear"),
        ({"tokens": torch.zeros(4, dtype=torch.long)}, ValueError, "tokens must be a (B, T) tensor of ids, got (4,)"),
        ({"max_new_tokens": 0}, ValueError, "max_new_tokens must be at least 1, got 0"),
        ({"max_new_tokens": 2.0}, TypeError, "max_new_tokens must be an int, got 2.0"),
        ({"max_new_tokens": 19}, ValueError, "6 prompt tokens + max_new_tokens=19 = 25, more than the model's context_length=24"),
        ({"temperature": -1.0}, ValueError, "temperature must be >= 0 (0 = greedy), got -1.0"),
        ({"temperature": "hot"}, TypeError, "temperature must be a float >= 0, got 'hot'"),
        ({"top_k": 0}, ValueError, "top_k must be None or a positive int, got 0"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, message):
    tokens, _ = prompt()
    arguments = {"model": fresh(), "tokens": tokens, "max_new_tokens": 3} | kwargs
    with pytest.raises(error, match=re.escape(message)):
        generate(**arguments)
