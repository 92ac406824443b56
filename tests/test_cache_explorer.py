"""The cache at any length (llm_attention_site.cache_explorer): its count equals the tables'
counts (family_rows, compressed_costs) and the bytes of our layers' own caches, for every
published model it draws; its HTML carries what the page's script reads. The script itself is
compared with cache_bytes in the browser (tests/figure_checks.py, check_cache_explorer)."""

from __future__ import annotations

import html
import json
import re

import pytest
import torch

from llm_attention.hf_config import config_dict
from llm_attention.hf_layers import layer_from_hf
from llm_attention_site import cache_explorer as ce
from llm_attention_site.compressed_costs import v4_costs
from llm_attention_site.families import (
    FAMILIES, HYBRIDS, LATENT_PUBLISHED, PUBLISHED, published_model,
)
from llm_attention_site.family_rows import family_row, hybrid_memory, latent_row

LENGTHS = (1, 100, 127, 128, 129, 1000, 4099, 10_000, 2**20, 2**20 + 77)
SOFTMAX_KINDS = ("full", "windowed", "chunked")


def kinds(found: dict, wanted) -> int:
    return sum(v for k, v in found.items() if k in wanted)


def test_every_published_model_is_drawn_or_left_out_with_a_reason():
    names = [n for family in FAMILIES.values() for n in family.published]
    assert set(ce.LEFT_OUT) <= set(names)  # no stale reason
    assert [n for n in names if n not in ce.LEFT_OUT] == list(dict.fromkeys(
        n for n in names if n in ce.cost_models()))
    assert set(ce.DEFAULT_MODELS) <= set(ce.cost_models())
    assert ce.ordered_models()[:len(ce.DEFAULT_MODELS)] == list(ce.DEFAULT_MODELS)


@pytest.mark.parametrize("name", list(PUBLISHED))
def test_softmax_layers_hold_what_the_table_counts(name):
    """Full layers every token, local layers up to their span: family_row's bytes per
    token and per token past the span."""
    row = family_row(name)
    local = row["bytes_per_token"] - row["bytes_per_token_beyond_window"]
    for length in LENGTHS:
        found = ce.cache_bytes(name, length)
        held = min(length, row["window"] or length)
        assert kinds(found, SOFTMAX_KINDS) == (
            row["bytes_per_token_beyond_window"] * length + local * held), length
        assert found.get("full", 0) == row["bytes_per_token_beyond_window"] * length
    span_kind = "chunked" if row["chunked"] else "windowed"
    assert (span_kind in found) == bool(row["windowed_layers"]), found


@pytest.mark.parametrize("name", list(LATENT_PUBLISHED))
def test_latent_layers_hold_what_the_table_counts(name):
    row = latent_row(name)
    for length in LENGTHS:
        found = ce.cache_bytes(name, length)
        assert found == {k: v for k, v in dict(
            latent=row["latent_numbers"] * 2 * row["layers"] * length,
            indexer=row["indexer_numbers"] * 2 * row["layers"] * length).items() if v}


@pytest.mark.parametrize("name", list(HYBRIDS))
def test_hybrids_hold_a_fixed_state_beside_their_full_layers(name):
    full_layers, per_token, linear_layers, state = hybrid_memory(name)
    for length in (1, 1000, 2**20):
        found = ce.cache_bytes(name, length)
        assert found["state"] == linear_layers * state
        assert kinds(found, ("full", "latent")) == full_layers * per_token * length


@pytest.mark.parametrize("name", ["DeepSeek-V4-Flash", "DeepSeek-V4-Pro"])
def test_deepseek_v4_holds_what_compressed_costs_counts(name):
    """Part by part as compressed_costs counts numbers, at lengths before, at and after a
    window, a CSA window and an HCA window; the window itself from the config alone."""
    values = published_model(name)[1]
    layers, window, d = (values[k] for k in ("num_hidden_layers", "sliding_window",
                                              "head_dim"))
    for length in LENGTHS:
        found = ce.cache_bytes(name, length)
        numbers = v4_costs(values, length)["cache"]
        assert found["windowed"] == layers * min(window, length) * d * 2
        assert found["windowed"] + found["entries"] == (
            numbers["rotary"] + numbers["other"]) * 2, length
        assert found["indexer"] == numbers["indexer"] * 2
        assert found["unpooled"] == numbers["unpooled"] * 2, length


# (model, layer): one layer of every kind our layers build, whose cache is allocated whole
# for its context (the linear layers' state is weighed with it in the count already)
OWN_CACHES = [
    ("Llama 3.1 8B", 0), ("Gemma 2 9B", 0), ("gpt-oss-120b", 0), ("Llama 4 Scout", 0),
    ("Llama 4 Scout", 3), ("Gemma 4 31B", 0), ("Gemma 4 31B", 5), ("Gemma 4 E2B", 0),
    ("Qwen3-Next 80B-A3B", 3), ("Kimi Linear 48B-A3B", 3), ("DeepSeek-V3", 0),
    ("GLM-5.3", 0), ("GLM-5.3", 3), ("MiniMax-M3", 0), ("MiniMax-M3", 3),
    ("Mistral Small 4", 0), ("MiMo-V2-Flash", 0), ("MiMo-V2-Flash", 1),
    ("Falcon-H1 0.5B", 0),
]


@pytest.mark.parametrize("name, index", OWN_CACHES)
def test_a_layer_holds_what_its_own_cache_allocates(name, index):
    """Our layer, built on the meta device for 10,000 tokens (past every window and
    chunk), allocates the bytes the count gives its layer (GLM-5's layer 3 reuses layer
    2's choice and keeps no indexer keys; MiMo-V2-Flash's layer 1 is a window of 129)."""
    config = published_model(name)[1]
    mixer = {"mixer": "self_attn"} if name.startswith("Falcon") else {}
    with torch.device("meta"):
        layer = layer_from_hf(config, index, context_length=10_000, **mixer)
        allocated = layer.to(torch.bfloat16).make_cache(1).nbytes
    terms = [t for t in ce.layer_terms(config, index) if t.kind != "state"]
    assert sum(t.bytes_at(10_000) for t in terms) == allocated


def test_a_layer_that_reuses_keys_holds_none():
    config = published_model("Gemma 4 E2B")[1]
    last = config_dict(config)["num_hidden_layers"] - 1
    assert ce.layer_terms(config, last) == []
    with torch.device("meta"), pytest.raises(ValueError, match="keeps no cache"):
        layer_from_hf(config, last).make_cache(1)


def test_the_batch_multiplies_every_part():
    for name in ("DeepSeek-V4-Pro", "Qwen3.5 9B", "Gemma 4 31B"):
        one = ce.cache_bytes(name, 5000)
        assert ce.cache_bytes(name, 5000, 7) == {k: 7 * v for k, v in one.items()}


@pytest.mark.parametrize("call, match", [
    (lambda: ce.cache_bytes("GPT-5", 10), "name must be one of"),
    (lambda: ce.cache_bytes("Qwen3.5 9B", 0), "length must be an int >= 1, got 0"),
    (lambda: ce.cache_bytes("Qwen3.5 9B", 10, 2.0), "batch must be an int >= 1"),
    (lambda: ce.cache_explorer(length=1000), "length must be one of"),
])
def test_bad_arguments_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("nbytes, written", [
    (1023, "1023 B"), (1536, "1.50 KiB"), (9 * 2**30, "9.00 GiB"),
    (int(1.125 * 2**30), "1.13 GiB"),  # half up, where round() would go to 1.12
    (int(12.25 * 2**20), "12.3 MiB"), (100 * 2**30, "100 GiB"), (3 * 2**40, "3.00 TiB"),
])
def test_bytes_are_written_in_binary_units(nbytes, written):
    assert ce.human(nbytes) == written


def test_the_figure_carries_every_models_terms_and_draws_the_first_setting():
    shown = ce.cache_explorer()
    data = json.loads(html.unescape(re.search(r'data-cache="([^"]*)"', shown).group(1)))
    assert [m["name"] for m in data["models"]] == ce.ordered_models()
    for model in data["models"]:
        assert tuple(ce.Term(**t) for t in model["terms"]) == ce.cost_models()[
            model["name"]]["terms"]
        assert model["default"] == (model["name"] in ce.DEFAULT_MODELS)
    assert data["lengths"][data["start"][0]] == 2**20 and data["batches"][data["start"][1]] == 1
    assert [k for k, _ in data["kinds"]] == list(ce.KINDS)
    for name in ce.ordered_models():  # without the script: every row, at 1M, batch 1
        total = ce.human(sum(ce.cache_bytes(name, 2**20).values()))
        row = f'data-model="{html.escape(name)}"'
        assert re.search(f'{re.escape(row)}[^>]*><span class="cache-name">'
                         f'{re.escape(html.escape(name))}</span><span class="cache-total">'
                         f"{re.escape(total)}</span>", shown), name
