"""The token mixers of 2026's families against transformers 5.23, beyond the parity harness
(``tests/test_parity.py`` proves the tiny GLM-5, MiniMax-M3, Mistral 4, MiMo-V2-Flash and Laguna
models of the family table): what each tiny config builds, GLM-5's shared top-k layer refusing
alone and working with its source, its top-k not decided by a tie, and each published
config.json read as transformers' config class reads it.
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
from llm_attention_site import parity  # noqa: E402
from llm_attention_site.families import FAMILIES  # noqa: E402

pytestmark = pytest.mark.xdist_group(  # the worker of the page that shows GLM-5
    (pathlib.Path(__file__).resolve().parents[1] / "docs" / "modern"
     / "sparse-attention.md").as_posix()
)
TOL = dict(atol=1e-5, rtol=1e-5)
PUBLISHED = {name: entry for key in ("glm5", "minimax_m3", "mistral4", "mimo_v2_flash", "laguna")
             for name, entry in FAMILIES[key].published.items()}
PUBLISHED["GLM-5.3, indexer_types derived"] = (  # transformers derives them from the rest
    PUBLISHED["GLM-5.3"][0] + ", without its indexer_types",
    {k: v for k, v in PUBLISHED["GLM-5.3"][1].items() if k != "indexer_types"},
)


def built(key: str, variant: str | None = None):
    return parity.model(key, variant)


def test_the_layers_are_the_families_kinds():
    """What the tiny configs build: every kind of layer each family has."""
    kinds = {key: [layer_kind(built(key)[0], i)[1]
                   for i in range(built(key)[0].num_hidden_layers)]
             for key in ("minimax_m3", "mimo_v2_flash")}
    assert kinds["minimax_m3"] == ["full_attention"] + ["minimax_m3_sparse"] * 2
    assert kinds["mimo_v2_flash"] == ["full_attention", "sliding_attention"]
    glm, _ = built("glm5")
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
    element, _ = built("laguna", "a gate per element")
    assert layer_from_hf(element, 1).W_gate.weight.shape == (6 * 8, 32)
    mistral, _ = built("mistral4")
    assert layer_from_hf(mistral, 0).temperature_tuning == (4.0, 0.5, 0.0)
    m3, _ = built("minimax_m3")
    sparse = layer_from_hf(m3, 1)
    assert (sparse.block_size, sparse.top_k, sparse.local_blocks) == (3, 2, 1)  # 4 blocks of 12


def test_a_shared_topk_layer_refuses_alone_and_works_with_its_source():
    config, model = built("glm5")
    seen = parity.reference_run("glm5", None, "one pass", False)[0]
    source, shared = (parity.ours("glm5", None, i, "self_attn") for i in (0, 1))
    x = seen[1, "self_attn"]["input"]
    with pytest.raises(TypeError, match="shared_topk=True .* pass the SharedTopK"):
        shared(x)
    with pytest.raises(ValueError, match="SharedTopK holds nothing yet"):
        shared(x, topk=SharedTopK())
    picks = SharedTopK()
    with torch.no_grad():
        source(seen[0, "self_attn"]["input"], topk=picks)  # chooses
        got = shared(x, topk=picks)  # reuses
    torch.testing.assert_close(got, seen[1, "self_attn"]["output"], **TOL)


def test_the_glm_top_k_is_not_decided_by_a_tie():
    """The indexer's scores pass through a ReLU: with few heads, keys can tie at 0 at the top-k
    edge, and then either may be chosen. At this size every query that sees more than k keys has
    a clear gap between its k-th and (k+1)-th score (ours equal the reference's: the parity)."""
    config, model = built("glm5")
    x = parity.reference_run("glm5", None, "one pass", False)[0][0, "self_attn"]["input"]
    ours = parity.ours("glm5", None, 0, "self_attn")
    cos, sin = ours.rope.cos, ours.rope.sin
    with torch.no_grad():
        query_latent = ours.query_norm(ours.W_query_down(x))  # (B, T, d_q)
        keys = ours.indexer.keys(x, cos, sin, 0)  # (B, T, d_I)
        scores = ours.indexer.scores(x, query_latent, keys, cos, sin, 0)  # (B, T, T)
    T = parity.T
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    ranked = scores.masked_fill(future, -torch.inf).sort(dim=-1, descending=True).values
    k = config.index_topk
    gap = (ranked[:, k:, k - 1] - ranked[:, k:, k]).min().item()  # queries that see > k keys
    print(f"smallest gap at the top-k edge: {gap:.3g}")
    assert gap > 1e-4


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
    published = PUBLISHED[name][1]
    theirs = transformers_config(published)
    for index in range(theirs.num_hidden_layers):
        assert options_of(published, index) == options_of(theirs, index), (name, index)


def test_the_published_configs_build_what_the_models_are():
    """What the copies say, read through our reader (the report's table)."""
    glm = PUBLISHED["GLM-5.3"][1]
    assert [topk_source_layer(glm, i) for i in range(8)] == [None, None, None, 2, 2, 2, None, 6]
    assert options_of(glm, 0)["index_rope_interleave"]
    m3 = PUBLISHED["MiniMax-M3"][1]
    sparse = options_of(m3, 3)
    assert layer_kind(m3, 2)[1] == "full_attention" and layer_kind(m3, 3)[1] == "minimax_m3_sparse"
    assert (sparse["block_size"], sparse["top_k"], sparse["local_blocks"], sparse["index_n_heads"],
            sparse["partial_rotary_factor"], sparse["rope_base"]) == (128, 16, 1, 4, 0.5, 5e6)
    mistral = options_of(PUBLISHED["Mistral Small 4"][1], 0)
    assert mistral["temperature_tuning"] == (8192, 0.1, 0)
    assert mistral["rope_scaling"]["factor"] == 128.0 and mistral["kv_lora_rank"] == 256
    mimo = PUBLISHED["MiMo-V2-Flash"][1]
    full, sliding = options_of(mimo, 0), options_of(mimo, 1)
    assert (sliding["window"], sliding["num_kv_heads"], full["num_kv_heads"]) == (129, 8, 4)
    assert sliding["sinks"] and not full["sinks"] and full["value_scale"] == 0.707
    laguna = PUBLISHED["Laguna XS.2.1"][1]
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


def test_mimo_window_is_read_as_transformers_reads_it():
    """MiMo-V2-Flash's sliding_window_size counts the tokens before the query (SGLang's
    count): transformers' config turns it into sliding_window = size + 1, whatever the
    file's own sliding_window says, and defaults to 129 without either; so does ours."""
    from transformers import MiMoV2FlashConfig

    from llm_attention.hf_config import modern_attention_options

    published = FAMILIES["mimo_v2_flash"].published["MiMo-V2-Flash"][1]
    sliding = [layer_kind(published, i)[1] for i in range(published["num_hidden_layers"])
               ].index("sliding_attention")
    fields = {k: v for k, v in published.items() if k != "model_type"}
    for drop in ((), ("sliding_window",), ("sliding_window", "sliding_window_size")):
        values = {k: v for k, v in published.items() if k not in drop}
        theirs = MiMoV2FlashConfig(**{k: v for k, v in fields.items() if k not in drop})
        ours = modern_attention_options(values, sliding)["window"]
        assert ours == theirs.sliding_window == 129, drop


def test_a_sliding_layer_without_a_window_is_refused_by_name():
    from llm_attention.hf_config import modern_attention_options

    config = dict(model_type="mistral", hidden_size=64, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=128,
                  layer_types=["sliding_attention"], num_hidden_layers=1,
                  rope_theta=10000.0)
    with pytest.raises(ValueError, match="sliding layer but the config gives no "
                                         "sliding_window"):
        modern_attention_options(config, 0)
