"""The parity harness (``llm_attention_site.parity``) on every entry of the family table:
each family's tiny transformers model, every token mixer built by ``layer_from_hf`` and equal
to transformers' in every form and case, and every mechanism the entry names reached at the
tiny config's size. Then the harness itself: a bug planted in a branch the tiny config reaches
fails the parity; a tiny config that does not reach a mechanism fails the reach.

Each family's proof runs in the worker of the page that prints it (its ``xdist_group``), so
that the page's block and these tests share one computation.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from llm_attention_site import parity  # noqa: E402
from llm_attention_site.families import FAMILIES, Change  # noqa: E402

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"
CASES = [(key, variant) for key, family in FAMILIES.items()
         for variant in (None, *family.variants)]


def _group(key: str):
    return pytest.mark.xdist_group((DOCS / FAMILIES[key].page).as_posix())


@pytest.mark.parametrize(
    "key, variant",
    [pytest.param(k, v, marks=_group(k), id=k + (f"-{v}" if v else "")) for k, v in CASES],
)
def test_family_is_proven(key, variant):
    proof = parity.prove(key, variant)
    assert proof.failures() == []
    config, model = parity.model(key, variant)
    layers = parity.decoder_layers(model, config)
    assert {i for i, _ in parity.mixers(key, variant)} <= set(range(len(layers)))
    assert parity.mixers(key, variant), "no token mixer found"
    for layer in proof.layers:  # every form, every case: 3 splits x 2 + 2 x 2 + gradients
        forms = {form for form, _ in layer.differences}
        per_form = 11 - 4 * bool(variant and FAMILIES[key].variants[variant].ties)
        assert len(layer.differences) == per_form * len(forms)
    assert set(proof.reach) == set(FAMILIES[key].mechanisms)


def test_every_entry_names_its_page_and_its_sources():
    for key, family in FAMILIES.items():
        assert (DOCS / family.page).is_file(), key
        assert family.mechanisms, f"{key} names no mechanism to prove its reach"
        for name, (source, fields) in family.published.items():
            assert source.endswith(("config.json", ")")) or "config.json" in source, name
            assert "model_type" in fields, name


@pytest.mark.xdist_group((DOCS / "modern/sliding-window.md").as_posix())
def test_a_bug_in_a_reached_branch_fails_the_parity(monkeypatch):
    """A window one token too wide (the key ``window`` back kept): Mistral's layers differ
    from transformers' in one pass, on both paths."""
    from llm_attention import modern

    real = modern.attention_mask

    def one_too_wide(*args, window=None, **kwargs):
        return real(*args, window=None if window is None else window + 1, **kwargs)

    parity.prove.cache_clear()
    monkeypatch.setattr(modern, "attention_mask", one_too_wide)
    try:
        failures = parity.prove("mistral").failures()
    finally:
        parity.prove.cache_clear()
    for form in ("explicit", "fast"):
        assert any(f", {form}, one pass, padded:" in f for f in failures), failures


@pytest.mark.xdist_group((DOCS / "modern/sliding-window.md").as_posix())
def test_a_tiny_config_that_does_not_reach_a_mechanism_fails(monkeypatch):
    """A window of 64 in twelve tokens never hides a key: dropping it moves nothing, and the
    harness says the tiny config does not reach it (a bug there would pass the parity)."""
    entry = FAMILIES["mistral"]
    wide = dataclasses.replace(entry, key="mistral_wide",
                               tiny={**entry.tiny, "sliding_window": 64})
    monkeypatch.setitem(FAMILIES, "mistral_wide", wide)
    failures = parity.prove("mistral_wide").failures()
    assert failures == [
        f"dropping 'window' moves layer {i} self_attn by 0.0e+00 only "
        f"(<= {parity.REACH}): the tiny config does not reach it" for i in (0, 1)
    ]


@pytest.mark.xdist_group((DOCS / "modern/sliding-window.md").as_posix())
def test_a_mechanism_that_names_no_layer_fails(monkeypatch):
    entry = FAMILIES["mistral"]
    lost = dataclasses.replace(entry, key="mistral_lost", mechanisms={
        "window": Change(config=dict(sliding_window=None), layers=("chunked_attention",))})
    monkeypatch.setitem(FAMILIES, "mistral_lost", lost)
    assert parity.prove("mistral_lost").failures() == ["'window' names no layer with a mixer"]


def test_unknown_families_and_variants_are_refused():
    with pytest.raises(ValueError, match="'nope' is not in the table"):
        parity.prove("nope")
    with pytest.raises(ValueError, match="has no variant 'wide'"):
        parity.prove("mistral", "wide")


def test_the_batch_has_unpadded_and_padded_rows_and_calls_that_cover_it():
    _, mask = parity.inputs(True)
    assert mask.shape == (parity.B, parity.T)
    assert [int((row == 0).sum()) for row in mask] == list(parity.PADDING)
    assert parity.PADDING[0] == 0 and parity.PADDING[-1] == parity.PROMPT - 1
    for split, sizes in parity.SPLITS.items():
        assert sum(sizes) == parity.T, split
    assert torch.equal(parity.real_tokens(False), torch.ones(parity.B, parity.T, dtype=torch.bool))


PROMPT_ALONE = [key for key, family in FAMILIES.items() if family.padded_rows == "prompt alone"]


@pytest.mark.parametrize(
    "key", [pytest.param(k, marks=_group(k), id=k) for k in PROMPT_ALONE])
def test_where_the_prompt_alone_is_the_reference_transformers_padded_rows_leak(key):
    """The table compares these families' left-padded rows with transformers run on each
    row's prompt alone: its own padded rows differ from that (its layers pool or score the
    padding), so they cannot serve. Ours equal the prompt alone (the parity above)."""
    alone = parity.reference_run(key, None, "one pass", True)[0]
    ids, mask = parity.inputs(True)
    batched = parity.record(key, ids, mask)
    real = parity.real_tokens(True)
    moved = max((batched[at]["output"] - alone[at]["output"])[real].abs().max().item()
                for at in batched)
    assert moved > parity.REACH


# Published configs whose layer kinds transformers 5.23 cannot give, and why
KINDS_NOT_COMPARED = {
    "GPT-2 small": "GPT-2's config has no layer kinds: every layer is the same",
    "Llama 4 Scout": "transformers 5.23 refuses the int attn_temperature_tuning the file holds",
    "Falcon-H1 0.5B": "the copy lacks mamba_d_ssm, which transformers 5.23 requires",
}
SAME_BUILD = {"indexed_attention": "full_attention"}  # transformers' name, our reader's


@pytest.mark.parametrize("name", [n for f in FAMILIES.values() for n in f.published])
def test_published_layer_kinds_are_the_ones_transformers_derives(name):
    """Read as a config.json dict, each published config gives every layer the kind that
    transformers' own config class derives from the same fields (the pattern branches of
    our reader run only for such dicts: the tiny config objects carry their kinds)."""
    from llm_attention.hf_config import config_dict
    from llm_attention.hf_layers import layer_kind
    from llm_attention_site.families import published_model

    if name in KINDS_NOT_COMPARED:
        pytest.skip(KINDS_NOT_COMPARED[name])
    values = published_model(name)[1]
    config = parity.transformers_config(values)
    count = config_dict(values)["num_hidden_layers"]
    theirs = [layer_kind(config, i)[1] for i in range(count)]
    ours = [layer_kind(values, i)[1] for i in range(count)]
    assert ours == [SAME_BUILD.get(kind, kind) for kind in theirs]
