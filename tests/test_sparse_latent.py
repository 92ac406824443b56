"""SparseLatentAttention and its lightning indexer on their own: the indexer's scores are the
formula, the top-k keeps what it should, the gathered form equals the masked one (prefill with
and without padding, cached decoding, gradients) while the selection changes the output, the
cache holds what it says, DeepSeek-V3.2's published sizes build, and bad input is refused by
name."""

from __future__ import annotations

import math

import pytest
import torch

from llm_attention.hf_config import latent_attention_options, sparse_latent_attention_options
from llm_attention import sparse_latent
from llm_attention.hf_layers import layer_from_hf
from llm_attention.kv_sharing import SharedTopK
from llm_attention.latent import LatentAttention, LatentCache
from llm_attention.lightning_indexer import LightningIndexer, top_k_keys
from llm_attention.sparse_latent import (
    SparseLatentAttention,
    SparseLatentCache,
    chosen_keys,
    from_hf_state_dict,
)
from llm_attention_site.sparse_costs import DEEPSEEK_V32
from tests.decode_checks import one_pass_last, sdpa_masks, step_after_prompt

SMALL = dict(kv_lora_rank=12, qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=5,
             q_lora_rank=10, index_n_heads=3, index_head_dim=8)
# (gathered, absorb, fast_path)
FORMS = [(False, a, f) for a in (False, True) for f in (False, True)] + [
    (True, False, False), (True, False, True)]
T = 11


def small(index_topk=3, **options):
    torch.manual_seed(0)
    layer = SparseLatentAttention(16, 16, 32, 0.0, 4, index_topk=index_topk, bias=True,
                                  **{**SMALL, **options}).eval()
    with torch.no_grad():  # norms off their starting values, so that a missing one shows
        layer.latent_norm.weight.uniform_(0.5, 1.5)
        layer.indexer.key_norm.weight.uniform_(0.5, 1.5)
        layer.indexer.key_norm.bias.normal_(0.0, 0.3)
    return layer


def inputs(seed=1):
    x = torch.randn(2, T, 16, generator=torch.Generator().manual_seed(seed))
    padding = torch.ones(2, T, dtype=torch.bool)
    padding[1, :4] = False
    return x, padding


def run_form(layer, form, x, padding, prompt=5):
    """Prefill of the whole sequence, and the same through the cache: a prompt, then one
    token at a time."""
    layer.gathered, layer.absorb, layer.fast_path = form
    with torch.no_grad():
        whole = layer(x, padding)
        cache = layer.make_cache(2)
        steps = [layer(x[:, :prompt], padding[:, :prompt], cache=cache)]
        steps += [layer(x[:, t : t + 1], padding[:, t : t + 1], cache=cache)
                  for t in range(prompt, T)]
    layer.gathered, layer.absorb, layer.fast_path = False, False, False
    return whole, torch.cat(steps, dim=1)


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
def test_every_form_gives_the_same_output_and_the_selection_matters(padded):
    layer = small()
    x, padding = inputs()
    if not padded:
        padding = torch.ones_like(padding)
    reference, _ = run_form(layer, FORMS[0], x, padding)
    for form in FORMS:
        whole, decoded = run_form(layer, form, x, padding)
        for name, got in (("prefill", whole), ("cached", decoded)):
            torch.testing.assert_close(got[padding], reference[padding], atol=1e-5, rtol=1e-5,
                                       msg=lambda m: f"{form} {name}: {m}")
    with torch.no_grad():  # the same weights, every earlier token attended to
        dense = LatentAttention.forward(layer, x, padding)
    assert (dense[padding] - reference[padding]).abs().max() > 1e-2


def test_keeping_at_least_every_token_is_dense_latent_attention():
    layer = small(index_topk=T)
    x, padding = inputs()
    with torch.no_grad():
        dense = LatentAttention.forward(layer, x, padding)
        for gathered in (False, True):
            layer.gathered = gathered
            torch.testing.assert_close(layer(x, padding)[padding], dense[padding],
                                       atol=1e-5, rtol=1e-5)


def test_indexer_scores_are_the_formula():
    """I_{t,s} = sum_j w_{t,j} ReLU(q_{t,j} . k_s / sqrt(d_I)), written as loops, with the first
    rope_dim numbers of every query and key turned as halves."""
    layer = small()
    indexer = layer.indexer
    x, _ = inputs()
    x = x[:1, :6]
    query_latent = torch.randn(1, 6, 10, generator=torch.Generator().manual_seed(5))
    cos, sin = layer.rope.cos, layer.rope.sin
    with torch.no_grad():
        keys = indexer.keys(x, cos, sin, 0)
        got = indexer.scores(x, query_latent, keys, cos, sin, 0)  # (1, 6, 6)
        d_r, heads, width = indexer.rope_dim, indexer.num_heads, indexer.head_dim
        expected = torch.zeros(6, 6)
        for t in range(6):
            w = indexer.W_head_weights(x[0, t]) / math.sqrt(heads)
            q = indexer.W_query(query_latent[0, t]).view(heads, width)
            for s in range(6):
                k = torch.nn.functional.layer_norm(
                    indexer.W_key(x[0, s]), (width,), indexer.key_norm.weight,
                    indexer.key_norm.bias, 1e-6)
                k = torch.cat((turn(k[:d_r], s), k[d_r:]))
                for j in range(heads):
                    qj = torch.cat((turn(q[j, :d_r], t), q[j, d_r:]))
                    expected[t, s] += w[j] * torch.relu(qj @ k / math.sqrt(width))
    torch.testing.assert_close(got[0], expected, atol=1e-5, rtol=1e-5)
    assert (expected != 0).any() and (expected < 0).any()  # weights may be negative


def turn(v, position, base=10000.0):
    """Pairs (i, i + d/2) of ``v`` turned by position * base ** (-2i / d)."""
    half = v.shape[0] // 2
    out = v.clone()
    for i in range(half):
        angle = position * base ** (-2 * i / v.shape[0])
        out[i] = v[i] * math.cos(angle) - v[i + half] * math.sin(angle)
        out[i + half] = v[i] * math.sin(angle) + v[i + half] * math.cos(angle)
    return out


def test_top_k_keeps_the_largest_visible_scores():
    scores = torch.tensor([[[5.0, 1.0, 4.0, 9.0], [0.5, 3.0, 2.0, 9.0]]])  # (1, 2, 4)
    hidden = torch.tensor([[False, False, False, True], [False, False, False, True]])
    chosen = top_k_keys(scores, hidden, 2)
    assert [sorted(row) for row in chosen[0].tolist()] == [[0, 2], [1, 2]]  # 9 is hidden
    every = top_k_keys(scores, hidden, 10)  # k beyond the keys: all of them, hidden too
    assert every.shape == (1, 2, 4)
    mask = chosen_keys(chosen, 4)
    assert mask.shape == (1, 1, 2, 4) and mask.sum() == 4
    assert mask[0, 0, 0].tolist() == [True, False, True, False]


def test_gradients_of_both_forms_agree_and_skip_the_indexer():
    layer = small()
    layer.train()
    x, padding = inputs(2)
    grads = []
    for gathered in (False, True):
        layer.zero_grad(set_to_none=True)
        layer.gathered = gathered
        layer(x, padding)[padding].square().sum().backward()
        grads.append({n: p.grad for n, p in layer.named_parameters()})
    for name, grad in grads[0].items():
        if name.startswith("indexer."):  # the selection is not differentiable
            assert grad is None and grads[1][name] is None, name
        else:
            torch.testing.assert_close(grads[1][name], grad, atol=1e-5, rtol=1e-4,
                                       msg=lambda m: f"{name}: {m}")


def test_the_cache_holds_latents_and_indexer_keys():
    layer = small()
    cache = layer.make_cache(3)
    assert isinstance(cache, SparseLatentCache)
    assert cache.nbytes == 3 * 32 * (12 + 4 + 8) * 4  # d_c + d_r + d_I per token, float32
    entries, keys, padding = cache.append(torch.randn(3, 2, 12), torch.randn(3, 2, 4),
                                          torch.randn(3, 2, 8))
    assert entries.shape == (3, 2, 16) and keys.shape == (3, 2, 8) and padding.shape == (3, 2)
    assert keys.data_ptr() == cache.index_keys.data_ptr() and cache.length == 2  # a view
    with pytest.raises(ValueError, match=r"index_key must be a tensor of shape \(B=3, T_new=1, "
                                         r"d_I=8\), got torch.Size\(\[3, 1, 7\]\)"):
        cache.append(torch.randn(3, 1, 12), torch.randn(3, 1, 4), torch.randn(3, 1, 7))
    with pytest.raises(TypeError, match="index_key must be torch.float32 like the cache"):
        cache.append(torch.randn(3, 1, 12), torch.randn(3, 1, 4),
                     torch.randn(3, 1, 8, dtype=torch.float64))
    assert cache.length == 2  # a refused append stores nothing
    cache.reset()
    assert cache.length == 0


def test_deepseek_v32_published_config():
    """One layer of DeepSeek-V3.2 as published, on the meta device (201 M weights): its
    sizes, and a cache of 512 + 64 + 128 numbers per token."""
    _, config = DEEPSEEK_V32
    with torch.device("meta"):
        layer = SparseLatentAttention.from_hf_config(config, 60, context_length=8)
    assert (layer.index_topk, layer.indexer.num_heads, layer.indexer.head_dim) == (2048, 64, 128)
    assert layer.indexer.W_query.weight.shape == (64 * 128, 1536)
    assert layer.indexer.W_key.weight.shape == (128, 7168)
    assert layer.indexer.W_head_weights.weight.shape == (64, 7168)
    assert layer.indexer.rope_dim == 64
    cache = layer.make_cache(1)
    assert cache.latent.entries.shape[-1] + cache.index_keys.shape[-1] == 576 + 128
    indexer = sum(p.numel() for p in layer.indexer.parameters())
    assert indexer == 1536 * 8192 + 7168 * 128 + 2 * 128 + 7168 * 64
    with torch.device("meta"):  # the one entry point reads the config.json dict alike
        built = layer_from_hf(config, 60, context_length=8)
    assert isinstance(built, SparseLatentAttention) and repr(built) == repr(layer.eval())


def test_the_options_keep_dense_and_sparse_families_apart():
    _, config = DEEPSEEK_V32
    options = sparse_latent_attention_options(config)
    assert (options["index_topk"], options["index_n_heads"]) == (2048, 64)
    # transformers' DeepseekV32Attention pairs neighbours whatever the config.json says
    assert sparse_latent_attention_options({**config, "rope_interleave": False})[
        "rope_interleave"] is True
    with pytest.raises(ValueError, match="'deepseek_v32' attends over the tokens its indexer"):
        latent_attention_options(config)
    with pytest.raises(ValueError, match="'deepseek_v3' has no sparse latent attention"):
        sparse_latent_attention_options({**config, "model_type": "deepseek_v3"})


BAD_ARGUMENTS = [
    (dict(q_lora_rank=None), ValueError, "q_lora_rank must be an int"),
    (dict(index_topk=0), ValueError, "index_topk must be a positive int, got 0"),
    (dict(index_n_heads=1.5), TypeError, "num_heads must be a positive int, got 1.5"),
    (dict(index_head_dim=2), ValueError,
     "index_head_dim must be at least qk_rope_head_dim=4 .*got 2"),
    (dict(gathered="yes"), TypeError, "gathered must be True or False"),
    (dict(absorb=1), TypeError, "absorb must be True or False"),
]


@pytest.mark.parametrize("change, error, message", BAD_ARGUMENTS)
def test_bad_arguments_are_named(change, error, message):
    arguments = dict(d_in=16, d_out=16, context_length=8, dropout=0.0, num_heads=4,
                     index_topk=3, **SMALL)
    with pytest.raises(error, match=message):
        SparseLatentAttention(**{**arguments, **change})


def test_bad_inputs_are_named():
    layer = small()
    with pytest.raises(ValueError, match="d_in=16"):
        layer(torch.randn(2, 3, 8))
    with pytest.raises(TypeError, match="cache must be a SparseLatentCache or None, got "
                                        "LatentCache"):
        layer(torch.randn(1, 3, 16), cache=LatentAttention.make_cache(layer, 1))
    full = layer.make_cache(1)
    layer(torch.randn(1, 30, 16), cache=full)
    with pytest.raises(ValueError, match="positions 30..32 go beyond context_length=32"):
        layer(torch.randn(1, 3, 16), cache=full)
    layer.gathered = "yes"
    with pytest.raises(TypeError, match="gathered must be True or False"):
        layer(torch.randn(1, 3, 16))
    with pytest.raises(ValueError, match="not a weight of an indexer"):
        from_hf_state_dict({"q_a_proj.weight": torch.zeros(1),
                            "indexer.wv.weight": torch.zeros(1)})
    with pytest.raises(ValueError, match="rope_dim must be even"):
        LightningIndexer(16, 8, 2, 8, 3)


def test_top_k_keys_refuses_scores_and_masks_that_do_not_fit():
    scores = torch.zeros(2, 3, 5)
    with pytest.raises(TypeError, match="index_scores must be a tensor, got list"):
        top_k_keys([[0.0]], torch.zeros(3, 5, dtype=torch.bool), 2)
    with pytest.raises(ValueError, match=r"index_scores must have shape \(B, T, T_k\), "
                                         r"got \(3, 5\)"):
        top_k_keys(torch.zeros(3, 5), torch.zeros(3, 5, dtype=torch.bool), 2)
    with pytest.raises(ValueError, match=r"mask_bool must be a bool tensor of shape \(3, 5\)"
                                         r" \(T, T_k\) or \(2, 1, 3, 5\) .*got torch.bool "
                                         r"\(3, 4\)"):
        top_k_keys(scores, torch.zeros(3, 4, dtype=torch.bool), 2)
    with pytest.raises(ValueError, match="got torch.float32 \\(3, 5\\)"):  # True = hidden
        top_k_keys(scores, torch.zeros(3, 5), 2)
    assert top_k_keys(scores, torch.zeros(2, 1, 3, 5, dtype=torch.bool), 2).shape == (2, 3, 2)


def test_cost_counts_pairs_as_a_causal_top_k_mask_does():
    """sparse_costs.pairs against the pairs a mask lets through, counted one by one."""
    from llm_attention_site.sparse_costs import pairs

    for num_tokens in (1, 5, 9):
        causal = torch.ones(num_tokens, num_tokens).tril()
        assert pairs(num_tokens) == causal.sum()
        for top_k in (1, 4, 12):
            kept = causal.cumsum(-1).clamp(max=top_k).amax(-1)  # keys per query
            assert pairs(num_tokens, top_k) == kept.sum()


# --- GLM-5: layers that reuse an earlier layer's top-k, and an indexer that pairs neighbours ---

def shared_pair(**options):
    """An indexer layer and a layer that reuses its choice (GLM-5's "full" and "shared")."""
    source = small(**options)
    torch.manual_seed(1)
    reader = SparseLatentAttention(16, 16, 32, 0.0, 4, index_topk=3, bias=True, shared_topk=True,
                                   **{**SMALL, **options}).eval()
    with torch.no_grad():
        reader.latent_norm.weight.uniform_(0.5, 1.5)
    return source, reader


def run_pair(source, reader, x, h, padding, sizes, form=(False, False, False)):
    """The two layers through their caches, ``sizes`` tokens per call, a SharedTopK per call;
    None in ``sizes``: one pass without caches."""
    reader.gathered, reader.absorb, reader.fast_path = form
    caches = [source.make_cache(2), reader.make_cache(2)] if sizes else [None, None]
    outs, start = [], 0
    with torch.no_grad():
        for size in sizes or [T]:
            new = slice(start, start + size)
            picks = SharedTopK()
            source(x[:, new], padding[:, new], cache=caches[0], topk=picks)
            outs.append(reader(h[:, new], padding[:, new], cache=caches[1], topk=picks))
            start += size
    return torch.cat(outs, dim=1), caches


@pytest.mark.parametrize("form", FORMS, ids=[str(f) for f in FORMS])
def test_a_shared_layer_attends_over_its_sources_choice(form, monkeypatch):
    """The reader (fed another input than the source, as the next layer is) equals a layer with
    its own weights and an indexer that chose what the source chose; decoded in 4 + 6 + 1 tokens
    it equals one pass; and the choice matters (dense latent attention lands elsewhere)."""
    source, reader = shared_pair()
    assert reader.indexer is None and isinstance(reader.make_cache(2), LatentCache)
    x, padding = inputs()
    h = torch.randn(2, T, 16, generator=torch.Generator().manual_seed(5))
    whole, _ = run_pair(source, reader, x, h, padding, None, form)
    decoded, caches = run_pair(source, reader, x, h, padding, [4, 6, 1], form)
    torch.testing.assert_close(decoded[padding], whole[padding], atol=1e-5, rtol=1e-5)
    assert caches[1].length == T and not isinstance(caches[1], SparseLatentCache)
    picks = SharedTopK()
    with torch.no_grad():
        source(x, padding, topk=picks)
    twin = small()  # the reader's weights, an indexer of its own whose choice is overridden
    twin.load_state_dict({**twin.state_dict(), **reader.state_dict()})
    monkeypatch.setattr(sparse_latent, "top_k_keys", lambda *args: picks.selected)
    with torch.no_grad():
        torch.testing.assert_close(twin(h, padding)[padding], whole[padding], atol=1e-5, rtol=1e-5)
        dense = LatentAttention.forward(reader, h, padding)
    assert (dense[padding] - whole[padding]).abs().max() > 1e-2


def test_a_shared_layer_refuses_to_run_without_its_sources_choice():
    source, reader = shared_pair()
    x, padding = inputs()
    with pytest.raises(TypeError, match="shared_topk=True .* pass the SharedTopK"):
        reader(x)
    with pytest.raises(ValueError, match="SharedTopK holds nothing yet"):
        reader(x, topk=SharedTopK())
    with pytest.raises(TypeError, match="topk must be a SharedTopK or None, got dict"):
        reader(x, topk={})
    with pytest.raises(TypeError, match="cache must be a LatentCache or None, got SparseLatentCache"):
        reader(x, cache=source.make_cache(2), topk=SharedTopK())
    picks = SharedTopK()
    with torch.no_grad():
        source(x[:, :5], topk=picks)
    with pytest.raises(ValueError, match="chose for 5 tokens from position 0 among 5 keys; this "
                                         "call has 11 tokens"):
        reader(x, topk=picks)
    cache = reader.make_cache(2)  # the reader one token ahead of its source
    with torch.no_grad():
        source(x[:, :1], topk=picks)
        reader(x[:, :1], cache=cache, topk=picks)
        source(x[:, :1], topk=picks)  # the source starts again at position 0
    with pytest.raises(ValueError, match="chose for 1 tokens from position 0 among 1 keys; this "
                                         "call has 1 tokens from position 1 among 2 keys"):
        reader(x[:, 1:2], cache=cache, topk=picks)
    with pytest.raises(ValueError, match=r"selected must be a tensor of shape \(B, T, k\)"):
        picks.record(torch.zeros(2, 3), 0, 3)


def test_an_indexer_that_pairs_neighbours_is_one_that_pairs_halves_reordered():
    """GLM-5's indexer turns (2i, 2i + 1) together; reordering the rows of its query and key
    projections into halves gives DeepSeek-V3.2's indexer the same scores."""
    torch.manual_seed(0)
    neighbours = LightningIndexer(16, 10, 3, 8, 4, rope_interleave=True)
    with torch.no_grad():  # a norm off its starting values, so that its order shows
        neighbours.key_norm.weight.uniform_(0.5, 1.5)
        neighbours.key_norm.bias.normal_()
    halves = LightningIndexer(16, 10, 3, 8, 4)
    order = torch.tensor([0, 2, 1, 3, 4, 5, 6, 7])  # the first 4 dims: neighbours -> halves
    state = {name: tensor[order] for name, tensor in neighbours.state_dict().items()
             if name.startswith(("W_key", "key_norm"))}  # one key: (d_I, ...) rows
    state["W_query.weight"] = neighbours.W_query.weight.view(3, 8, 10)[:, order].reshape(24, 10)
    state["W_head_weights.weight"] = neighbours.W_head_weights.weight
    halves.load_state_dict(state)
    rope = LatentAttention(16, 16, 32, 0.0, 4, kv_lora_rank=12, qk_nope_head_dim=6,
                           qk_rope_head_dim=4, v_head_dim=5).rope
    x, q = torch.randn(2, 7, 16), torch.randn(2, 7, 10)
    with torch.no_grad():
        got = neighbours.scores(x, q, neighbours.keys(x, rope.cos, rope.sin, 0), rope.cos,
                                rope.sin, 0)
        expected = halves.scores(x, q, halves.keys(x, rope.cos, rope.sin, 0), rope.cos,
                                 rope.sin, 0)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    plain = LightningIndexer(16, 10, 3, 8, 4)
    plain.load_state_dict(neighbours.state_dict())
    with torch.no_grad():
        other = plain.scores(x, q, plain.keys(x, rope.cos, rope.sin, 0), rope.cos, rope.sin, 0)
    assert (other - got).abs().max() > 1e-3  # the pairing matters


@pytest.mark.parametrize("padded", [False, True], ids=["no-padding", "left-padded"])
def test_a_gathered_decoding_step_passes_a_mask_only_for_padding(padded, monkeypatch):
    """One new token after a prompt of 12, gathered, fast path: every key the indexer
    picks may be attended, so SDPA gets no mask unless the prompt had padding; no number
    is read back to Python."""
    layer = small(index_topk=5)
    layer.gathered, layer.fast_path = True, True
    cache = layer.make_cache(2)
    x = torch.randn(2, 13, 16, generator=torch.Generator().manual_seed(4))
    prompt_mask = torch.ones(2, 12, dtype=torch.bool)
    prompt_mask[1, :3] = not padded
    masks = sdpa_masks(monkeypatch)
    log, out = step_after_prompt(layer, cache, x, prompt_mask)
    assert [m is None for m in masks[1:]] == [not padded] and log.read_backs == 0
    torch.testing.assert_close(out, one_pass_last(layer, x, prompt_mask), atol=1e-5,
                               rtol=1e-5)  # the step is one pass's last position
