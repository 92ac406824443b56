"""CompressedAttention against transformers' ``DeepseekV4Attention``, beyond the parity
harness (``tests/test_parity.py`` proves the tiny DeepSeek-V4 of the family table: a sliding, a
compressed sparse and a heavily compressed layer, every mechanism reached): what transformers
does with left padding (it pools the padding into its compressed entries, so the family table
compares padded rows with the prompt alone), the rotary tables of each kind, and the published
configs read as transformers reads them.
"""

from __future__ import annotations

import os
import pathlib

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported

import pytest  # noqa: E402
import torch  # noqa: E402

transformers = pytest.importorskip("transformers")

from llm_attention.hf_config import compressed_attention_options  # noqa: E402
from llm_attention.hf_layers import layer_from_hf  # noqa: E402
from llm_attention.rope_scaling import rope_frequencies  # noqa: E402
from llm_attention_site import parity  # noqa: E402
from llm_attention_site.families import FAMILIES  # noqa: E402

pytestmark = pytest.mark.xdist_group(  # the worker of the page that shows this family
    (pathlib.Path(__file__).resolve().parents[1] / "docs" / "modern"
     / "compressed-attention.md").as_posix()
)
TOL = dict(atol=1e-5, rtol=1e-5)
T = 20  # three compressed entries of 4 and two of 8 in the prompt below
SLIDING, CSA, HCA = 0, 1, 2  # the layers of the tiny model
PUBLISHED_V4 = FAMILIES["deepseek_v4"].published


@pytest.fixture(scope="module")
def tiny():
    return parity.model("deepseek_v4")


def token_ids(batch=2, seed=1):
    return torch.randint(0, parity.tiny_config("deepseek_v4").vocab_size, (batch, T),
                         generator=torch.Generator().manual_seed(seed))


def outputs(model, config, **call):
    """Per layer, the (input, output) of its self_attn in one call of the model."""
    seen = {}

    def hook(module, args, kwargs, output, index):
        hidden = args[0] if args else kwargs["hidden_states"]
        seen[index] = (hidden.detach(), output[0].detach())

    layers = parity.decoder_layers(model, config)
    handles = [layer.self_attn.register_forward_hook(
        lambda *a, i=i: hook(*a, i), with_kwargs=True) for i, layer in enumerate(layers)]
    try:
        with torch.no_grad():
            model(**call)
    finally:
        for handle in handles:
            handle.remove()
    return seen


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
    alone = outputs(model, cfg, input_ids=prompt)
    padded = outputs(model, cfg, **call)
    for index in (SLIDING, CSA, HCA):
        x_alone, expected = alone[index]
        gap = (padded[index][1][0, pads:] - expected[0]).abs().max().item()
        if index == SLIDING:
            assert gap < 1e-5, gap
        else:
            assert gap > 1e-3, (index, gap)  # not the prompt's output
        ours = layer_from_hf(cfg, index, model.model.layers[index].self_attn.state_dict())
        x = torch.cat((torch.randn(1, pads, cfg.hidden_size), x_alone), dim=1)
        with torch.no_grad():
            got = ours(x, mask.bool())
        torch.testing.assert_close(got[0, pads:], expected[0], **TOL)


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
