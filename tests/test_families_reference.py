"""Rotary angles and layer kinds of the open families against transformers' own: the tables
of the tiny configs of the family table (Llama 3.1's ``llama3`` angles, gpt-oss's YaRN,
Qwen3-Next's quarter turned) and of the published configs equal transformers' rope
initialisation; a published config read by transformers is left unchanged; Qwen's windowed
layers are those transformers' config classes give. (Each family's layers are proven equal to
transformers by the parity harness: ``tests/test_parity.py``.)
"""

from __future__ import annotations

import os
import pathlib

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported

import pytest  # noqa: E402
import torch  # noqa: E402

from llm_attention.rope_scaling import rope_frequencies  # noqa: E402
from llm_attention_site import parity  # noqa: E402

pytestmark = pytest.mark.xdist_group(  # the worker that has transformers imported already
    (pathlib.Path(__file__).resolve().parents[1] / "docs" / "modern" / "combined.md").as_posix()
)

TOL = dict(atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family", ["llama", "gpt_oss", "qwen3_next"])
def test_rope_tables_match_transformers_init(family):
    """Inverse frequencies and attention factor equal transformers' rope initialisation."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.qwen3_next import modeling_qwen3_next

    config = parity.tiny_config(family)
    rope = dict(config.rope_parameters)
    rope_type = rope.pop("rope_type")
    init = (ROPE_INIT_FUNCTIONS[rope_type] if rope_type != "default"
            else modeling_qwen3_next.Qwen3NextRotaryEmbedding.compute_default_rope_parameters)
    expected, expected_factor = init(config)
    base = rope.pop("rope_theta")
    got, factor = rope_frequencies(config.head_dim, base, rope_type=rope_type, **rope)
    torch.testing.assert_close(got, expected, **TOL)
    assert factor == pytest.approx(expected_factor, rel=1e-12)
    if family == "qwen3_next":  # a quarter of the 16 dimensions turn: 2 pairs
        assert got.shape == (config.head_dim * config.rope_parameters["partial_rotary_factor"] // 2,)
    if family == "gpt_oss":
        assert factor > 1  # YaRN sharpens the scores


def _published_rope(values, layer_idx=0):
    """(ours, transformers') speeds and attention factor for a published config dict."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from llm_attention.hf_config import latent_attention_options, modern_attention_options

    if values["model_type"] == "deepseek_v3":
        options = latent_attention_options(values, layer_idx)
        head_dim = options["qk_rope_head_dim"]
    else:
        options = modern_attention_options(values, layer_idx)
        head_dim = options["head_dim"]
    rope = options["rope_scaling"]
    got, got_factor = rope_frequencies(head_dim, options["rope_base"], **rope)
    config = parity.transformers_config(values)
    expected, factor = ROPE_INIT_FUNCTIONS[rope["rope_type"]](config)
    return got, got_factor, expected, factor


@pytest.mark.parametrize("name", ["Llama 3.1 8B", "gpt-oss-120b", "DeepSeek-V3"])
def test_stretched_speeds_equal_transformers_at_the_published_sizes(name):
    """At the published sizes every branch of the stretch is taken (pairs kept, between
    and divided); DeepSeek-V3 leaves YaRN's ``truncate`` at its default (True), so the
    ramp's bounds are rounded, outwards."""
    from llm_attention_site.families import DEEPSEEK_V3, PUBLISHED

    values = DEEPSEEK_V3[1] if name == "DeepSeek-V3" else PUBLISHED[name][1]
    got, got_factor, expected, factor = _published_rope(values)
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=0)
    assert got_factor == pytest.approx(factor, rel=1e-12)


def test_reading_a_published_config_leaves_it_unchanged():
    """transformers adds rope_theta to the rope_scaling dict it is given; the published
    dict that pages and other tests read must not change with it."""
    import copy

    from llm_attention_site.families import PUBLISHED

    values = PUBLISHED["gpt-oss-120b"][1]
    before = copy.deepcopy(values)
    parity.transformers_config(values)
    assert values == before


def test_yarn_attention_factor_with_mscale_and_mscale_all_dim_that_differ():
    """The factor is the ratio of two: mscale's on top, mscale_all_dim's below (every
    published config has them equal, which hides a swap)."""
    from llm_attention_site.families import DEEPSEEK_V3

    values = dict(DEEPSEEK_V3[1])
    values["rope_scaling"] = {**values["rope_scaling"], "mscale": 0.707, "mscale_all_dim": 1.0}
    got, got_factor, expected, factor = _published_rope(values)
    assert factor == pytest.approx((0.0707 * torch.log(torch.tensor(40.0)).item() + 1)
                                   / (0.1 * torch.log(torch.tensor(40.0)).item() + 1))
    assert got_factor == pytest.approx(factor, rel=1e-12) and factor < 0.95
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=0)


QWEN_WINDOWS = {  # the fields of a config.json beside use_sliding_window=True
    "window from layer 2": dict(max_window_layers=2, sliding_window=8),
    "window from layer 0": dict(max_window_layers=0, sliding_window=8),
    "window from layer 3": dict(max_window_layers=3, sliding_window=8),
    "max_window_layers absent": dict(sliding_window=8),
    "no window size": dict(max_window_layers=1, sliding_window=None),
}


@pytest.mark.parametrize("family", ["qwen2", "qwen3"])
@pytest.mark.parametrize("fields", QWEN_WINDOWS.values(), ids=list(QWEN_WINDOWS))
def test_qwen_layer_kinds_are_transformers_layer_types(family, fields):
    """A Qwen config.json with use_sliding_window (read as a plain dict, which has no
    layer_types) gives each layer the kind transformers' config class gives it."""
    from transformers import Qwen2Config, Qwen3Config

    from llm_attention.hf_config import layer_type

    values = dict(model_type=family, num_hidden_layers=4, hidden_size=32,
                  num_attention_heads=4, use_sliding_window=True, **fields)
    config_class = {"qwen2": Qwen2Config, "qwen3": Qwen3Config}[family]
    expected = config_class(**{k: v for k, v in values.items() if k != "model_type"})
    assert [layer_type(values, i) for i in range(4)] == expected.layer_types
