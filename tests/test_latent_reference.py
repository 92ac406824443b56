"""LatentAttention against transformers' ``DeepseekV3Attention``, beyond the parity harness
(``tests/test_parity.py`` proves the tiny DeepSeek-V3 of the family table, with and without a
query bottleneck): the scale and the rotary tables equal transformers'; a wrong setting of
ours lands far from transformers' output (so the parity tests it); a plain ``config.json``
dict, which has no ``rope_interleave`` field, turns the pairs as transformers does.
"""

from __future__ import annotations

import os
import pathlib

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported

import pytest  # noqa: E402
import torch  # noqa: E402

from llm_attention.latent import LatentAttention, from_hf_state_dict  # noqa: E402
from llm_attention.rope_scaling import rope_frequencies  # noqa: E402
from llm_attention_site import parity  # noqa: E402

pytestmark = pytest.mark.xdist_group(  # the worker of the page that shows this family
    (pathlib.Path(__file__).resolve().parents[1] / "docs" / "modern" / "latent-attention.md").as_posix()
)

TOL = dict(atol=1e-5, rtol=1e-5)
VARIANTS = {"q_lora_rank=24": None, "no q_lora_rank": "no query bottleneck"}
AT = (0, "self_attn")


@pytest.fixture(params=list(VARIANTS.values()), ids=list(VARIANTS))
def built(request):
    """(variant, config, transformers' layer 0, its rotary module, our layer 0)."""
    config, model = parity.model("deepseek_v3", request.param)
    return (request.param, config, model.model.layers[0].self_attn,
            model.model.rotary_emb, parity.ours("deepseek_v3", request.param, *AT))


def test_scale_and_rope_tables_match_transformers(built):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    _, config, reference, rotary, ours = built
    assert ours.scale == pytest.approx(reference.scaling, rel=1e-12)
    assert ours.scale != pytest.approx((config.qk_nope_head_dim + config.qk_rope_head_dim) ** -0.5)
    rope = dict(config.rope_parameters)
    expected, factor = ROPE_INIT_FUNCTIONS["yarn"](config)
    got, got_factor = rope_frequencies(config.qk_rope_head_dim, rope.pop("rope_theta"), **rope)
    torch.testing.assert_close(got, expected, **TOL)
    assert got_factor == pytest.approx(factor, rel=1e-12)
    torch.testing.assert_close(rotary.inv_freq, got, **TOL)


@pytest.mark.parametrize("change", ["rope_interleave", "scale", "latent_norm"])
def test_a_wrong_setting_is_caught(built, change):
    """Negative controls: each setting the parity relies on moves the output when wrong."""
    variant, config, reference, _, ours = built
    overrides = {"rope_interleave": dict(rope_interleave=False), "scale": dict(scale=0.5),
                 "latent_norm": {}}[change]
    wrong = LatentAttention.from_hf_config(config, **overrides).eval()
    state = from_hf_state_dict(reference.state_dict())
    if change == "latent_norm":
        state["latent_norm.weight"] = torch.ones_like(state["latent_norm.weight"])
    wrong.load_state_dict(state)
    assert parity.one_pass_gap("deepseek_v3", ours, AT, variant) < 1e-5  # ours, right
    gap = parity.one_pass_gap("deepseek_v3", wrong, AT, variant)
    assert gap > 1e-3, gap


@pytest.mark.parametrize("q_lora_rank", [24, None], ids=["q_lora_rank=24", "no q_lora_rank"])
def test_a_config_json_dict_turns_the_pairs_as_transformers_does(q_lora_rank):
    """DeepSeek-V3's config.json has no rope_interleave field (transformers' to_dict()
    always writes one, so the layers built from config objects never miss it). Read as a
    plain dict, it must give the layer transformers' default: neighbouring pairs."""
    variant = VARIANTS["q_lora_rank=24" if q_lora_rank else "no q_lora_rank"]
    config, model = parity.model("deepseek_v3", variant)
    values = dict(  # the family table's tiny config, as a config.json would publish it
        model_type="deepseek_v3", hidden_size=32, num_attention_heads=4,
        num_key_value_heads=4, q_lora_rank=q_lora_rank, kv_lora_rank=16,
        qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6, num_hidden_layers=2,
        max_position_embeddings=64, rope_theta=10000.0, rms_norm_eps=1e-6,
        attention_bias=False,
        rope_scaling={"type": "yarn", "factor": 4.0, "beta_fast": 32, "beta_slow": 1,
                      "mscale": 1.0, "mscale_all_dim": 1.0,
                      "original_max_position_embeddings": 16},
    )
    assert "rope_interleave" not in values
    assert config.rope_interleave is True  # transformers' default
    assert config.q_lora_rank == q_lora_rank and config.kv_lora_rank == 16
    ours = LatentAttention.from_hf_config(values).eval()  # the plain dict
    ours.load_state_dict(from_hf_state_dict(model.model.layers[0].self_attn.state_dict()))
    assert parity.one_pass_gap("deepseek_v3", ours, AT, variant) < 1e-5
