"""CompressedAttention (DeepSeek-V4) and its compressor on their own: shapes, the three forms
(explicit, fused kernel, gathered) equal, cached decoding in any split equal to one pass, a
left-padded row equal to its prompt alone, no token reading the future, the entries the formula
says, gradients, the cache's size, the published configs read, and bad input refused by name."""

from __future__ import annotations

import math

import pytest
import torch

from llm_attention.compressed_attention import (
    CompressedAttention,
    CompressedCache,
    from_hf_state_dict,
)
from llm_attention.compressor import Compressor, rotary_angles, rotate_pairs
from llm_attention.hf_config import compressed_attention_options
from llm_attention_site.compressed_costs import PUBLISHED_V4
from tests.decode_checks import one_pass_last, step_after_prompt

KINDS = {  # layer_type -> what it needs beyond the shared part
    "sliding_attention": {},
    "compressed_sparse_attention": dict(compress_rate=3, index_n_heads=4, index_head_dim=8,
                                        index_topk=2),
    "heavily_compressed_attention": dict(compress_rate=5),
}
YARN = dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=8,
            attention_factor=1.0)
T = 17  # window 4, rate 3 (five entries) or 5 (three), top-2: all of them bite


def small(kind, context_length=40, **options):
    """A small layer, every weight off its starting value (norms U(0.5, 1.5), sinks N(0, 1),
    the rest N(0, 0.3)) so that a missing piece shows."""
    torch.manual_seed(0)
    scaled = {} if kind == "sliding_attention" else dict(rope_base=1000.0, rope_scaling=YARN)
    shared = dict(head_dim=12, q_lora_rank=10, o_groups=2, o_lora_rank=6, window=4,
                  layer_type=kind, rope_head_dim=6)
    layer = CompressedAttention(
        16, 12, context_length, 0.0, 4, **{**shared, **scaled, **KINDS[kind], **options}
    ).eval()
    with torch.no_grad():
        for name, parameter in layer.named_parameters():
            if "norm" in name:
                parameter.uniform_(0.5, 1.5)
            elif name == "sinks":
                parameter.normal_(0.0, 1.0)
            else:
                parameter.normal_(0.0, 0.3)
    return layer


def inputs(batch=3, seed=1):
    """Random inputs, and a mask with rows padded on the left by 0, 4 and 7 tokens."""
    x = torch.randn(batch, T, 16, generator=torch.Generator().manual_seed(seed))
    padding = torch.ones(batch, T, dtype=torch.bool)
    for row, pads in zip(range(batch), (0, 4, 7)):
        padding[row, :pads] = False
    return x, padding


def decoded(layer, x, padding, pieces):
    """The same tokens through the cache, in calls of ``pieces`` tokens."""
    cache, outputs, start = layer.make_cache(x.shape[0]), [], 0
    with torch.no_grad():
        for size in pieces:
            part = slice(start, start + size)
            outputs.append(layer(x[:, part], padding[:, part], cache=cache))
            start += size
    return torch.cat(outputs, dim=1)


@pytest.mark.parametrize("kind", KINDS)
def test_shapes_and_a_padded_row_gives_zeros_at_its_padding(kind):
    layer = small(kind)
    x, padding = inputs()
    with torch.no_grad():
        y = layer(x, padding)
    assert y.shape == (3, T, 12)
    assert torch.isfinite(y).all()
    assert y[~padding].abs().max() == 0  # a padded query sees nothing but its sink


@pytest.mark.parametrize("kind", KINDS)
def test_the_three_forms_agree(kind):
    layer = small(kind)
    x, padding = inputs()
    with torch.no_grad():
        explicit = layer(x, padding)
        layer.fast_path = True
        fast = layer(x, padding)
        layer.fast_path = False
        forms = {"fast": fast}
        if kind == "compressed_sparse_attention":
            layer.gathered = True
            forms["gathered"] = layer(x, padding)
            forms["gathered, decoded"] = decoded(layer, x, padding, [5] + [1] * (T - 5))
            layer.gathered = False
    for name, got in forms.items():
        torch.testing.assert_close(got[padding], explicit[padding], atol=1e-5, rtol=1e-5,
                                   msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("pieces", [[1] * T, [4, 6, 2, 5], [8, 9], [3, 1, 1, 5, 7]],
                         ids=["one-by-one", "4+6+2+5", "8+9", "3+1+1+5+7"])
def test_cached_decoding_equals_one_pass(kind, pieces):
    layer = small(kind)
    x, padding = inputs()
    with torch.no_grad():
        whole = layer(x, padding)
    got = decoded(layer, x, padding, pieces)
    torch.testing.assert_close(got[padding], whole[padding], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_a_padded_row_equals_its_prompt_alone(kind):
    layer = small(kind)
    x, padding = inputs()
    x = x.clone()
    x[~padding] = 100.0  # padding that would show anywhere it leaked
    with torch.no_grad():
        batch = layer(x, padding)
        for row, pads in ((1, 4), (2, 7)):
            alone = layer(x[row : row + 1, pads:])[0]
            torch.testing.assert_close(batch[row, pads:], alone, atol=1e-5, rtol=1e-5)
    # a row padded through more than one call: 3 pads, then 2 more, then its prompt
    cache = layer.make_cache(1)
    pads = torch.zeros(1, 3, dtype=torch.bool)
    with torch.no_grad():
        layer(x[2:3, :3], pads, cache=cache)
        layer(x[2:3, 3:5], pads[:, :2], cache=cache)
        late = layer(x[2:3, 7:], cache=cache)[0]
        alone = layer(x[2:3, 7:])[0]
    torch.testing.assert_close(late, alone, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_no_token_reads_the_future(kind):
    layer = small(kind)
    x, padding = inputs()
    changed = x.clone()
    changed[:, 11:] += torch.randn_like(changed[:, 11:])
    with torch.no_grad():
        before, after = layer(x, padding), layer(changed, padding)
    assert (before[:, :11] - after[:, :11]).abs().max() == 0
    assert (before[:, 11:] - after[:, 11:]).abs().max() > 1e-3


def test_each_mechanism_changes_the_output():
    """What each branch adds is seen at this size: without it the output moves."""
    x, padding = inputs()
    cases = {
        "window": ("sliding_attention", dict(window=40)),
        "entries (CSA)": ("compressed_sparse_attention", None),
        "entries (HCA)": ("heavily_compressed_attention", None),
        "top-k": ("compressed_sparse_attention", dict(index_topk=40)),
        "rate": ("heavily_compressed_attention", dict(compress_rate=2)),
    }
    for name, (kind, change) in cases.items():
        layer = small(kind)
        with torch.no_grad():
            base = layer(x, padding)
            if change is None:  # the same weights, the window alone
                other = small("sliding_attention", rope_base=1000.0, rope_scaling=YARN)
                other.load_state_dict(layer.state_dict(), strict=False)
            else:
                other = small(kind, **change)
                other.load_state_dict({k: v for k, v in layer.state_dict().items()
                                       if "position_bias" not in k}, strict=False)
            assert (other(x, padding)[padding] - base[padding]).abs().max() > 1e-2, name


def test_an_entry_is_the_formula():
    """Entry 2 of a CSA pool, written out: the gated average of tokens 3..8 (rate 3), normed
    and turned to position 6; entry 0 pools its own window alone."""
    torch.manual_seed(2)
    pool = Compressor(5, 4, 3, overlap=True, norm_eps=1e-6)
    with torch.no_grad():
        for parameter in pool.parameters():
            parameter.normal_(0.0, 0.5)
    inv_freq = torch.tensor([0.3])  # d_r = 2
    x = torch.randn(1, 10, 5)
    with torch.no_grad():
        entries, count, _ = pool.pool(x, torch.tensor([0]), inv_freq)
        c, z = pool.W_kv(x)[0], pool.W_gate(x)[0]  # (10, 8) each
        bias = pool.position_bias  # (3, 8)
        rows_c = torch.cat((c[3:6, :4], c[6:9, 4:]))  # (6, 4): window 1 early, 2 own
        rows_z = torch.cat((z[3:6, :4] + bias[:, :4], z[6:9, 4:] + bias[:, 4:]))
        mixed = (torch.softmax(rows_z, dim=0) * rows_c).sum(0)  # (4,)
        normed = mixed / mixed.pow(2).mean().add(1e-6).sqrt() * pool.norm.weight
        angle = 6 * 0.3
        a, b = normed[2], normed[3]
        expected = torch.stack((normed[0], normed[1], a * math.cos(angle) - b * math.sin(
            angle), a * math.sin(angle) + b * math.cos(angle)))
        first = (torch.softmax(z[0:3, 4:] + bias[:, 4:], dim=0) * c[0:3, 4:]).sum(0)
        first = first / first.pow(2).mean().add(1e-6).sqrt() * pool.norm.weight
    assert count.tolist() == [3]
    torch.testing.assert_close(entries[0, 2], expected, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(entries[0, 0], first, atol=1e-6, rtol=1e-6)  # position 0


def test_rotate_pairs_turns_neighbours_and_turns_back():
    x = torch.randn(2, 3, 8)
    cos, sin = rotary_angles(torch.arange(3)[None].expand(2, -1), torch.tensor([1.0, 0.1]))
    turned = rotate_pairs(x, cos, sin)
    assert torch.equal(turned[..., :4], x[..., :4])  # the first d - d_r pass
    angle = 2 * 0.1  # position 2, second pair: dimensions 6 and 7
    a, b = x[:, 2, 6], x[:, 2, 7]
    torch.testing.assert_close(turned[:, 2, 6], a * math.cos(angle) - b * math.sin(angle))
    torch.testing.assert_close(rotate_pairs(turned, cos, -sin), x, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("kind", KINDS)
def test_gradients_reach_every_weight_but_the_indexers(kind):
    layer = small(kind)
    x, padding = inputs()
    for fast in (False, True):
        layer.zero_grad()
        layer.fast_path = fast
        layer(x, padding).square().sum().backward()
        grads = {name: p.grad.clone() for name, p in layer.named_parameters()
                 if p.grad is not None}
        if not fast:
            explicit = grads
    for name, parameter in layer.named_parameters():
        if name.startswith("indexer."):  # the choice is not differentiable
            assert name not in explicit, name
        else:
            assert explicit[name].abs().max() > 0, name
            torch.testing.assert_close(grads[name], explicit[name], atol=1e-4, rtol=1e-4)


def test_the_cache_holds_the_window_the_entries_and_what_is_not_pooled():
    layer = small("compressed_sparse_attention")
    x, padding = inputs()
    cache = layer.make_cache(3)
    with torch.no_grad():
        layer(x, padding, cache=cache)
    assert cache.window.shape == (3, 3, 12)  # W - 1 = 3 tokens
    real = (T - torch.tensor([0, 4, 7])).tolist()  # 17, 13 and 10 real tokens
    assert cache.pools["compressor"].count.tolist() == [n // 3 for n in real]
    assert cache.pools["compressor"].entries.shape == (3, 5, 12)
    assert cache.pools["indexer"].entries.shape == (3, 5, 8)
    assert cache.pools["compressor"].stream.shape[1] == 2 * 3 - 1  # at most 2 m - 1
    assert cache.offset.tolist() == [0, 4, 7] and cache.length == T
    hca = small("heavily_compressed_attention")
    hca_cache = hca.make_cache(3)
    with torch.no_grad():
        hca(x, padding, cache=hca_cache)
    assert hca_cache.pools["compressor"].stream.shape[1] == 5 - 1
    assert set(hca_cache.pools) == {"compressor"}
    assert hca_cache.nbytes == 4 * (3 * 3 * 12 + 3 * 3 * 12 + 3 * 4 * 24)
    cache.reset()
    assert cache.length == 0 and cache.window is None and cache.pools == {}


# Layers of each kind, as the published checkpoints' weights show them (Flash: compressor
# weights in 41 layers, indexer weights in 21; Pro: indexer weights in 30 of 61 layers)
KIND_COUNTS = {
    "DeepSeek-V4-Flash": {"sliding_attention": 2, "compressed_sparse_attention": 21,
                          "heavily_compressed_attention": 20},
    "DeepSeek-V4-Pro": {"compressed_sparse_attention": 30, "heavily_compressed_attention": 31},
}


@pytest.mark.parametrize("name", PUBLISHED_V4)
def test_published_configs_read_layer_by_layer(name):
    source, values = PUBLISHED_V4[name]
    layers = [compressed_attention_options(values, i)
              for i in range(values["num_hidden_layers"])]
    counts = {}
    for options in layers:
        counts[options["layer_type"]] = counts.get(options["layer_type"], 0) + 1
        assert options["head_dim"] == 512 and options["window"] == 128
        assert options["rope_head_dim"] == 64  # qk_rope_head_dim
        if options["layer_type"] == "sliding_attention":
            assert options["rope_scaling"] is None and options["rope_base"] == 10000
            continue
        assert options["rope_base"] == 160000  # compress_rope_theta, YaRN, unscaled tables
        assert options["rope_scaling"]["factor"] == 16
        assert options["rope_scaling"]["attention_factor"] == 1.0
        sparse = options["layer_type"] == "compressed_sparse_attention"
        assert options["compress_rate"] == (4 if sparse else 128)
        assert ("index_topk" in options) == sparse
    assert counts == KIND_COUNTS[name]


REFUSED = {
    "model_type": (dict(model_type="deepseek_v3"), "has no compressed attention"),
    "kv heads": (dict(num_key_value_heads=2), "num_key_value_heads=2"),
    "bias": (dict(attention_bias=True), "attention_bias=True"),
    "ratio": (dict(compress_ratios=[8, 0, 0]), r"compress_ratios \[8\]"),
    "rope type": (dict(rope_scaling={"type": "longrope", "factor": 2.0}), "longrope"),
    "rope parameter": (dict(rope_scaling={"type": "yarn", "factor": 2.0,
                                          "original_max_position_embeddings": 8, "low": 1}),
                       "no parameter low"),
}


@pytest.mark.parametrize("name", REFUSED)
def test_configs_it_does_not_implement_are_refused_by_name(name):
    change, message = REFUSED[name]
    values = dict(model_type="deepseek_v4", hidden_size=16, num_hidden_layers=3,
                  num_attention_heads=4, head_dim=12, qk_rope_head_dim=6, q_lora_rank=10,
                  o_groups=2, o_lora_rank=6, sliding_window=4, compress_ratios=[4, 128, 0],
                  rope_scaling={"type": "yarn", "factor": 2.0,
                                "original_max_position_embeddings": 8})
    with pytest.raises(ValueError, match=message):
        CompressedAttention.from_hf_config({**values, **change}, 0)


BAD_ARGUMENTS = {
    "kind": (dict(layer_type="full_attention"), ValueError, "layer_type must be one of"),
    "rate for sliding": (dict(compress_rate=4), ValueError, "compress_rate must be None"),
    "indexer on HCA": (dict(layer_type="heavily_compressed_attention", compress_rate=4,
                            index_topk=2), ValueError, "index_topk belongs"),
    "gathered on HCA": (dict(layer_type="heavily_compressed_attention", compress_rate=4,
                             gathered=True), ValueError, "gathered=True needs"),
    "groups": (dict(o_groups=3), ValueError, "o_groups must divide"),
    "odd rope": (dict(rope_head_dim=5), ValueError, "rope_head_dim must be even"),
    "scaled tables": (dict(rope_scaling=dict(rope_type="yarn", factor=4.0,
                                             original_max_position_embeddings=8)),
                      ValueError, "attention factor"),
    "window": (dict(window=0), ValueError, "window must be a positive int"),
    "fast_path": (dict(fast_path=1), TypeError, "fast_path must be True or False"),
}


@pytest.mark.parametrize("name", BAD_ARGUMENTS)
def test_bad_arguments_are_named(name):
    change, error, message = BAD_ARGUMENTS[name]
    options = dict(head_dim=12, q_lora_rank=10, o_groups=2, o_lora_rank=6, window=4,
                   rope_head_dim=6)
    with pytest.raises(error, match=message):
        CompressedAttention(16, 12, 40, 0.0, 4, **{**options, **change})


def test_bad_inputs_are_named():
    layer = small("compressed_sparse_attention")
    x, padding = inputs()
    right = padding.flip(1)  # padding after the prompt
    with pytest.raises(ValueError, match=r"pad on the left only .* rows \[1, 2\]"):
        layer(x, right)
    cache = layer.make_cache(3)
    layer(x[:, :8], cache=cache)
    with pytest.raises(ValueError, match=r"rows \[0\]"):  # padding after real tokens
        layer(x[:, 8:9], torch.tensor([[False], [True], [True]]), cache=cache)
    assert cache.length == 8  # a refused call leaves the cache as it was
    with pytest.raises(TypeError, match="cache must be a CompressedCache"):
        layer(x, cache=object())
    with pytest.raises(ValueError, match="the cache holds 2 rows"):
        layer(x, cache=CompressedCache(2))
    with pytest.raises(ValueError, match="go beyond context_length=40"):
        layer(torch.randn(3, 33, 16), cache=cache)
    with pytest.raises(ValueError, match="d_in=16"):
        layer(torch.randn(3, 5, 15))


def test_weights_are_renamed_and_others_refused():
    layer = small("compressed_sparse_attention")
    hf = {"self_attn.q_a_proj.weight": layer.W_query_down.weight,
          "self_attn.compressor.indexer.scorer.weights_proj.weight":
              layer.indexer.W_head_weights.weight,
          "self_attn.compressor.indexer.position_bias": layer.indexer.compressor.position_bias,
          "self_attn.sinks": layer.sinks}
    renamed = from_hf_state_dict(hf, "self_attn.")
    assert set(renamed) == {"W_query_down.weight", "indexer.W_head_weights.weight",
                            "indexer.compressor.position_bias", "sinks"}
    with pytest.raises(ValueError, match="not a weight of a DeepSeek-V4 attention layer"):
        from_hf_state_dict({"self_attn.wq_a.weight": layer.sinks}, "self_attn.")


def test_the_cost_count_holds_what_the_cache_holds():
    """compressed_costs counts, per layer, the entries and indexer entries our cache holds
    after T tokens, and the window a step reads (the W - 1 held and the new token); its V3.2
    side is the family table's latent row."""
    from llm_attention_site.compressed_costs import headline, layer_cache
    from llm_attention_site.family_rows import latent_row

    x = torch.randn(1, T, 16)
    for kind in KINDS:
        layer = small(kind)
        cache = layer.make_cache(1)
        with torch.no_grad():
            layer(x, cache=cache)
        options = dict(head_dim=12, rope_head_dim=6, window=4, layer_type=kind,
                       **KINDS[kind])
        counted = layer_cache(options, T)
        assert counted["rotary"] + counted["other"] == (
            (cache.window.shape[1] + 1) * 12
            + (cache.pools["compressor"].entries.numel() if cache.pools else 0))
        indexer = cache.pools.get("indexer")
        assert counted["indexer"] == (indexer.entries.numel() if indexer else 0)
    v32 = headline()["DeepSeek-V3.2"]
    assert v32["cache_bytes_per_token"] == latent_row("DeepSeek-V3.2")["bytes_per_token"]


def test_a_decoding_step_reads_its_picks_without_copying_the_entries():
    """CSA gathered, one token after a prompt of 1,201 (400 entries of rate 3, a step that
    closes none): no call allocates as much as the entries held (before, each step copied
    them three times: twice to merge in no new entry, once to join them to the window);
    and the step is one pass's last position."""
    layer = small("compressed_sparse_attention", gathered=True, context_length=1300)
    x = torch.randn(1, 1202, 16, generator=torch.Generator().manual_seed(3))
    cache = layer.make_cache(1)
    log, out = step_after_prompt(layer, cache, x)
    entries = cache.pools["compressor"].entries  # (1, 400, 12)
    assert entries.shape[1] == 400 and 1202 % 3  # the step closed no entry
    assert log.allocations_of_at_least(entries.nbytes) == []
    torch.testing.assert_close(out, one_pass_last(layer, x), atol=1e-5, rtol=1e-5)
