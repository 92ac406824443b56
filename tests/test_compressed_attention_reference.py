"""CompressedAttention, built by ``layer_from_hf``, against transformers' ``DeepseekV4Attention``
in a whole tiny DeepSeek-V4 model.

``TINY`` is a random DeepSeek-V4 config from transformers' own config class: one sliding, one
compressed sparse (CSA) and one heavily compressed (HCA) layer; width 64, 4 heads of 32, 8 of
them turned (YaRN in the compressed layers, factor 4 over 16 positions); a window of 6, CSA
rate 4 with top-2 of its entries, HCA rate 8; eager attention, float32, every weight moved off
its starting value (norms U(0.5, 1.5), sinks N(0, 1), the rest N(0, 0.2)). At ``T = 20``
tokens the window, both rates and the top-k all bite (``MECHANISMS`` proves it: each, switched
off on the transformers side, moves the reference's output by more than 1e-3). Compared at
real tokens, ``atol = rtol = 1e-5``: prefill through every layer (``every_layer``), cached
decoding token by token and in uneven calls against transformers' own caches
(``DeepseekV4CSACache``/``HCACache`` through ``DynamicCache``), gradients, and left padding,
which transformers does not keep out of its entries: there the reference is the prompt alone.
Nothing is downloaded (HF_HUB_OFFLINE=1).
"""

from __future__ import annotations

import contextlib
import os
import pathlib

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported

import pytest  # noqa: E402
import torch  # noqa: E402

transformers = pytest.importorskip("transformers")

from llm_attention.compressed_attention import from_hf_state_dict  # noqa: E402
from llm_attention.hf_config import compressed_attention_options  # noqa: E402
from llm_attention.hf_layers import layer_from_hf  # noqa: E402
from llm_attention.rope_scaling import rope_frequencies  # noqa: E402
from llm_attention_site.compressed_costs import PUBLISHED_V4  # noqa: E402
from llm_attention_site.layer_parity import every_layer  # noqa: E402

pytestmark = pytest.mark.xdist_group(  # the worker that has transformers imported already
    (pathlib.Path(__file__).resolve().parents[1] / "docs" / "modern" / "combined.md").as_posix()
)

TOL = dict(atol=1e-5, rtol=1e-5)
T = 20
SLIDING, CSA, HCA = 0, 1, 2  # the layers of TINY
TINY = dict(
    vocab_size=128, hidden_size=64, num_hidden_layers=3, num_attention_heads=4, head_dim=32,
    partial_rotary_factor=0.25, q_lora_rank=32, o_groups=2, o_lora_rank=16, sliding_window=6,
    layer_types=["sliding_attention", "compressed_sparse_attention",
                 "heavily_compressed_attention"],
    compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
    index_n_heads=8, index_head_dim=16, index_topk=2, n_routed_experts=2,
    num_experts_per_tok=1, moe_intermediate_size=32, hc_mult=2, max_position_embeddings=64,
    rope_parameters={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16},
)


def compressors(model, kind):
    """Every compressor of that kind's layers (the CSA indexer's own included)."""
    for layer in model.model.layers:
        attention = layer.self_attn
        if attention.layer_type == kind:
            yield attention.compressor
            if kind == "compressed_sparse_attention":
                yield attention.compressor.indexer


@contextlib.contextmanager
def without_entries(model, kind):
    """The layer's compressed entries dropped: its window alone."""
    patched = list(compressors(model, kind))[:1]
    originals = [c.forward for c in patched]
    for compressor in patched:
        def forward(hidden_states, *args, _c=compressor, **kwargs):
            batch = hidden_states.shape[0]
            return hidden_states.new_zeros(batch, 1, 0, _c.head_dim), None
        compressor.forward = forward
    try:
        yield
    finally:
        for compressor, original in zip(patched, originals):
            compressor.forward = original


@contextlib.contextmanager
def halved_rate(model, kind):
    """Every compressor of that kind pools half as many tokens (its first position biases)."""
    saved = []
    for compressor in compressors(model, kind):
        saved.append((compressor, compressor.compress_rate, compressor.position_bias))
        compressor.compress_rate //= 2
        compressor.position_bias = torch.nn.Parameter(compressor.position_bias[
            : compressor.compress_rate].clone())
    try:
        yield
    finally:
        for compressor, rate, bias in saved:
            compressor.compress_rate, compressor.position_bias = rate, bias


@contextlib.contextmanager
def no_overlap(model):
    """CSA's first halves (the window before's tokens) weigh nothing: -inf gates."""
    saved = []
    for compressor in compressors(model, "compressed_sparse_attention"):
        bias = compressor.position_bias
        saved.append((bias, bias.detach().clone()))
        with torch.no_grad():
            bias[:, : bias.shape[1] // 2] = -torch.inf
    try:
        yield
    finally:
        with torch.no_grad():
            for bias, value in saved:
                bias.copy_(value)


@contextlib.contextmanager
def no_sinks(model):
    saved = [layer.self_attn.sinks.detach().clone() for layer in model.model.layers]
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.sinks.fill_(-torch.inf)
    try:
        yield
    finally:
        with torch.no_grad():
            for layer, value in zip(model.model.layers, saved):
                layer.self_attn.sinks.copy_(value)


@contextlib.contextmanager
def no_unrotation(model):
    """The output's turn back undone: each layer's output projection gets the heads turned
    forward again by the query's angle, before it mixes them."""
    from transformers.models.deepseek_v4 import modeling_deepseek_v4 as v4

    handles = []
    for layer in model.model.layers:
        attention, seen = layer.self_attn, {}

        def keep(module, args, kwargs, _seen=seen):
            _seen["cos_sin"] = kwargs["position_embeddings"][module.rope_layer_type]

        def turn(module, args, _seen=seen, _heads=attention.num_heads):
            grouped = args[0]  # (B, T, g, H d / g)
            shape = grouped.shape
            heads = grouped.reshape(*shape[:2], _heads, -1).transpose(1, 2)  # (B, H, T, d)
            cos, sin = _seen["cos_sin"]
            turned = v4.apply_rotary_pos_emb(heads, cos, sin).transpose(1, 2)
            return (turned.reshape(shape),)

        handles.append(attention.register_forward_pre_hook(keep, with_kwargs=True))
        handles.append(attention.o_a_proj.register_forward_pre_hook(turn))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


# --8<-- [start:mechanisms]
# Each mechanism of the layers, switched off on the transformers side, and the layers whose
# output must then move by more than 1e-3: a config change (the same weights in a model built
# from the changed config), or a context manager that changes weights or patches the reference.
MECHANISMS = {
    "window": dict(config=dict(sliding_window=64), layers=(SLIDING, CSA, HCA)),
    "entries (CSA)": dict(patch=lambda m: without_entries(m, "compressed_sparse_attention"),
                          layers=(CSA,)),
    "entries (HCA)": dict(patch=lambda m: without_entries(m, "heavily_compressed_attention"),
                          layers=(HCA,)),
    "compression rate (CSA)": dict(
        patch=lambda m: halved_rate(m, "compressed_sparse_attention"), layers=(CSA,)),
    "compression rate (HCA)": dict(
        patch=lambda m: halved_rate(m, "heavily_compressed_attention"), layers=(HCA,)),
    "overlapping windows": dict(patch=no_overlap, layers=(CSA,)),
    "top-k": dict(config=dict(index_topk=64), layers=(CSA,)),
    "sinks": dict(patch=no_sinks, layers=(SLIDING, CSA, HCA)),
    "un-rotation of the output": dict(patch=no_unrotation, layers=(SLIDING, CSA, HCA)),
    "YaRN table of compressed layers": dict(
        config=dict(rope_parameters={"rope_type": "default"}), layers=(CSA, HCA)),
}
# --8<-- [end:mechanisms]


def config(**changes):
    cfg = transformers.DeepseekV4Config(**{**TINY, **changes})
    cfg._attn_implementation = "eager"
    return cfg


def randomized(cfg, seed=0):
    """The whole tiny model, float32, every weight off its starting value."""
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(cfg).float().eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                parameter.uniform_(0.5, 1.5)
            elif name.endswith("sinks"):
                parameter.normal_(0.0, 1.0)
            else:
                parameter.normal_(0.0, 0.2)
    return model


@pytest.fixture(scope="module")
def tiny():
    cfg = config()
    return cfg, randomized(cfg)


def token_ids(batch=2, seed=1):
    return torch.randint(0, TINY["vocab_size"], (batch, T),
                         generator=torch.Generator().manual_seed(seed))


def attention_io(model, inputs=None, **call):
    """Per layer, the (input, output) of its self_attn at each call of the model; with
    ``inputs`` (layer -> tensor), that layer gets that input instead of its own."""
    seen, inputs = {}, inputs or {}

    def replace(module, args, kwargs, index):
        if index in inputs:
            return (inputs[index], *args[1:]), kwargs
        return None

    def hook(module, args, kwargs, output, index):
        hidden = args[0] if args else kwargs["hidden_states"]
        seen.setdefault(index, []).append((hidden.detach(), output[0].detach()))

    handles = []
    for i, layer in enumerate(model.model.layers):
        handles.append(layer.self_attn.register_forward_pre_hook(
            lambda *a, i=i: replace(*a, i), with_kwargs=True))
        handles.append(layer.self_attn.register_forward_hook(
            lambda *a, i=i: hook(*a, i), with_kwargs=True))
    try:
        with torch.no_grad():
            for piece in call.pop("pieces", [call]):
                model(**piece)
    finally:
        for handle in handles:
            handle.remove()
    return seen


def test_prefill_matches_every_layer(tiny):
    cfg, model = tiny
    rows = every_layer(model, cfg, token_ids())
    assert [row["kind"] for row in rows] == TINY["layer_types"]
    for row in rows:
        assert row["module"] == "CompressedAttention"
        assert row["max_difference"] <= 1e-5, row


@pytest.mark.parametrize("form", ["fast_path", "gathered"])
def test_prefill_matches_in_the_other_forms(tiny, form):
    cfg, model = tiny
    seen = attention_io(model, input_ids=token_ids())
    for index in (SLIDING, CSA, HCA):
        if form == "gathered" and index != CSA:
            continue
        ours = layer_from_hf(cfg, index, model.model.layers[index].self_attn.state_dict(),
                             **{form: True})
        (x, expected), = seen[index]
        with torch.no_grad():
            torch.testing.assert_close(ours(x), expected, **TOL)


PIECES = {"one by one": [1] * T, "4+6+2+8": [4, 6, 2, 8], "7+13": [7, 13],
          "3+1+1+5+10": [3, 1, 1, 5, 10]}


@pytest.mark.parametrize("pieces", PIECES.values(), ids=PIECES.keys())
def test_cached_decoding_matches_transformers_caches(tiny, pieces):
    cfg, model = tiny
    ids = token_ids()
    cache = transformers.DynamicCache(config=cfg)
    calls, start = [], 0
    for size in pieces:
        calls.append(dict(input_ids=ids[:, start:start + size], past_key_values=cache,
                          use_cache=True))
        start += size
    seen = attention_io(model, pieces=calls)
    kinds = {type(layer).__name__ for layer in cache.layers}
    assert kinds == {"DynamicSlidingWindowLayer", "DeepseekV4CSACache", "DeepseekV4HCACache"}
    for index, steps in seen.items():
        ours = layer_from_hf(cfg, index, model.model.layers[index].self_attn.state_dict())
        ours_cache = ours.make_cache(2)
        with torch.no_grad():
            for x, expected in steps:
                torch.testing.assert_close(ours(x, cache=ours_cache), expected, **TOL)


def test_gradients_match(tiny):
    """The same loss through both layers: equal gradients of the input and of every weight
    (the indexer's get none in either)."""
    cfg, model = tiny
    captured = {}

    def keep(module, args, kwargs):
        captured[module.layer_idx] = dict(kwargs, hidden_states=args[0])

    handles = [layer.self_attn.register_forward_pre_hook(keep, with_kwargs=True)
               for layer in model.model.layers]
    with torch.no_grad():
        model(input_ids=token_ids(), use_cache=False)
    for handle in handles:
        handle.remove()
    for index, kwargs in captured.items():
        reference = model.model.layers[index].self_attn
        ours = layer_from_hf(cfg, index, reference.state_dict())
        x = kwargs["hidden_states"].clone().requires_grad_(True)
        x_ours = x.detach().clone().requires_grad_(True)
        reference.zero_grad()
        expected, got = reference(**{**kwargs, "hidden_states": x})[0], ours(x_ours)
        torch.testing.assert_close(got, expected, **TOL)
        expected.square().sum().backward()
        got.square().sum().backward()
        torch.testing.assert_close(x_ours.grad, x.grad, atol=1e-4, rtol=1e-4)
        theirs = {name: p.grad for name, p in reference.named_parameters()}
        renamed = from_hf_state_dict(theirs)
        for name, parameter in ours.named_parameters():
            if name.startswith("indexer."):
                assert parameter.grad is None and renamed[name] is None, name
            else:
                torch.testing.assert_close(parameter.grad, renamed[name], atol=1e-4,
                                           rtol=1e-4, msg=lambda m, n=name: f"{n}: {m}")


@pytest.mark.parametrize("positions", ["slots", "real tokens"])
def test_left_padding_leaks_into_the_references_entries_but_not_ours(tiny, positions):
    """Transformers pools a left-padded row's pads into its compressed entries, in windows
    counted from the row's first slot, whether ``position_ids`` count slots (the model's
    default) or real tokens (as ``generate`` makes them): its compressed layers then differ
    from the prompt alone, its sliding layer does not. Ours, given the same input with the
    padding marked, equals the prompt alone in every layer."""
    cfg, model = tiny
    pads = 5
    prompt = token_ids(batch=1, seed=3)[:, pads:]
    ids = torch.cat((torch.zeros(1, pads, dtype=torch.long), prompt), dim=1)
    mask = torch.ones(1, T, dtype=torch.long)
    mask[:, :pads] = 0
    call = dict(input_ids=ids, attention_mask=mask)
    if positions == "real tokens":
        call["position_ids"] = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
    alone = attention_io(model, input_ids=prompt)
    padded = attention_io(model, **call)
    for index in (SLIDING, CSA, HCA):
        x_alone, expected = alone[index][0]
        gap = (padded[index][0][1][0, pads:] - expected[0]).abs().max().item()
        if index == SLIDING:
            assert gap < 1e-5, gap
        else:
            assert gap > 1e-3, (index, gap)  # not the prompt's output
        ours = layer_from_hf(cfg, index, model.model.layers[index].self_attn.state_dict())
        x = torch.cat((torch.randn(1, pads, TINY["hidden_size"]), x_alone), dim=1)
        with torch.no_grad():
            got = ours(x, mask.bool())
        torch.testing.assert_close(got[0, pads:], expected[0], **TOL)


@pytest.mark.parametrize("name", MECHANISMS)
def test_each_mechanism_reaches_the_reference(tiny, name):
    """Switched off on the transformers side, the mechanism moves the reference's output
    beyond 1e-3 in the layers that have it, each layer given the same input as before (the
    tiny config reaches that branch), and leaves the other layers as they were."""
    cfg, model = tiny
    ids = token_ids()
    base = attention_io(model, input_ids=ids)
    same_inputs = {index: steps[0][0] for index, steps in base.items()}
    how = MECHANISMS[name]
    if "config" in how:
        other = randomized(config(**how["config"]))
        other.load_state_dict(model.state_dict())
        changed = attention_io(other, same_inputs, input_ids=ids)
    else:
        with how["patch"](model):
            changed = attention_io(model, same_inputs, input_ids=ids)
    for index in base:
        gap = (changed[index][0][1] - base[index][0][1]).abs().max().item()
        if index in how["layers"]:
            assert gap > 1e-3, (name, index, gap)
        else:
            assert gap < 1e-6, (name, index, gap)
    after = attention_io(model, input_ids=ids)  # the patch is undone
    for index in base:
        assert torch.equal(after[index][0][1], base[index][0][1])


def test_rotary_tables_are_transformers(tiny):
    """Our angles of each kind are the model's own (plain for sliding, YaRN for compressed),
    for the tiny config and for the published ones."""
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4RotaryEmbedding

    cfg, model = tiny
    for index, label in ((SLIDING, "main"), (CSA, "compress"), (HCA, "compress")):
        ours = layer_from_hf(cfg, index)
        torch.testing.assert_close(ours.inv_freq,
                                   getattr(model.model.rotary_emb, f"{label}_inv_freq"))
    for name, (source, values) in PUBLISHED_V4.items():
        published = transformers.DeepseekV4Config(
            **{k: v for k, v in values.items() if k != "model_type"})
        theirs = DeepseekV4RotaryEmbedding(published)
        kinds = published.layer_types
        for kind, label in (("compressed_sparse_attention", "compress"),
                            ("sliding_attention", "main")):
            if kind not in kinds:
                continue
            options = compressed_attention_options(values, kinds.index(kind))
            inv_freq, factor = rope_frequencies(
                options["rope_head_dim"], options["rope_base"],
                **(options["rope_scaling"] or {}))
            torch.testing.assert_close(inv_freq, getattr(theirs, f"{label}_inv_freq"))
            assert factor == getattr(theirs, f"{label}_attention_scaling") == 1.0


@pytest.mark.parametrize("name", PUBLISHED_V4)
def test_published_configs_read_as_transformers_reads_them(name):
    """The config.json dict and transformers' config object built from it give the same
    options for every layer."""
    source, values = PUBLISHED_V4[name]
    published = transformers.DeepseekV4Config(
        **{k: v for k, v in values.items() if k != "model_type"})
    for index in range(values["num_hidden_layers"]):
        assert (compressed_attention_options(values, index)
                == compressed_attention_options(published, index))
