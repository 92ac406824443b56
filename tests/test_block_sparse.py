"""BlockSparseAttention on its own: its masked and gathered forms (each the other's oracle), its
cache, left padding, the blocks it keeps, errors.

(Its equality with transformers' MiniMax-M3 layers is in test_families_2026_reference.py.)
"""

from __future__ import annotations

import pytest
import torch

from llm_attention.block_sparse import (
    BlockSparseAttention,
    BlockSparseCache,
    from_hf_state_dict,
    select_blocks,
)
from llm_attention.modern import ModernAttention

from tests.decode_checks import step_after_prompt

TOL = dict(atol=1e-5, rtol=1e-5)
GTOL = dict(atol=1e-4, rtol=1e-4)
T = 13  # 5 blocks of 3 (the last one short)
SIZES = dict(head_dim=8, qk_norm=True, norm_unit_offset=True, partial_rotary_factor=0.5)
FORMS = {
    "masked": dict(),
    "masked-fast": dict(fast_path=True),
    "gathered": dict(gathered=True),
}


def make(seed=0, **options):
    """4 query heads, 2 key/value heads (one indexer head each), blocks of 3, 2 kept."""
    torch.manual_seed(seed)
    args = dict(index_n_heads=2, index_head_dim=8, block_size=3, top_k=2, **SIZES)
    module = BlockSparseAttention(16, 16, 16, 0.0, 4, 2, **{**args, **options})
    with torch.no_grad():
        for name, param in module.named_parameters():
            param.normal_(0.5 if "norm" in name else 0.0, 0.4)
    return module.eval()


def padding(rows=3, length=T):
    pad = torch.ones(rows, length, dtype=torch.bool)
    pad[1, :4] = False  # left padding, not a multiple of the block size
    pad[2, :7] = False
    return pad


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize("form", ["masked-fast", "gathered"])
def test_forms_agree_in_values_and_gradients(form, padded):
    """The gathered form and the fused kernel against the masked explicit form."""
    masked, other = make(), make(**FORMS[form])
    x = torch.randn(3, T, 16)
    pad = padding() if padded else None
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    out1, out2 = masked(x1, pad), other(x2, pad)
    real = pad if padded else torch.ones(3, T, dtype=torch.bool)
    torch.testing.assert_close(out2[real], out1[real], **TOL)
    grad = torch.randn_like(out1) * real[..., None]
    out1.backward(grad)
    out2.backward(grad)
    torch.testing.assert_close(x2.grad, x1.grad, **GTOL)


def test_every_block_kept_is_dense_attention():
    """With as many blocks kept as there are, the layer is ModernAttention with the same
    weights: the indexer chooses nothing away."""
    sparse = make(top_k=5)
    dense = ModernAttention(16, 16, 16, 0.0, 4, 2, **SIZES).eval()
    state = {k: v for k, v in sparse.state_dict().items() if not k.startswith("indexer.")}
    dense.load_state_dict(state)
    x, pad = torch.randn(3, T, 16), padding()
    for form in FORMS.values():
        sparse.fast_path, sparse.gathered = (form.get("fast_path", False),
                                             form.get("gathered", False))
        torch.testing.assert_close(sparse(x, pad)[pad], dense(x, pad)[pad], **TOL)
    assert (make()(x) - dense(x)).abs().max() > 1e-3  # two of five blocks: another output


DECODE_STEPS = {"1x13": [1] * T, "4+6+3": [4, 6, 3], "2+11": [2, 11]}


@pytest.mark.parametrize("steps", DECODE_STEPS.values(), ids=DECODE_STEPS)
@pytest.mark.parametrize("form", FORMS)
def test_cached_decoding_equals_one_pass(form, steps):
    module = make(**FORMS[form])
    x, pad = torch.randn(3, T, 16), padding()
    full = module(x, pad)
    cache = module.make_cache(3)
    outs, start = [], 0
    for size in steps:
        outs.append(module(x[:, start:start + size], pad[:, start:start + size], cache=cache))
        start += size
    assert cache.length == T and cache.index_keys.shape == (3, 16, 8)
    torch.testing.assert_close(torch.cat(outs, dim=1)[pad], full[pad], **TOL)


@pytest.mark.parametrize("form", FORMS)
def test_a_padded_row_equals_its_prompt_alone(form):
    """Blocks are counted from each row's first real token and padding never scores: the
    padded rows give what their prompts give alone, through the cache too."""
    module = make(**FORMS[form])
    x, pad = torch.randn(3, T, 16), padding()
    together = module(x, pad)
    for row in (1, 2):
        first = int((~pad[row]).sum())
        alone = module(x[row:row + 1, first:])
        torch.testing.assert_close(together[row, first:], alone[0], **TOL)
    cache = module.make_cache(3)
    module(x[:, :8], pad[:, :8], cache=cache)
    last = module(x[:, 8:], cache=cache)
    torch.testing.assert_close(last[2], module(x[2:, 7:])[0, 1:], **TOL)


def test_the_future_changes_nothing_before_it():
    module = make(gathered=True)
    x = torch.randn(2, T, 16)
    changed = x.clone()
    changed[:, 8:] = torch.randn(2, T - 8, 16)
    torch.testing.assert_close(module(changed)[:, :8], module(x)[:, :8], **TOL)


def select(scores, top_k, local=1, init=0, block=3):
    """``select_blocks`` for one row and head of ``scores`` ``(T, T)``, the future hidden."""
    num_tokens = scores.shape[-1]
    future = torch.ones(num_tokens, num_tokens, dtype=torch.bool).triu(1)
    blocks = torch.arange(num_tokens)[None] // block  # (1, T)
    return select_blocks(scores.masked_fill(future, -torch.inf)[None, None], blocks, blocks,
                         top_k, local, init)[0, 0]  # (T, k)


@pytest.mark.parametrize("local, init", [(1, 0), (2, 0), (1, 1), (0, 0), (2, 1)])
def test_the_blocks_kept(local, init):
    """Each query keeps its own block and the ``local - 1`` before it, the first ``init``
    blocks, and then the blocks of highest score, never one in its future; -1 fills the slots
    it has no block for."""
    torch.manual_seed(0)
    scores = torch.randn(T, T)
    chosen = select(scores, 3, local, init)  # (T, 3)
    for t in range(T):
        own = t // 3
        kept = set(chosen[t].tolist()) - {-1}
        forced = {b for b in range(own - local + 1, own + 1) if b >= 0}
        forced |= {b for b in range(init) if b <= own}
        assert forced <= kept and max(kept) <= own
        assert len(kept) == min(3, own + 1) == len(chosen[t]) - (chosen[t] == -1).sum()
        rest = sorted(kept - forced)
        others = [b for b in range(own + 1) if b not in forced]
        best = sorted(others, key=lambda b: -scores[t, 3 * b:min(3 * b + 3, t + 1)].max())
        assert rest == sorted(best[:len(rest)])  # the highest block maxima


def test_a_block_scores_its_best_key():
    """Pooling is a maximum: raising one key's score lifts its whole block into the top."""
    scores = torch.zeros(T, T)
    scores[12, 4] = 5.0  # one key of block 1
    assert set(select(scores, 2)[12].tolist()) == {4, 1}  # its own block (12 // 3) and block 1


@pytest.mark.parametrize(
    "options, error, message",
    [
        (dict(index_n_heads=4), ValueError, "index_n_heads=4 must equal num_kv_heads=2"),
        (dict(window=4), ValueError, "window=4 is not implemented with block-sparse"),
        (dict(sinks=True), ValueError, "sinks=True is not implemented"),
        (dict(local_blocks=-1), ValueError, "local_blocks must be an int >= 0, got -1"),
        (dict(init_blocks=1.0), ValueError, "init_blocks must be an int >= 0"),
        (dict(block_size=0), ValueError, "block_size must be a positive int, got 0"),
        (dict(top_k=True), TypeError, "top_k must be a positive int"),
        (dict(index_head_dim=2), ValueError, "index_head_dim must be at least the 4 dimensions"),
        (dict(gathered=1), TypeError, "gathered must be True or False"),
    ],
)
def test_bad_arguments(options, error, message):
    with pytest.raises(error, match=message):
        make(**options)


def test_bad_inputs_and_caches():
    module = make()
    with pytest.raises(TypeError, match="cache must be a BlockSparseCache or None, got KVCache"):
        module(torch.randn(1, 3, 16), cache=ModernAttention(16, 16, 8, 0.0, 4, 2).make_cache(1))
    with pytest.raises(ValueError, match="17 tokens, more than context_length=16"):
        module(torch.randn(1, 17, 16))
    cache = module.make_cache(1)
    with pytest.raises(ValueError, match=r"index_key must be a tensor of shape \(B=1, T_new=2, d_I=8\)"):
        cache.append(torch.zeros(1, 2, 2, 8), torch.zeros(1, 2, 2, 8), torch.zeros(1, 2, 4))
    assert cache.length == 0
    assert cache.nbytes == (2 * 2 * 16 * 8 + 16 * 8) * 4  # keys, values, indexer keys


def test_hf_names():
    """transformers' names map onto ours, the indexer's included, and nothing is left out."""
    module = make()
    theirs = {"q_proj": "W_query", "k_proj": "W_key", "v_proj": "W_value", "o_proj": "out_proj",
              "q_norm": "q_norm", "k_norm": "k_norm", "indexer.q_proj": "indexer.W_query",
              "indexer.k_proj": "indexer.W_key", "indexer.q_norm": "indexer.query_norm",
              "indexer.k_norm": "indexer.key_norm"}
    state = {f"model.layers.1.self_attn.{hf}.weight": module.state_dict()[f"{ours}.weight"]
             for hf, ours in theirs.items()}
    renamed = from_hf_state_dict(state, "model.layers.1.self_attn.")
    assert set(renamed) == set(module.state_dict())
    with pytest.raises(ValueError, match="is not a weight of a block indexer"):
        from_hf_state_dict({**state, "model.layers.1.self_attn.indexer.v_proj.weight": 0},
                           "model.layers.1.self_attn.")


def test_block_sparse_cache_holds_what_was_appended():
    cache = BlockSparseCache(2, 1, 4, 3, 6)
    keys, values, index = torch.randn(2, 1, 5, 4), torch.randn(2, 1, 5, 4), torch.randn(2, 5, 3)
    held = cache.append(keys[:, :, :2], values[:, :, :2], index[:, :2])
    held = cache.append(keys[:, :, 2:], values[:, :, 2:], index[:, 2:])
    torch.testing.assert_close(held[0], keys)
    torch.testing.assert_close(held[2], index)
    cache.reset()
    assert cache.length == 0


@pytest.mark.parametrize("form", FORMS)
def test_a_decoding_step_without_padding_reads_nothing_back(form):
    """One new token after a prompt of 12 without padding: the blocks are counted from the
    number of keys, not read back from the device."""
    module = make(**FORMS[form])
    cache = module.make_cache(2)
    x = torch.randn(2, T, 16, generator=torch.Generator().manual_seed(5))
    log, out = step_after_prompt(module, cache, x, torch.ones(2, T - 1, dtype=torch.bool))
    assert log.read_backs == 0 and not cache.has_padding
    with torch.no_grad():  # and it is the step it was: one pass's last position
        torch.testing.assert_close(out, module(x)[:, -1:], **TOL)
