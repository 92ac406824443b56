"""Every token mixer of tiny Nemotron-H, Granite 4.0 hybrid, Falcon-H1, Bamba and OLMo-Hybrid
models against ``layer_from_hf``'s module, on transformers 5.23's pure-torch paths.

A whole tiny model of each family (``AutoModelForCausalLM.from_config``, eager attention,
float32, random weights with slow decays so that the state carries information past the
convolution and across chunk boundaries at this length; nothing downloaded) gives each mixer
its real input: a forward hook on every token mixer (``mixer``, ``mamba``, ``self_attn``,
``linear_attn``; Falcon-H1's two side by side) records it. Ours runs on the same input:
prefill of a left-padded batch (``every_mixer``; the site's ``layer_parity.every_layer`` for
OLMo-Hybrid too), and cached decoding against the model with its own cache (a prompt, then
single tokens), compared at real tokens, ``atol = rtol = 1e-5``. Ours reads chunks of 5,
transformers' Mamba-2 chunks of 8, so both cross chunk boundaries, at different places.

``FAMILIES`` holds everything about each family: its tiny config and, per mechanism, how to
switch it off on the transformers side. Each switch must move the reference's mixer outputs
beyond 1e-3 at these sizes, or the comparison would not have reached that mechanism.
The last tests record what transformers does with left padding: with a projection bias its
Mamba-2 mixers carry the pads through the short convolution into the state.
"""

from __future__ import annotations

import copy
import functools
import math
import os
import pathlib

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported

import pytest  # noqa: E402
import torch  # noqa: E402

from llm_attention.hf_config import mixer_names  # noqa: E402
from llm_attention.hf_layers import layer_from_hf, layer_kind  # noqa: E402

pytestmark = pytest.mark.xdist_group(  # the worker that has transformers imported already
    (pathlib.Path(__file__).resolve().parents[1] / "docs" / "modern" / "combined.md").as_posix()
)
TOL = dict(atol=1e-5, rtol=1e-5)
REACH = 1e-3  # a mechanism switched off must move the reference this much
BATCH, LENGTH, PAD, PROMPT = 2, 20, 5, 12  # row 1 has PAD pads; decoding after PROMPT
OURS = dict(chunk_size=5)  # our chunks (theirs: mamba_chunk_size 8; Gated DeltaNet 64)
COMMON = dict(vocab_size=97, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
              max_position_embeddings=128, intermediate_size=64, pad_token_id=0,
              bos_token_id=1, eos_token_id=2)


# ---- switches on the transformers side (each mutates a copy of the model) ------------------

def _each(model, cls_name):
    """Every submodule of ``model`` whose class name ends with ``cls_name``."""
    return [m for m in model.modules() if type(m).__name__.endswith(cls_name)]


def _mamba(model):
    return [m for m in model.modules() if hasattr(m, "A_log") and hasattr(m, "D")]


def _set(modules, name, value):
    with torch.no_grad():
        for module in modules:
            getattr(module, name).fill_(value)


def no_state(model, patch):  # every token forgets the state at once (exp(dt A) = 0)
    _set(_mamba(model) or _each(model, "GatedDeltaNet"), "A_log", math.log(1e4))


def no_decay(model, patch):  # A = 0: the state keeps everything
    _set(_mamba(model) or _each(model, "GatedDeltaNet"), "A_log", -1e4)


def no_conv(model, patch):  # the short convolution passes each token through
    with torch.no_grad():
        for module in _mamba(model) or _each(model, "GatedDeltaNet"):
            module.conv1d.weight.zero_()
            module.conv1d.weight[..., -1] = 1
            if module.conv1d.bias is not None:
                module.conv1d.bias.zero_()


def no_gate(model, patch):  # the norm without its SiLU gate
    for module in _mamba(model):
        norm = module.norm
        patch.setattr(norm, "forward", lambda h, gate=None, norm=norm: type(norm).forward(
            norm, h, None))


def no_norm_groups(model, patch):  # one RMS over all I channels instead of per group
    for module in _mamba(model):
        if hasattr(module.norm, "group_size"):
            patch.setattr(module.norm, "group_size", module.intermediate_size)
        else:  # Falcon-H1's norm counts groups
            patch.setattr(module.norm, "n_groups", 1)


def no_skip(model, patch):
    _set(_mamba(model), "D", 0.0)


def one_group(model, patch):  # every head reads group 0's B and C
    with torch.no_grad():
        for module in _mamba(model):
            inner, width = module.intermediate_size, module.ssm_state_size
            for start in (inner, inner + module.n_groups * width):  # B, then C (conv rows)
                rows = module.conv1d.weight[start:start + module.n_groups * width]
                rows.copy_(rows[:width].repeat(module.n_groups, 1, 1))
                if module.conv1d.bias is not None:
                    bias = module.conv1d.bias[start:start + module.n_groups * width]
                    bias.copy_(bias[:width].repeat(module.n_groups))
                proj = module.in_proj.weight[inner + start:inner + start
                                             + module.n_groups * width]
                proj.copy_(proj[:width].repeat(module.n_groups, 1))


def chunks_apart(model, patch):  # each of transformers' chunks starts from a zero state
    modeling = __import__(type(_mamba(model)[0]).__module__, fromlist=["_"])
    scan = modeling.mamba2_chunk_scan

    def apart(hidden, dt, A, B, C, chunk_size, **kw):
        kw.pop("initial_states", None)
        final = kw.get("return_final_states")
        pieces = [scan(hidden[:, s:s + chunk_size], dt[:, s:s + chunk_size], A,
                       B[:, s:s + chunk_size], C[:, s:s + chunk_size], chunk_size, **kw)
                  for s in range(0, hidden.shape[1], chunk_size)]
        outs = [p[0] if final else p for p in pieces]
        out = torch.cat(outs, dim=1)
        return (out, pieces[-1][1]) if final else out
    patch.setattr(modeling, "mamba2_chunk_scan", apart)


def no_key_groups(model, patch):  # Gated DeltaNet: every value head reads key head 0
    with torch.no_grad():
        for module in _each(model, "GatedDeltaNet"):
            width = module.head_k_dim
            for proj, start in ((module.q_proj, 0), (module.k_proj, module.key_dim)):
                proj.weight.copy_(proj.weight[:width].repeat(module.num_k_heads, 1))
                rows = module.conv1d.weight[start:start + module.key_dim]
                rows.copy_(rows[:width].repeat(module.num_k_heads, 1, 1))


SILU_OF_ONE = 1.2784645427610738  # silu(x) = 1 there: a gate that lets all through


def no_gdn_gate(model, patch):
    for module in _each(model, "GatedDeltaNet"):
        norm = module.o_norm
        patch.setattr(norm, "forward", lambda h, gate, norm=norm: type(norm).forward(
            norm, h, torch.full_like(gate, SILU_OF_ONE)))


def beta_once(model, patch):  # OLMo-Hybrid: beta in (0, 1), not (0, 2)
    for module in _each(model, "GatedDeltaNet"):
        patch.setattr(module, "allow_neg_eigval", False)


def qk_norm_per_head(model, patch):  # OLMo-Hybrid: the QK-norm over each head instead
    for attention in _each(model, "Attention"):
        for norm in (attention.q_norm, attention.k_norm):
            def per_head(h, norm=norm, d=attention.head_dim):
                heads = h.float().unflatten(-1, (-1, d))
                heads = heads * torch.rsqrt(heads.pow(2).mean(-1, keepdim=True)
                                            + norm.variance_epsilon)
                return (norm.weight * heads.flatten(-2)).to(h.dtype)
            patch.setattr(norm, "forward", per_head)


def no_rotary(model, patch):
    patch.setattr(model.model, "rotary_emb", None)


def full_rotary(model, patch):  # Bamba: turn the whole head instead of its half
    config = copy.deepcopy(model.config)
    config.rope_parameters = {**config.rope_parameters, "partial_rotary_factor": 1.0}
    patch.setattr(model.model, "rotary_emb", type(model.model.rotary_emb)(config))


def plain_attention_scale(model, patch):  # Granite: 1 / sqrt(d_h), not the multiplier
    for attention in _each(model, "Attention"):
        patch.setattr(attention, "scaling", attention.head_dim**-0.5)


def no_key_multiplier(model, patch):  # Falcon-H1
    for attention in _each(model, "Attention"):
        patch.setattr(attention, "key_multiplier", 1.0)


def no_mup_vector(model, patch):  # Falcon-H1: ssm_multipliers, outside the state dict
    for module in _mamba(model):
        patch.setattr(module, "mup_vector", torch.ones_like(module.mup_vector))


def no_ssm_in_multiplier(model, patch):  # Falcon-H1
    for module in _mamba(model):
        patch.setattr(module, "ssm_in_multiplier", 1.0)


MAMBA2 = dict(state=no_state, decay=no_decay, conv=no_conv, gate=no_gate,
              norm_groups=no_norm_groups, skip_D=no_skip, groups_of_B_C=one_group,
              chunks_crossing=chunks_apart)
MAMBA_SIZES = dict(mamba_n_heads=8, mamba_d_state=16, mamba_n_groups=2, mamba_chunk_size=8)

# One entry per family: its tiny config, and how to switch each mechanism off.
FAMILIES = {
    "nemotron_h": dict(
        tiny=dict(COMMON, layers_block_type=["linear_attention", "full_attention", "mlp",
                                             "linear_attention"],
                  head_dim=16, mamba_num_heads=8, mamba_head_dim=8, ssm_state_size=16,
                  n_groups=2, conv_kernel=4, chunk_size=8, mlp_hidden_act="relu2"),
        mechanisms=MAMBA2,
    ),
    "granitemoehybrid": dict(
        tiny=dict(COMMON, **MAMBA_SIZES, num_hidden_layers=3,
                  layer_types=["mamba", "attention", "mamba"], mamba_d_head=16,
                  num_local_experts=0, attention_multiplier=0.3,
                  position_embedding_type="rope"),
        mechanisms=dict(MAMBA2, attention_multiplier=plain_attention_scale,
                        rotary=no_rotary),
    ),
    "falcon_h1": dict(
        tiny=dict(COMMON, **MAMBA_SIZES, num_hidden_layers=2, head_dim=8, mamba_d_ssm=64,
                  mamba_d_head=8, mamba_rms_norm=True, key_multiplier=0.7,
                  ssm_multipliers=[0.8, 1.2, 0.9, 1.1, 1.3], ssm_in_multiplier=1.1),
        mechanisms=dict(MAMBA2, mup_vector=no_mup_vector,
                        ssm_in_multiplier=no_ssm_in_multiplier,
                        key_multiplier=no_key_multiplier),
    ),
    "bamba": dict(
        tiny=dict(COMMON, **MAMBA_SIZES, num_hidden_layers=3, attn_layer_indices=[1],
                  mamba_d_head=16),
        mechanisms=dict(MAMBA2, partial_rotary=full_rotary),
    ),
    "olmo_hybrid": dict(
        tiny=dict(COMMON, num_hidden_layers=4, linear_num_key_heads=2,
                  linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=16),
        mechanisms=dict(state=no_state, decay=no_decay, conv=no_conv, gate=no_gdn_gate,
                        groups_of_keys=no_key_groups, doubled_beta=beta_once,
                        qk_norm_across_heads=qk_norm_per_head, rotary=no_rotary),
    ),
}


# ---- the models and their records -----------------------------------------------------------

def randomize(model) -> None:
    """Slow decays, step sizes from about 0.05 to 0.3, norms around 1, the rest N(0, 0.2)."""
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("A_log"):
                parameter.copy_(torch.empty(parameter.shape).uniform_(0.02, 0.2,
                                                                      generator=gen).log())
            elif name.endswith("dt_bias"):
                parameter.copy_(torch.empty(parameter.shape).uniform_(-3, -1, generator=gen))
            elif "norm" in name:
                parameter.copy_(torch.empty(parameter.shape).uniform_(0.5, 1.5, generator=gen))
            else:
                parameter.copy_(torch.randn(parameter.shape, generator=gen) * 0.2)


def make(family, **changes):
    """(config, model) of ``family``'s tiny config (with ``changes``), randomized."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(family, **{**FAMILIES[family]["tiny"], **changes})
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).eval()
    randomize(model)
    return config, model


@functools.cache
def built(family):
    return make(family)


def batch(seed=2):
    """Token ids ``(BATCH, LENGTH)`` and their mask: row 1 left-padded by ``PAD``."""
    ids = torch.randint(3, COMMON["vocab_size"], (BATCH, LENGTH),
                        generator=torch.Generator().manual_seed(seed))
    mask = torch.ones(BATCH, LENGTH, dtype=torch.long)
    mask[1, :PAD] = 0
    ids[1, :PAD] = COMMON["pad_token_id"]
    return ids, mask


def token_mixers(model, config):
    """(layer, transformers' name, module) of every token mixer, in order."""
    layers = model.model.layers
    return [(i, name, getattr(layer, name)) for i, layer in enumerate(layers)
            for name in mixer_names(config, i)]


def record(model, config, calls):
    """Run ``calls`` (kwargs of ``model``) in order; per mixer, the (input, output) of each."""
    records = {(i, name): [] for i, name, _ in token_mixers(model, config)}
    handles = []
    for i, name, module in token_mixers(model, config):
        def hook(module, args, kwargs, output, key=(i, name)):
            hidden = kwargs.get("hidden_states", args[0] if args else None)
            out = output[0] if isinstance(output, tuple) else output
            records[key].append((hidden.detach(), out.detach()))
        handles.append(module.register_forward_hook(hook, with_kwargs=True))
    try:
        with torch.no_grad():
            for call in calls:
                model(**call)
    finally:
        for handle in handles:
            handle.remove()
    return records


def ours(config, model, i, name):
    """``layer_from_hf``'s module for mixer ``name`` of layer ``i``, its weights loaded."""
    many = len(mixer_names(config, i)) > 1
    module = getattr(model.model.layers[i], name)
    linear = mixer_names(config, i)[name] == "linear_attention"
    overrides = OURS if linear else {}  # attention keeps its own options
    return layer_from_hf(config, i, module.state_dict(), mixer=name if many else None,
                         **overrides)


def every_mixer(config, model, ids, mask):
    """Per token mixer: layer, name, kind, our class, and the largest |ours -
    transformers| at real tokens of a left-padded prefill (as ``every_layer`` does)."""
    records = record(model, config, [dict(input_ids=ids, attention_mask=mask,
                                          use_cache=False)])
    real = mask.bool()
    rows = []
    for (i, name), [(hidden, expected)] in records.items():
        module = ours(config, model, i, name)
        with torch.no_grad():
            got = module(hidden, real)
        rows.append(dict(layer=i, mixer=name, kind=mixer_names(config, i)[name],
                         module=type(module).__name__, size=expected[real].abs().max().item(),
                         max_difference=(got[real] - expected[real]).abs().max().item(),
                         got=got, expected=expected))
    return rows


def decode_calls(ids, mask):
    """The prompt, then one token per call, each with the mask of everything so far and
    its positions (Bamba's model would otherwise put every new token at position 0)."""
    ends = [PROMPT, *range(PROMPT + 1, LENGTH + 1)]
    return [dict(input_ids=ids[:, start:end], attention_mask=mask[:, :end],
                 position_ids=torch.arange(start, end).unsqueeze(0))
            for start, end in zip([0, *ends[:-1]], ends)]


def decode_both(config, model, ids, mask):
    """Transformers with its own cache, ours with ours, on every mixer's recorded inputs:
    the largest difference at real tokens per mixer, and per call."""
    from transformers import DynamicCache

    cache = DynamicCache(config=config)
    calls = [dict(call, past_key_values=cache, use_cache=True) for call in
             decode_calls(ids, mask)]
    records = record(model, config, calls)
    found = {}
    for (i, name), steps in records.items():
        module = ours(config, model, i, name)
        our_cache = module.make_cache(BATCH)
        gaps, start = [], 0
        for hidden, expected in steps:
            real = mask[:, start:start + hidden.shape[1]].bool()
            with torch.no_grad():
                got = module(hidden, real, cache=our_cache)
            gaps.append((got[real] - expected[real]).abs().max().item())
            start += hidden.shape[1]
        found[(i, name)] = gaps
    return found


# ---- the tests ---------------------------------------------------------------------------

@pytest.mark.parametrize("family", FAMILIES)
def test_every_token_mixer_matches_on_a_left_padded_prefill(family):
    config, model = built(family)
    ids, mask = batch()
    rows = every_mixer(config, model, ids, mask)
    print(family, {(r["layer"], r["mixer"]): f"{r['max_difference']:.1e}" for r in rows})
    kinds = {r["kind"] for r in rows}
    assert kinds == {"linear_attention", "full_attention"}  # both kinds are checked
    for row in rows:
        assert row["size"] > 0.5, row["layer"]  # outputs large enough for the tolerance
        real = mask.bool()
        torch.testing.assert_close(row["got"][real], row["expected"][real], **TOL)


@pytest.mark.parametrize("family", FAMILIES)
def test_cached_decoding_matches_the_model_with_its_own_cache(family):
    config, model = built(family)
    ids, mask = batch(seed=3)
    found = decode_both(config, model, ids, mask)
    print(family, {key: f"{max(gaps):.1e}" for key, gaps in found.items()})
    assert len(next(iter(found.values()))) == 1 + LENGTH - PROMPT  # prompt + single tokens
    for key, gaps in found.items():
        assert max(gaps) <= 2e-5, (key, gaps)


def test_every_layer_of_the_site_agrees_for_olmo_hybrid():
    """The site's own ``every_layer`` (it hooks ``self_attn`` and ``linear_attn``) sees the
    same OLMo-Hybrid layers equal."""
    from llm_attention_site.layer_parity import every_layer

    config, model = built("olmo_hybrid")
    ids, mask = batch()
    rows = every_layer(model, config, ids, mask)  # its chunks of 64: one chunk here
    assert [r["module"] for r in rows] == ["GatedDeltaNet"] * 3 + ["ModernAttention"]
    assert max(r["max_difference"] for r in rows) <= 2e-5


@functools.cache
def prefill_records(family):
    config, model = built(family)
    ids, mask = batch()
    return record(model, config, [dict(input_ids=ids, attention_mask=mask, use_cache=False)])


def reach(family, switch, patch):
    """The largest change of any mixer's output at real tokens when ``switch`` is off."""
    config, model = built(family)
    ids, mask = batch()
    call = [dict(input_ids=ids, attention_mask=mask, use_cache=False)]
    before = prefill_records(family)
    changed = copy.deepcopy(model)
    switch(changed, patch)
    after = record(changed, config, call)
    real = mask.bool()
    return max((after[key][0][1] - out[0][1])[real].abs().max().item()
               for key, out in before.items())


@pytest.mark.parametrize("family, mechanism", [
    (family, mechanism) for family, entry in FAMILIES.items()
    for mechanism in entry["mechanisms"]])
def test_each_mechanism_is_reached_at_these_sizes(family, mechanism, monkeypatch):
    moved = reach(family, FAMILIES[family]["mechanisms"][mechanism], monkeypatch)
    print(family, mechanism, f"{moved:.2e}")
    assert moved > REACH


@pytest.mark.parametrize("family", ["nemotron_h", "falcon_h1", "olmo_hybrid"])
def test_the_state_carries_past_the_convolution_and_across_chunks(family):
    """A nudge to the first real token's input moves layer 0's output at the last token
    (14 tokens and two of transformers' chunk boundaries later, far past the convolution's
    4 taps), in transformers and in ours alike."""
    config, model = built(family)
    ids, mask = batch()
    name = next(iter(mixer_names(config, 0)))
    reference = getattr(model.model.layers[0], name)
    module = ours(config, model, 0, name)
    x = torch.randn(BATCH, LENGTH, COMMON["hidden_size"],
                    generator=torch.Generator().manual_seed(4))
    nudged = x.clone()
    nudged[1, PAD] += 1.0
    real = mask.bool()
    with torch.no_grad():
        moved = (reference(nudged, attention_mask=mask) - reference(x, attention_mask=mask))
        ours_moved = module(nudged, real) - module(x, real)
    assert moved[1, -1].abs().max() > REACH
    torch.testing.assert_close(ours_moved[1, -1], moved[1, -1], **TOL)


def test_falcon_h1_takes_one_mixer_at_a_time():
    config, model = built("falcon_h1")
    state = model.model.layers[0].mamba.state_dict()
    with pytest.raises(ValueError, match=r"2 token mixers side by side: pass mixer= one of "
                                         r"'mamba', 'self_attn'"):
        layer_from_hf(config, 0, state)
    with pytest.raises(ValueError, match=r"mixer='mixer' is not a token mixer of layer 0"):
        layer_from_hf(config, 0, state, mixer="mixer")
    assert "mup_vector" not in state  # it comes from config.ssm_multipliers


def test_one_mixer_layers_accept_only_their_own_name_and_mlp_blocks_are_refused():
    config, model = built("nemotron_h")
    assert layer_kind(config, 2) == ("nemotron_h", "mlp")
    with pytest.raises(ValueError, match=r"layer 2 of 'nemotron_h' is a 'mlp' block: it has "
                                         r"no token mixer"):
        layer_from_hf(config, 2)
    state = model.model.layers[0].mixer.state_dict()
    assert type(layer_from_hf(config, 0, state, mixer="mixer")).__name__ == "Mamba2"
    with pytest.raises(ValueError, match=r"mixer='mamba' is not a token mixer of layer 0 of "
                                         r"'nemotron_h'; it has 'mixer'"):
        layer_from_hf(config, 0, state, mixer="mamba")
    bamba, _ = built("bamba")
    with pytest.raises(ValueError, match=r"it has 'self_attn'"):
        layer_from_hf(bamba, 1, mixer="mamba")


@pytest.mark.parametrize("norm, before", [(False, True), (True, False)],
                         ids=["gate-only", "gate-then-norm"])
def test_falcon_h1_norm_options_match(norm, before):
    config, model = make("falcon_h1", mamba_rms_norm=norm, mamba_norm_before_gate=before)
    ids, mask = batch()
    for row in every_mixer(config, model, ids, mask):
        assert row["max_difference"] <= 2e-5, row["layer"]


PROJECTION_BIAS = {"nemotron_h": dict(use_bias=True), "granitemoehybrid":
                   dict(mamba_proj_bias=True), "falcon_h1": dict(mamba_proj_bias=True),
                   "bamba": dict(mamba_proj_bias=True)}


@pytest.mark.parametrize("family", PROJECTION_BIAS)
def test_with_a_projection_bias_transformers_leaks_padding_and_ours_does_not(family):
    """transformers zeroes a padded token's input, not its projection: the projection's
    bias enters the short convolution of the next real tokens and from there the state. Ours
    equals transformers on unpadded rows, and on padded rows equals the prompt alone."""
    config, model = make(family, **PROJECTION_BIAS[family])
    i, name, reference = next(m for m in token_mixers(model, config)
                              if mixer_names(config, m[0])[m[1]] == "linear_attention")
    module = ours(config, model, i, name)
    x = torch.randn(1, LENGTH - PAD, COMMON["hidden_size"],
                    generator=torch.Generator().manual_seed(6))
    padded = torch.cat([torch.randn(1, PAD, COMMON["hidden_size"]), x], dim=1)
    mask = torch.ones(1, LENGTH, dtype=torch.long)
    mask[0, :PAD] = 0
    with torch.no_grad():
        alone, theirs = reference(x), reference(padded, attention_mask=mask)
        ours_alone, ours_padded = module(x), module(padded, mask.bool())
    torch.testing.assert_close(ours_alone, alone, **TOL)  # the bias itself matches
    torch.testing.assert_close(ours_padded[:, PAD:], alone, **TOL)
    leak = (theirs[:, PAD:] - alone).abs().amax(-1)[0]  # (T,)
    print(family, "transformers' padded row minus the prompt alone:",
          [f"{v:.0e}" for v in leak.tolist()])
    assert leak[0] > REACH and leak[-1] > REACH  # at once and, through the state, later


@pytest.mark.parametrize("family", ["nemotron_h", "olmo_hybrid"])
def test_without_a_projection_bias_transformers_padding_does_not_leak(family):
    config, model = built(family)
    i, name, reference = next(m for m in token_mixers(model, config)
                              if mixer_names(config, m[0])[m[1]] == "linear_attention")
    x = torch.randn(1, LENGTH - PAD, COMMON["hidden_size"],
                    generator=torch.Generator().manual_seed(6))
    padded = torch.cat([torch.randn(1, PAD, COMMON["hidden_size"]) * 3, x], dim=1)
    mask = torch.ones(1, LENGTH, dtype=torch.long)
    mask[0, :PAD] = 0
    with torch.no_grad():
        torch.testing.assert_close(reference(padded, attention_mask=mask)[:, PAD:],
                                   reference(x), **TOL)


def test_nemotron_h_clamps_the_step_size_in_prefill_but_not_in_its_decoding_step():
    """NemotronHMamba2Mixer clamps dt to (time_step_min, inf) in its chunked scan, and its
    single-token step does not clamp: with a minimum that binds, transformers' own decoding
    departs from its prefill. Ours clamps in every form: it equals transformers' prefill,
    token by token too."""
    config, model = make("nemotron_h", time_step_min=0.2)
    ids, mask = batch()
    rows = every_mixer(config, model, ids, mask)
    assert max(r["max_difference"] for r in rows) <= 2e-5
    free, free_model = make("nemotron_h", time_step_min=1e-6)  # log(0) fails at init
    free_model.load_state_dict(model.state_dict())
    moved = [(a["expected"] - b["expected"])[mask.bool()].abs().max().item()
             for a, b in zip(rows, every_mixer(free, free_model, ids, mask))]
    assert max(moved) > REACH  # the minimum binds at these sizes
    found = decode_both(config, model, ids, mask)
    assert max(max(g[1:]) for g in found.values()) > REACH  # their steps do not clamp
    module = ours(config, model, 0, "mixer")
    hidden = record(model, config, [dict(input_ids=ids, attention_mask=mask,
                                         use_cache=False)])[(0, "mixer")][0][0]
    with torch.no_grad():
        whole = module(hidden, mask.bool())
        cache = module.make_cache(BATCH)
        steps = torch.cat([module(hidden[:, t:t + 1], mask[:, t:t + 1].bool(), cache=cache)
                           for t in range(LENGTH)], dim=1)
    torch.testing.assert_close(steps[mask.bool()], whole[mask.bool()], **TOL)


# ---- config.json dicts read as transformers reads them -----------------------------------

# Nemotron-H: a Nemotron 3 Nano-shaped config.json as copied by others (NVIDIA-NeMo/
# Megatron-Bridge, tests/unit_tests/models/nemotronh/test_nemotron_h_bridge.py, its
# active_nemotronh_config_dict: a test fixture, not necessarily the published file), with the
# older spellings (hybrid_override_pattern, no head_dim).
NEMOTRON_H_JSON = dict(
    model_type="nemotron_h", hidden_size=2688, num_hidden_layers=52,
    hybrid_override_pattern="MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
    num_attention_heads=32, num_key_value_heads=2, attention_head_dim=128,
    mamba_num_heads=64, mamba_head_dim=64, n_groups=8, ssm_state_size=128, conv_kernel=4,
    chunk_size=128, expand=2, use_conv_bias=True, mamba_proj_bias=False, use_bias=False,
    mamba_hidden_act="silu", layer_norm_epsilon=1e-5, max_position_embeddings=8192,
    intermediate_size=1856, vocab_size=131072,
)
# Falcon-H1: the 0.5B config.json as copied by others (NVIDIA-NeMo/Megatron-Bridge,
# tests/unit_tests/models/falcon_h1/test_falcon_h1_bridge.py, FALCON_H1_500M_CONFIG):
# head_dim 64 is not hidden_size / num_attention_heads, and the gate-only path (no norm).
FALCON_H1_JSON = dict(
    model_type="falcon_h1", hidden_size=1024, num_hidden_layers=36, num_attention_heads=8,
    num_key_value_heads=2, head_dim=64, intermediate_size=2048, key_multiplier=0.39062499999999994,
    attention_in_multiplier=1.0, attention_out_multiplier=0.9375, mamba_chunk_size=128,
    mamba_conv_bias=True, mamba_d_conv=4, mamba_d_head=64, mamba_d_state=128, mamba_expand=2,
    mamba_n_groups=1, mamba_n_heads=24, mamba_norm_before_gate=False, mamba_proj_bias=False,
    mamba_rms_norm=False, max_position_embeddings=16384, projectors_bias=False,
    mamba_d_ssm=1536,  # absent from the copy; transformers refuses the copy without it
    # (24 heads of 64 are not mamba_expand 2 x hidden_size 1024)
    rms_norm_eps=1e-5, rope_theta=1e11, ssm_in_multiplier=1.25,
    ssm_multipliers=[0.3535533905932738, 0.25, 0.3535533905932738, 0.5, 0.3535533905932738],
    ssm_out_multiplier=0.23570226039551587, vocab_size=32784,
)
# The other families' config.json spellings (small, not published sizes): Granite's
# "mamba"/"attention" layer names and NoPE; Bamba's attention indices and top-level
# rope_theta; OLMo-Hybrid without rotary positions (a null rope_theta) and with
# rope_parameters null (which transformers fills with rope_theta 10000: rotary after all).
GRANITE_JSON = dict(
    model_type="granitemoehybrid", hidden_size=64, num_hidden_layers=4,
    layer_types=["mamba", "mamba", "attention", "mamba"], num_attention_heads=4,
    num_key_value_heads=2, attention_multiplier=0.0078125, position_embedding_type="nope",
    rope_theta=10000, mamba_n_heads=8, mamba_d_head="auto", mamba_d_state=16,
    mamba_n_groups=2, mamba_expand=2, num_local_experts=0, max_position_embeddings=128,
)
BAMBA_JSON = dict(
    model_type="bamba", hidden_size=64, num_hidden_layers=4, attn_layer_indices=[2],
    num_attention_heads=4, num_key_value_heads=2, rope_theta=10000, mamba_n_heads=8,
    mamba_d_state=16, mamba_n_groups=2, max_position_embeddings=128,
)
OLMO_HYBRID_JSON = dict(
    model_type="olmo_hybrid", hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
    num_key_value_heads=4, linear_num_key_heads=2, linear_num_value_heads=4,
    linear_key_head_dim=8, linear_value_head_dim=16,
    rope_parameters={"rope_type": "default", "rope_theta": None},
    max_position_embeddings=128, pad_token_id=0, bos_token_id=1, eos_token_id=2,
)
CONFIG_JSONS = dict(nemotron_h=NEMOTRON_H_JSON, falcon_h1=FALCON_H1_JSON,
                    granitemoehybrid=GRANITE_JSON, bamba=BAMBA_JSON, olmo_hybrid=OLMO_HYBRID_JSON,
                    olmo_hybrid_null_rope=dict(OLMO_HYBRID_JSON, rope_parameters=None))


@pytest.mark.parametrize("family", CONFIG_JSONS)
def test_a_config_json_reads_as_transformers_reads_it(family):
    """Every layer's kind, token mixers and options: the same from the dict as from the
    config object transformers makes of it (older names, defaults, legacy layer names)."""
    from transformers import AutoConfig

    from llm_attention.hf_config import (
        linear_attention_options, mamba2_options, modern_attention_options,
    )

    as_json = CONFIG_JSONS[family]
    config = AutoConfig.for_model(**as_json)
    olmo = as_json["model_type"] == "olmo_hybrid"
    readers = dict(linear_attention=linear_attention_options if olmo else mamba2_options,
                   full_attention=modern_attention_options)
    seen = set()
    for i in range(config.num_hidden_layers):
        assert layer_kind(as_json, i) == layer_kind(config, i), i
        assert mixer_names(as_json, i) == mixer_names(config, i), i
        for kind in mixer_names(config, i).values():
            seen.add(kind)
            assert readers[kind](as_json, i) == readers[kind](config, i), (i, kind)
    assert seen == {"linear_attention", "full_attention"}
    if olmo:  # rotary exactly where transformers' model builds a rotary table
        rotary = config.rope_parameters and config.rope_parameters.get("rope_theta")
        assert modern_attention_options(as_json, 3).get("nope", False) == (not rotary)
