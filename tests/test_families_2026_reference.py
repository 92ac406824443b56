"""The token mixers of 2026's families, built by ``layer_from_hf``, against transformers 5.23:
GLM-5 (``glm_moe_dsa``), MiniMax-M3 (its text decoder, ``minimax_m3_vl_text``), Mistral 4
(``mistral4``), MiMo-V2-Flash (``mimo_v2_flash``) and Laguna (``laguna``).

A tiny whole model of each family (``FAMILIES`` below: its config, and how each of its mechanisms
is switched off on the transformers side), eager attention, float32, random weights moved off their
init (norms U(0.5, 1.5), sinks N(0, 1), everything else N(0, 0.2)), 12 tokens, so that every
window, top-k and block is smaller than the text. Each decoder layer's attention submodule is hooked
(``llm_attention_site.layer_parity``) and our module for that layer runs on its real input:

- a prefill of three rows, two of them left-padded (4 and 7 tokens), compared at real tokens; the
  model gets ``position_ids`` counted from each row's first real token, as ``generate`` passes them
  (Mistral 4's query scale reads them);
- the model decoding with its own ``DynamicCache``, token by token and in calls of 4 + 6 + 2,
  against our modules with their caches, the same steps;
- MiniMax-M3 counts its blocks from the first slot of the batch and lets padding win a block, so a
  left-padded row is compared with the reference on its prompt alone (and a test shows the
  reference's padded row differs from it, while ours does not).

``atol = rtol = 1e-5``; the max differences are printed. For each mechanism, a test switches it off
on the transformers side (a config change with the same weights, a weight change or a patch) and
checks that the reference output of the layer that has it moves by more than 1e-3: the tiny config
reaches it. Nothing is downloaded (HF_HUB_OFFLINE=1).
"""

from __future__ import annotations

import os
import pathlib

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported

import pytest  # noqa: E402
import torch  # noqa: E402

transformers = pytest.importorskip("transformers")

from llm_attention.hf_config import topk_source_layer  # noqa: E402
from llm_attention.hf_layers import layer_from_hf, layer_kind  # noqa: E402
from llm_attention.kv_sharing import SharedTopK  # noqa: E402
from llm_attention_site.layer_parity import (  # noqa: E402
    attention_submodule, decoder_layers, every_layer, record_layers,
)

pytestmark = pytest.mark.xdist_group(  # the worker that has transformers imported already
    (pathlib.Path(__file__).resolve().parents[1] / "docs" / "modern" / "combined.md").as_posix()
)

T = 12  # tokens: every window, top-k and block below is smaller
TOL = dict(atol=1e-5, rtol=1e-5)
PADS = (0, 4, 7)  # left padding of the three rows
STEPS = {"1x12": (1,) * T, "4+6+2": (4, 6, 2)}
COMMON = dict(vocab_size=64, hidden_size=32, intermediate_size=32, max_position_embeddings=16)


def config_change(**changes):
    """Switched off by a config change: the model rebuilt with the same weights."""
    return ("config", changes)


def weight_change(change):
    """Switched off by ``change(model)``, in place on a copy of the weights."""
    return ("weights", change)


def patch(make):
    """Switched off by ``make(monkeypatch, model)``, a patch of the reference's code."""
    return ("patch", make)


def _glm_dense_shared_layers(monkeypatch, model):
    """GLM-5's shared layers attend over every key instead of the reused top-k."""
    modeling = transformers.models.glm_moe_dsa.modeling_glm_moe_dsa
    forward = modeling.GlmMoeDsaAttention.forward

    def dense(self, hidden_states, *args, prev_topk_indices=None, **kwargs):
        if self.skip_topk:  # a prefill: as many keys as queries
            b, s = hidden_states.shape[:2]
            prev_topk_indices = torch.arange(s).expand(b, s, s)
        return forward(self, hidden_states, *args, prev_topk_indices=prev_topk_indices,
                       **kwargs)

    monkeypatch.setattr(modeling.GlmMoeDsaAttention, "forward", dense)


def _glm_indexer_halves(monkeypatch, model):
    """GLM-5's indexer turns its rotary part as halves (DeepSeek-V3.2's layout), the
    attention still as neighbours."""
    modeling = transformers.models.glm_moe_dsa.modeling_glm_moe_dsa
    halves = transformers.models.deepseek_v32.modeling_deepseek_v32.apply_rotary_pos_emb
    forward = modeling.GlmMoeDsaIndexer.forward

    def indexer(self, *args, **kwargs):
        neighbours = modeling.apply_rotary_pos_emb_interleave
        modeling.apply_rotary_pos_emb_interleave = halves
        try:
            return forward(self, *args, **kwargs)
        finally:
            modeling.apply_rotary_pos_emb_interleave = neighbours

    monkeypatch.setattr(modeling.GlmMoeDsaIndexer, "forward", indexer)


def _mimo_sinks_off(model):
    for layer in decoder_layers(model):
        if layer.self_attn.sinks is not None:
            layer.self_attn.sinks.fill_(-1e4)  # no weight left on the sink


def _mimo_tie_kv_pairs(model):
    """The sliding layer's four key/value heads made two pairs of equal heads: what two
    heads, each shared by two query heads, would compute."""
    attn = decoder_layers(model)[1].self_attn
    for proj, width in ((attn.k_proj, attn.head_dim), (attn.v_proj, attn.v_head_dim)):
        weight = proj.weight.view(-1, 2, width, proj.weight.shape[1])  # (pairs, 2, d, d_in)
        weight[:, 1] = weight[:, 0]


def _laguna_gate_off(monkeypatch, model):
    monkeypatch.setattr(torch.nn.functional, "softplus", torch.ones_like)


def _laguna_drop_extra_heads(model):
    """Layer 1's fifth and sixth heads (it has six, layer 0 four) no longer reach the
    output."""
    attn = decoder_layers(model)[1].self_attn
    attn.o_proj.weight[:, 4 * attn.head_dim :] = 0.0


M3_ROPE = dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.5)
MISTRAL4_ROPE = dict(type="yarn", rope_theta=10000.0, factor=4.0, original_max_position_embeddings=4,
                     beta_fast=32.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0,
                     llama_4_scaling_beta=0.5)
MIMO_ROPE = {kind: dict(rope_type="default", rope_theta=theta, partial_rotary_factor=0.334)
             for kind, theta in (("full_attention", 5e6), ("sliding_attention", 1e4))}
LAGUNA_ROPE = {  # Laguna XS.2.1's kinds: YaRN on half of each head of the full layers
    "full_attention": dict(rope_type="yarn", rope_theta=5e5, factor=4.0,
                           original_max_position_embeddings=4, beta_fast=64.0, beta_slow=1.0,
                           attention_factor=1.35, partial_rotary_factor=0.5),
    "sliding_attention": dict(rope_type="default", rope_theta=1e4, partial_rotary_factor=1.0),
}

# One entry per family: the tiny config, and for each mechanism the layer that has it and how it is
# switched off on the transformers side. "prompt_alone": left-padded rows are compared with the
# reference on their prompt alone (the reference's own padded rows differ).
FAMILIES = {
    "glm_moe_dsa": dict(
        tiny=dict(COMMON, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4,
                  n_routed_experts=2, num_experts_per_tok=1, moe_intermediate_size=16,
                  first_k_dense_replace=3, q_lora_rank=24, kv_lora_rank=16, qk_nope_head_dim=8,
                  qk_rope_head_dim=8, v_head_dim=8, index_topk=4, index_head_dim=16,
                  index_n_heads=16,  # enough ReLU heads that no two keys tie at the top-k edge
                  indexer_types=["full", "shared", "full"]),
        mechanisms={
            "top-k": (0, config_change(index_topk=T)),
            "shared top-k": (1, patch(_glm_dense_shared_layers)),
            "indexer rotary pairs neighbours": (0, patch(_glm_indexer_halves)),
        },
    ),
    "minimax_m3_vl_text": dict(
        tiny=dict(COMMON, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                  num_local_experts=2, num_experts_per_tok=1, dense_intermediate_size=32,
                  shared_intermediate_size=16, head_dim=16, index_head_dim=16, index_n_heads=2,
                  index_block_size=3, index_topk_blocks=2, index_local_blocks=1,
                  layer_types=["full_attention", "minimax_m3_sparse", "minimax_m3_sparse"],
                  rope_parameters=M3_ROPE),
        mechanisms={
            "top blocks": (1, config_change(index_topk_blocks=T)),
            "local block": (1, config_change(index_local_blocks=0)),
            "partial rotary": (0, config_change(rope_parameters={**M3_ROPE,
                                                                 "partial_rotary_factor": 1.0})),
        },
        prompt_alone=True,
    ),
    "mistral4": dict(
        tiny=dict(COMMON, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                  n_routed_experts=2, num_experts_per_tok=1, moe_intermediate_size=16,
                  q_lora_rank=24, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8,
                  v_head_dim=8, rope_parameters=MISTRAL4_ROPE),
        mechanisms={
            "query scaling": (0, config_change(rope_parameters={**MISTRAL4_ROPE,
                                                                "llama_4_scaling_beta": 0.0})),
            "rotary pairs neighbours": (0, config_change(rope_interleave=False)),
        },
    ),
    "mimo_v2_flash": dict(
        tiny=dict(COMMON, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  n_routed_experts=2, num_experts_per_tok=1, moe_intermediate_size=16, head_dim=12,
                  v_head_dim=8, sliding_window=4, attention_value_scale=0.707,
                  layer_types=["full_attention", "sliding_attention"], rope_parameters=MIMO_ROPE),
        mechanisms={
            "window": (1, config_change(sliding_window=64)),
            "sinks": (1, weight_change(_mimo_sinks_off)),
            "value scale": (0, config_change(attention_value_scale=1.0)),
            "partial rotary": (0, config_change(rope_parameters={
                kind: {**params, "partial_rotary_factor": 1.0} for kind, params in MIMO_ROPE.items()
            })),
            "twice the key/value heads on sliding layers": (1, weight_change(_mimo_tie_kv_pairs)),
        },
    ),
    "laguna": dict(
        tiny=dict(COMMON, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  num_experts=2, num_experts_per_tok=1, moe_intermediate_size=16,
                  shared_expert_intermediate_size=16, head_dim=8, sliding_window=4,
                  layer_types=["full_attention", "sliding_attention"],
                  num_attention_heads_per_layer=[4, 6], gating=True, rope_parameters=LAGUNA_ROPE),
        mechanisms={
            "softplus gate": (0, patch(_laguna_gate_off)),
            "per-layer head count": (1, weight_change(_laguna_drop_extra_heads)),
            "window": (1, config_change(sliding_window=64)),
            "partial rotary": (0, config_change(rope_parameters={
                **LAGUNA_ROPE, "full_attention": {**LAGUNA_ROPE["full_attention"],
                                                  "partial_rotary_factor": 1.0}})),
            "YaRN attention factor": (0, config_change(rope_parameters={
                **LAGUNA_ROPE, "full_attention": {**LAGUNA_ROPE["full_attention"],
                                                  "attention_factor": 1.0}})),
        },
    ),
    "laguna-per-element": dict(  # the other gating of Laguna's config
        model_type="laguna",
        tiny=dict(COMMON, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  num_experts=2, num_experts_per_tok=1, moe_intermediate_size=16,
                  shared_expert_intermediate_size=16, head_dim=8, sliding_window=4,
                  layer_types=["sliding_attention", "full_attention"],
                  num_attention_heads_per_layer=[2, 4], gating="per-element"),
        mechanisms={"softplus gate per element": (0, patch(_laguna_gate_off))},
    ),
}


def model_type(name: str) -> str:
    return FAMILIES[name].get("model_type", name)


def make_model(name: str, changes: dict | None = None, state: dict | None = None):
    """The family's tiny model (config changed by ``changes``): eager, float32, its weights
    moved off their init (or ``state``, another model's weights)."""
    config = transformers.AutoConfig.for_model(
        model_type(name), **{**FAMILIES[name]["tiny"], **(changes or {})}
    )
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    if model_type(name) == "mistral4":  # no AutoModelForCausalLM entry in 5.23
        model = transformers.Mistral4ForCausalLM(config)
    else:
        model = transformers.AutoModelForCausalLM.from_config(config)
    model = model.float().eval()
    if state is not None:
        model.load_state_dict(state)
        return config, model
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for param_name, param in model.named_parameters():
            if "norm" in param_name and param_name.endswith("weight"):
                param.copy_(torch.rand(param.shape, generator=generator) + 0.5)
            elif param_name.endswith("sinks"):
                param.copy_(torch.randn(param.shape, generator=generator))
            else:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.2)
    return config, model


_BUILT = {}


def built(name: str):
    if name not in _BUILT:
        _BUILT[name] = make_model(name)
    return _BUILT[name]


def inputs(padded: bool):
    """Token ids ``(3, T)``, the attention mask and the positions ``generate`` would pass
    (counted from each row's first real token)."""
    ids = torch.randint(0, COMMON["vocab_size"], (3, T), generator=torch.Generator().manual_seed(2))
    mask = torch.ones(3, T, dtype=torch.long)
    if padded:
        for row, pad in enumerate(PADS):
            mask[row, :pad] = 0
    return ids, mask, (mask.cumsum(-1) - 1).clamp(min=0)


# --- prefill -----------------------------------------------------------------------------------

@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "left-padded"])
@pytest.mark.parametrize("name", FAMILIES)
def test_prefill_equals_transformers(name, padded):
    """Every layer, its largest difference within atol + rtol * its largest output."""
    if padded and FAMILIES[name].get("prompt_alone"):
        pytest.skip("compared with the reference on the prompt alone (test below)")
    config, model = built(name)
    ids, mask, positions = inputs(padded)
    rows = every_layer(model, config, ids, mask if padded else None,
                       position_ids=positions if padded else None)
    print(name, "left-padded" if padded else "unpadded",
          [(r["kind"], r["module"], f"{r['max_difference']:.1e}") for r in rows])
    assert len(rows) == config.num_hidden_layers
    for row in rows:
        assert row["max_difference"] <= TOL["atol"] + TOL["rtol"] * row["max_reference"], row


def run_ours(config, records, index, x, padding, picks=None, **overrides):
    """Our module of layer ``index`` on ``x``. A GLM-5 layer that reuses an earlier layer's
    top-k gets it from that layer, run first on its own recorded input; a layer given
    ``picks`` records its choice there."""
    ours = layer_from_hf(config, index, records[index]["module"].state_dict(), **overrides)
    source = topk_source_layer(config, index)
    if source is not None:
        picks = SharedTopK()
        run_ours(config, records, source, records[source]["input"], padding, picks, **overrides)
    handoff = {} if picks is None else {"topk": picks}
    with torch.no_grad():
        return ours(x, padding, **handoff)


FORMS = {  # the other forms of our modules, where the module has them
    "glm_moe_dsa": [dict(fast_path=True), dict(gathered=True), dict(absorb=True)],
    "minimax_m3_vl_text": [dict(fast_path=True), dict(gathered=True)],
    "mistral4": [dict(fast_path=True), dict(absorb=True)],
    "laguna": [dict(fast_path=True)],
    "mimo_v2_flash": [dict(fast_path=True)],  # its full layer: sinks refuse the fused kernel
}
FORM_CASES = [(name, form) for name, forms in FORMS.items() for form in forms]


@pytest.mark.parametrize("name, form", FORM_CASES,
                         ids=[f"{n}-{'-'.join(f)}" for n, f in FORM_CASES])
def test_other_forms_equal_transformers(name, form):
    """The fast path, the gathered and the absorbed forms on every layer that has them,
    left-padded rows included (MiniMax-M3: unpadded)."""
    config, model = built(name)
    padded = not FAMILIES[name].get("prompt_alone")
    ids, mask, positions = inputs(padded)
    records = record_layers(model, ids, mask if padded else None, positions if padded else None)
    real = mask.bool()
    compared = 0
    for index, record in enumerate(records):
        ours = layer_from_hf(config, index, record["module"].state_dict())
        if not all(hasattr(ours, option) for option in form) or (
            form.get("fast_path") and getattr(ours, "sinks", None) is not None
        ):
            continue  # this layer has no such form
        got = run_ours(config, records, index, record["input"], real if padded else None,
                       **form)
        torch.testing.assert_close(got[real], record["output"][real], **TOL)
        compared += 1
    assert compared >= 1


def test_minimax_m3_padded_row_equals_its_prompt_alone():
    """Ours: a left-padded row equals the reference run on its prompt alone, on every layer,
    both forms. The reference's own padded rows do not (its blocks start at the batch's first
    slot, and padding scores): its sparse layers move there, its full layer does not."""
    name = "minimax_m3_vl_text"
    config, model = built(name)
    ids, mask, positions = inputs(True)
    padded_records = record_layers(model, ids, mask)
    real = mask.bool()
    worst = {}
    for row, pad in enumerate(PADS):
        alone = record_layers(model, ids[row:row + 1, pad:])  # (1, T - pad)
        for index, record in enumerate(alone):
            x = padded_records[index]["input"].clone()  # its padding slots as they are
            x[row, pad:] = record["input"][0]
            for form in ({}, {"gathered": True}) if index else ({},):
                got = run_ours(config, alone, index, x, real, **form)[row, pad:]
                torch.testing.assert_close(got, record["output"][0], **TOL)
            reference_gap = (padded_records[index]["output"][row, pad:] - record["output"][0])
            if pad:
                worst[index] = max(worst.get(index, 0.0), reference_gap.abs().max().item())
    print("reference's padded rows against their prompts alone, by layer:", worst)
    assert worst[0] < 1e-5  # the full layer: the reference handles padding
    assert worst[1] > 1e-3  # the first sparse layer: it does not


# --- decoding with the model's own cache --------------------------------------------------------

def reference_steps(model, ids, mask, positions, sizes):
    """The model decoding with its own DynamicCache, ``sizes`` tokens per call: per call, per
    layer, the attention submodule's input and output."""
    cache = transformers.DynamicCache(config=model.config)
    steps, start = [], 0
    for size in sizes:
        records, handles = [], []

        def hook(module, args, kwargs, output):
            hidden = kwargs.get("hidden_states", args[0] if args else None)
            records.append((hidden.detach(), output[0].detach()))

        for layer in decoder_layers(model):
            handles.append(attention_submodule(layer).register_forward_hook(hook, with_kwargs=True))
        try:
            with torch.no_grad():
                model(input_ids=ids[:, start:start + size], attention_mask=mask[:, :start + size],
                      position_ids=positions[:, start:start + size], past_key_values=cache,
                      use_cache=True)
        finally:
            for handle in handles:
                handle.remove()
        steps.append(records)
        start += size
    return steps


# Token by token for every family, left-padded where the reference handles padding; calls of
# 4 + 6 + 2 for the two new caches (GLM-5's shared top-k, MiniMax-M3's blocks). Every family's
# uneven calls against one pass of ours: the unit tests.
DECODE_CASES = [(name, "1x12", not FAMILIES[name].get("prompt_alone")) for name in FAMILIES]
DECODE_CASES += [("glm_moe_dsa", "4+6+2", True), ("minimax_m3_vl_text", "4+6+2", False)]


@pytest.mark.parametrize("name, steps, padded", DECODE_CASES,
                         ids=[f"{n}-{s}-{'padded' if p else 'unpadded'}" for n, s, p in DECODE_CASES])
def test_decoding_equals_the_model_with_its_cache(name, steps, padded):
    config, model = built(name)
    ids, mask, positions = inputs(padded)
    sizes = STEPS[steps]
    steps_seen = reference_steps(model, ids, mask, positions, sizes)
    layers = [attention_submodule(layer) for layer in decoder_layers(model)]
    ours = [layer_from_hf(config, i, layer.state_dict()) for i, layer in enumerate(layers)]
    caches = [module.make_cache(3) for module in ours]
    sources = [topk_source_layer(config, i) for i in range(len(ours))]
    real, start, worst = mask.bool(), 0, 0.0
    for size, records in zip(sizes, steps_seen):
        picks = {i: SharedTopK() for i in set(sources) - {None}}
        new = slice(start, start + size)
        for index, (module, cache, (x, expected)) in enumerate(zip(ours, caches, records)):
            handoff = picks.get(index if sources[index] is None else sources[index])
            extra = {} if handoff is None else {"topk": handoff}
            with torch.no_grad():
                got = module(x, real[:, new] if padded else None, cache=cache, **extra)
            keep = real[:, new]
            torch.testing.assert_close(got[keep], expected[keep], **TOL)
            worst = max(worst, (got[keep] - expected[keep]).abs().max().item())
        start += size
    print(name, steps, "padded" if padded else "unpadded", f"max difference {worst:.1e}")
    assert start == T and all(cache.length == T for cache in caches)


# --- what the tiny configs reach ------------------------------------------------------------------

MECHANISM_CASES = [(name, mechanism) for name, family in FAMILIES.items()
                   for mechanism in family["mechanisms"]]


@pytest.mark.parametrize("name, mechanism", MECHANISM_CASES,
                         ids=[f"{n}-{m}" for n, m in MECHANISM_CASES])
def test_each_mechanism_bites_at_this_size(name, mechanism, monkeypatch):
    """Switched off on the transformers side, each mechanism moves the output of the layer
    that has it by more than 1e-3: the parity above is tested where the mechanism acts."""
    config, model = built(name)
    layer, (how, change) = FAMILIES[name]["mechanisms"][mechanism]
    ids, _, _ = inputs(False)
    before = record_layers(model, ids)[layer]["output"]  # before any patch of the classes
    state = {key: value.clone() for key, value in model.state_dict().items()}
    if how == "config":
        _, other = make_model(name, change, state)
    else:
        _, other = make_model(name, None, state)
        if how == "weights":
            with torch.no_grad():
                change(other)
        else:
            change(monkeypatch, other)
    after = record_layers(other, ids)[layer]["output"]
    gap = (before - after).abs().max().item()
    print(name, mechanism, f"layer {layer}: moves by {gap:.3g}")
    assert gap > 1e-3


def test_the_layers_are_the_families_kinds():
    """What the tiny configs build: every kind of layer each family has."""
    kinds = {name: [layer_kind(built(name)[0], i)[1] for i in range(built(name)[0].num_hidden_layers)]
             for name in FAMILIES}
    assert kinds["minimax_m3_vl_text"] == ["full_attention"] + ["minimax_m3_sparse"] * 2
    assert kinds["mimo_v2_flash"] == ["full_attention", "sliding_attention"]
    glm, _ = built("glm_moe_dsa")
    modules = [layer_from_hf(glm, i) for i in range(3)]
    assert [m.shared_topk for m in modules] == [False, True, False]
    assert modules[1].indexer is None and modules[0].indexer.rope_interleave
    assert [topk_source_layer(glm, i) for i in range(3)] == [None, 0, None]
    mimo, _ = built("mimo_v2_flash")
    full, sliding = (layer_from_hf(mimo, i) for i in range(2))
    assert (full.num_kv_heads, sliding.num_kv_heads) == (2, 4)  # twice on sliding layers
    assert full.sinks is None and sliding.sinks is not None and sliding.window == 4
    assert (full.head_dim, full.value_head_dim, full.value_scale) == (12, 8, 0.707)
    assert full.rope.cos.shape[-1] == 4  # int(12 * 0.334): a third of each head turns
    laguna, _ = built("laguna")
    assert [layer_from_hf(laguna, i).num_heads for i in range(2)] == [4, 6]
    assert layer_from_hf(laguna, 0).W_gate.weight.shape == (4, 32)  # one gate per head
    element, _ = built("laguna-per-element")
    assert layer_from_hf(element, 1).W_gate.weight.shape == (4 * 8, 32)
    mistral, _ = built("mistral4")
    assert layer_from_hf(mistral, 0).temperature_tuning == (4.0, 0.5, 0.0)
    m3, _ = built("minimax_m3_vl_text")
    sparse = layer_from_hf(m3, 1)
    assert (sparse.block_size, sparse.top_k, sparse.local_blocks) == (3, 2, 1)  # 4 blocks of 12


def test_a_shared_topk_layer_refuses_alone_and_works_with_its_source():
    config, model = built("glm_moe_dsa")
    ids, _, _ = inputs(False)
    records = record_layers(model, ids)
    shared = layer_from_hf(config, 1, records[1]["module"].state_dict())
    with pytest.raises(TypeError, match="shared_topk=True .* pass the SharedTopK"):
        shared(records[1]["input"])
    with pytest.raises(ValueError, match="SharedTopK holds nothing yet"):
        shared(records[1]["input"], topk=SharedTopK())
    got = run_ours(config, records, 1, records[1]["input"], None)
    torch.testing.assert_close(got, records[1]["output"], **TOL)


def test_the_glm_top_k_is_not_decided_by_a_tie():
    """The indexer's scores pass through a ReLU: with few heads, keys can tie at 0 at the top-k
    edge, and then either may be chosen. At this size every query that sees more than k keys has
    a clear gap between its k-th and (k+1)-th score (ours equal the reference's: the parity)."""
    config, model = built("glm_moe_dsa")
    ids, _, _ = inputs(False)
    record = record_layers(model, ids)[0]
    ours = layer_from_hf(config, 0, record["module"].state_dict())
    x, cos, sin = record["input"], ours.rope.cos, ours.rope.sin
    with torch.no_grad():
        query_latent = ours.query_norm(ours.W_query_down(x))  # (B, T, d_q)
        keys = ours.indexer.keys(x, cos, sin, 0)  # (B, T, d_I)
        scores = ours.indexer.scores(x, query_latent, keys, cos, sin, 0)  # (B, T, T)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    ranked = scores.masked_fill(future, -torch.inf).sort(dim=-1, descending=True).values
    k = config.index_topk
    gap = (ranked[:, k:, k - 1] - ranked[:, k:, k]).min().item()  # queries that see > k keys
    print(f"smallest gap at the top-k edge: {gap:.3g}")
    assert gap > 1e-4


# --- the published configs --------------------------------------------------------------------

# The fields attention reads from one published config.json of each family, trimmed. The hub is
# out of reach here: each is a copy others made of the file, named by where it was found.
PUBLISHED = {
    "GLM-5.3": dict(
        source="zai-org/GLM-5.3 config.json, as copied by others: TorchMoE/MoE-Infinity "
               "tests/fixtures/glm_5_3/config.json",
        config=dict(
            model_type="glm_moe_dsa", hidden_size=6144, num_hidden_layers=78,
            num_attention_heads=64, num_key_value_heads=64, q_lora_rank=2048, kv_lora_rank=512,
            qk_nope_head_dim=192, qk_rope_head_dim=64, v_head_dim=256, head_dim=192,
            index_topk=2048, index_n_heads=32, index_head_dim=128, index_topk_freq=4,
            index_skip_topk_offset=3, index_topk_pattern=None, indexer_rope_interleave=True,
            indexer_types=["full"] * 3 + ["shared", "shared", "shared", "full"] * 18 + [
                "shared"] * 3,
            max_position_embeddings=1048576, rms_norm_eps=1e-5, rope_interleave=True,
            rope_parameters={"rope_theta": 8000000, "rope_type": "default"},
            attention_bias=False, attention_dropout=0.0),
    ),
    "MiniMax-M3": dict(
        source="MiniMaxAI/MiniMax-M3 config.json, as copied by others: its text_config fields "
               "as a test copies them from nvidia/MiniMax-M3-NVFP4, its sparse_attention_config "
               "as MLX-port tests and write-ups copy it (sparse_init_block 0)",
        config=dict(
            model_type="minimax_m3_vl", text_config=dict(
                model_type="minimax_m3", hidden_size=6144, num_hidden_layers=60,
                num_attention_heads=64, num_key_value_heads=4, head_dim=128,
                max_position_embeddings=1048576, rms_norm_eps=1e-6, use_gemma_norm=True,
                rope_theta=5000000, rotary_dim=64, partial_rotary_factor=0.5, use_qk_norm=True,
                sparse_attention_config=dict(
                    use_sparse_attention=True, sparse_index_dim=128, sparse_num_index_heads=4,
                    sparse_topk_blocks=16, sparse_block_size=128, sparse_score_type="max",
                    sparse_init_block=0, sparse_local_block=1,
                    sparse_attention_freq=[0, 0, 0] + [1] * 57))),
    ),
    "Mistral Small 4": dict(
        source="mistralai/Mistral-Small-4-119B-2603 config.json text_config, as copied by others "
               "(kv_lora_rank 256, q_lora_rank 1024, qk dims 64 + 64, v 128; its YaRN and "
               "llama_4_scaling_beta as a converter writes them for it); transformers' "
               "Mistral4Config defaults name this checkpoint",
        config=dict(
            model_type="mistral3", text_config=dict(
                model_type="mistral4", hidden_size=4096, num_hidden_layers=36,
                num_attention_heads=32, num_key_value_heads=32, head_dim=128, q_lora_rank=1024,
                kv_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=64, v_head_dim=128,
                max_position_embeddings=1048576, rms_norm_eps=1e-6, rope_interleave=True,
                rope_parameters=dict(type="yarn", rope_type="yarn", rope_theta=10000.0,
                                     factor=128.0, original_max_position_embeddings=8192,
                                     beta_fast=32.0, beta_slow=1.0, mscale=1.0,
                                     mscale_all_dim=1.0, llama_4_scaling_beta=0.1))),
    ),
    "MiMo-V2-Flash": dict(
        source="XiaomiMiMo/MiMo-V2-Flash config.json, as copied by others (a Rust port's "
               "`mimo_v2_flash_hub_config` test)",
        config=dict(
            model_type="mimo_v2_flash", hidden_size=4096, num_hidden_layers=48,
            num_attention_heads=64, num_key_value_heads=4, head_dim=192, v_head_dim=128,
            swa_num_attention_heads=64, swa_num_key_value_heads=8, swa_head_dim=192,
            swa_v_head_dim=128, partial_rotary_factor=0.334, rope_theta=5000000,
            swa_rope_theta=10000, sliding_window=128, sliding_window_size=128,
            hybrid_layer_pattern=[int(not (i == 0 or (i + 1) % 6 == 0)) for i in range(48)],
            add_swa_attention_sink_bias=True, add_full_attention_sink_bias=False,
            attention_value_scale=0.707, max_position_embeddings=262144),
    ),
    "Laguna XS.2.1": dict(
        source="poolside/Laguna-XS-2.1 config.json, as copied by others (an MLX loader's "
               "tests, trimmed to 8 of its 40 layers)",
        config=dict(
            model_type="laguna", hidden_size=2048, num_hidden_layers=8, num_attention_heads=48,
            num_attention_heads_per_layer=[48, 64, 64, 64, 48, 64, 64, 64],
            num_key_value_heads=8, head_dim=128, max_position_embeddings=262144,
            rms_norm_eps=1e-6, sliding_window=512, gating="per-head",
            layer_types=["full_attention"] + ["sliding_attention"] * 3 + ["full_attention"] + [
                "sliding_attention"] * 3,
            rope_parameters={
                "full_attention": dict(rope_theta=500000.0, rope_type="yarn", factor=32.0,
                                       original_max_position_embeddings=8192, beta_slow=1.0,
                                       beta_fast=64.0, attention_factor=1.3465735902799727,
                                       partial_rotary_factor=0.5),
                "sliding_attention": dict(rope_type="default", rope_theta=10000.0,
                                          partial_rotary_factor=1.0)}),
    ),
}


PUBLISHED["GLM-5.3, indexer_types derived"] = dict(  # transformers derives them from the rest
    source=PUBLISHED["GLM-5.3"]["source"] + ", without its indexer_types",
    config={k: v for k, v in PUBLISHED["GLM-5.3"]["config"].items() if k != "indexer_types"},
)


def options_of(config, index):
    """The keyword arguments our module for layer ``index`` is built with."""
    from llm_attention import hf_config

    kind = layer_kind(config, index)[1]
    family = hf_config.config_dict(config)["model_type"]
    if kind == "minimax_m3_sparse":
        return hf_config.block_sparse_attention_options(config, index)
    if family in hf_config.SPARSE_LATENT_FAMILIES:
        return hf_config.sparse_latent_attention_options(config, index)
    if family in hf_config.LATENT_FAMILIES:
        return hf_config.latent_attention_options(config, index)
    return hf_config.modern_attention_options(config, index)


def transformers_config(published: dict):
    """transformers' config class built from the same fields, as from_pretrained builds it."""
    values = dict(published)
    family = values.pop("model_type")
    text = values.pop("text_config", None)
    if text is not None:  # the text model's own config class
        text = dict(text)
        text.pop("model_type")
        family = {"minimax_m3_vl": "minimax_m3_vl_text", "mistral3": "mistral4"}[family]
        values = text
    return transformers.AutoConfig.for_model(family, **values)


@pytest.mark.parametrize("name", PUBLISHED)
def test_a_published_config_reads_as_transformers_reads_it(name):
    """Every layer's options from the config.json's fields equal those from transformers'
    config class built from them (which fills its defaults and derives its layer kinds)."""
    published = PUBLISHED[name]["config"]
    theirs = transformers_config(published)
    for index in range(theirs.num_hidden_layers):
        assert options_of(published, index) == options_of(theirs, index), (name, index)


def test_the_published_configs_build_what_the_models_are():
    """What the copies say, read through our reader (the report's table)."""
    glm = PUBLISHED["GLM-5.3"]["config"]
    assert [topk_source_layer(glm, i) for i in range(8)] == [None, None, None, 2, 2, 2, None, 6]
    assert options_of(glm, 0)["index_rope_interleave"]
    m3 = PUBLISHED["MiniMax-M3"]["config"]
    sparse = options_of(m3, 3)
    assert layer_kind(m3, 2)[1] == "full_attention" and layer_kind(m3, 3)[1] == "minimax_m3_sparse"
    assert (sparse["block_size"], sparse["top_k"], sparse["local_blocks"], sparse["index_n_heads"],
            sparse["partial_rotary_factor"], sparse["rope_base"]) == (128, 16, 1, 4, 0.5, 5e6)
    mistral = options_of(PUBLISHED["Mistral Small 4"]["config"], 0)
    assert mistral["temperature_tuning"] == (8192, 0.1, 0)
    assert mistral["rope_scaling"]["factor"] == 128.0 and mistral["kv_lora_rank"] == 256
    mimo = PUBLISHED["MiMo-V2-Flash"]["config"]
    full, sliding = options_of(mimo, 0), options_of(mimo, 1)
    assert (sliding["window"], sliding["num_kv_heads"], full["num_kv_heads"]) == (129, 8, 4)
    assert sliding["sinks"] and not full["sinks"] and full["value_scale"] == 0.707
    laguna = PUBLISHED["Laguna XS.2.1"]["config"]
    assert [options_of(laguna, i)["num_heads"] for i in range(4)] == [48, 64, 64, 64]
    assert options_of(laguna, 0)["rope_scaling"]["rope_type"] == "yarn"
    with pytest.raises(ValueError, match="swa_num_key_value_heads=4 differs from what "
                                         "transformers builds for mimo_v2_flash"):
        options_of({**mimo, "swa_num_key_value_heads": 4}, 1)
    first_block = {**m3["text_config"], "sparse_attention_config": {
        **m3["text_config"]["sparse_attention_config"], "sparse_init_block": 1}}
    with pytest.raises(ValueError, match="sparse_init_block=1 is not implemented from a config"):
        options_of({**m3, "text_config": first_block}, 3)
    with pytest.raises(ValueError, match="indexer_rope_interleave=False"):
        options_of({**glm, "indexer_rope_interleave": False}, 0)
