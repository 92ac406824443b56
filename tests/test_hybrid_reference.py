"""The hybrids' token mixers (Nemotron-H, Granite 4.0 hybrid, Falcon-H1, Bamba, OLMo-Hybrid)
against transformers 5.23's pure-torch paths, beyond the parity harness (``tests/test_parity.py``
proves every mixer of the family table's tiny models, every mechanism reached): the state
carries information past the convolution and across chunk boundaries, in transformers and in
ours alike; Falcon-H1's two mixers are built one at a time, by name; a layer without a token
mixer is refused; Falcon-H1's norm options; what transformers does with left padding (with a
projection bias its Mamba-2 mixers carry the pads through the short convolution into the
state; ours does not); Nemotron-H's step size clamped in its prefill but not in its decoding
step; config.json dicts read as transformers reads them. The tiny configs are the family
table's; 20 tokens here, a row left-padded by 5.
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
from llm_attention_site.families import FAMILIES as TABLE  # noqa: E402

pytestmark = pytest.mark.xdist_group(  # the worker of the page that shows these families
    (pathlib.Path(__file__).resolve().parents[1] / "docs" / "modern"
     / "mamba2.md").as_posix()
)
TOL = dict(atol=1e-5, rtol=1e-5)
REACH = 1e-3  # a mechanism switched off must move the reference this much
BATCH, LENGTH, PAD, PROMPT = 2, 20, 5, 12  # row 1 has PAD pads; decoding after PROMPT
OURS = dict(chunk_size=5)  # our chunks (theirs: mamba_chunk_size 8; Gated DeltaNet 64)
COMMON = dict(vocab_size=50, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
              max_position_embeddings=128, intermediate_size=64, pad_token_id=0,
              bos_token_id=1, eos_token_id=2)


# The tiny configs: the family table's (llm_attention_site.families), by model_type.
TABLE_KEYS = dict(nemotron_h="nemotron_h", granitemoehybrid="granite4", falcon_h1="falcon_h1",
                  bamba="bamba", olmo_hybrid="olmo_hybrid")
FAMILIES = {family: {k: v for k, v in TABLE[key].tiny.items() if k != "model_type"}
            for family, key in TABLE_KEYS.items()}


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

    config = AutoConfig.for_model(family, **{**FAMILIES[family], **changes})
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
