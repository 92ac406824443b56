"""ModernAttention against transformers' own attention layers, beyond the parity harness
(``tests/test_parity.py``, which proves every family on the batch of the family table):

- Mistral's window at its edge: texts one token shorter than the window, as long, and one
  longer, in the tiny model of the family table, on both paths;
- a whole model's state dict loads by prefix, and bad state dicts are refused by name.

Small random configs only: nothing is downloaded (HF_HUB_OFFLINE=1).
"""

from __future__ import annotations

import os
import pathlib

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported

import pytest  # noqa: E402
import torch  # noqa: E402

from llm_attention.modern import ModernAttention, from_hf_state_dict  # noqa: E402
from llm_attention_site import parity  # noqa: E402

# transformers takes seconds to import: it is imported when a test first needs it, not when the
# tests are collected, and these tests run in the worker that runs the combined-module page's
# code (which imports it too).
pytestmark = pytest.mark.xdist_group(
    (pathlib.Path(__file__).resolve().parents[1] / "docs" / "modern" / "combined.md").as_posix()
)

TOL = dict(atol=1e-5, rtol=1e-5)  # the tolerance stated on the combined-module page


@pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])
@pytest.mark.parametrize("extra", [-1, 0, 1], ids=["T=window-1", "T=window", "T=window+1"])
def test_prefill_around_the_window_matches(extra, fast_path):
    """No padding, no cache, T up to the window: no key is window or more back, and our
    fast path leaves all masking to the kernel; one token more, and the window hides
    the first key from the last query."""
    config, _ = parity.model("mistral")
    num_tokens = config.sliding_window + extra
    ids = torch.randint(0, config.vocab_size, (2, num_tokens),
                        generator=torch.Generator().manual_seed(4))
    for (layer, name), seen in parity.record("mistral", ids).items():
        ours = parity.ours("mistral", None, layer, name)
        ours.fast_path = fast_path
        try:
            with torch.no_grad():
                got = ours(seen["input"])
        finally:
            ours.fast_path = False
        torch.testing.assert_close(got, seen["output"], **TOL)


def test_whole_model_state_dict_loads_by_prefix():
    config, model = parity.model("qwen3")  # the tiny Qwen3 of the family table
    prefix = "model.layers.1.self_attn."
    renamed = from_hf_state_dict(model.state_dict(), prefix)
    assert sorted(renamed) == sorted(
        f"{ours}.weight" for ours in ("W_query", "W_key", "W_value", "out_proj",
                                      "q_norm", "k_norm")
    )
    layer = model.model.layers[1].self_attn
    assert torch.equal(renamed["W_key.weight"], layer.k_proj.weight)
    assert torch.equal(renamed["k_norm.weight"], layer.k_norm.weight)
    ours = ModernAttention(config.hidden_size, config.hidden_size, 32, 0.0,
                           config.num_attention_heads, config.num_key_value_heads,
                           head_dim=config.head_dim, qk_norm=True)
    ours.load_state_dict(renamed)  # strict: every name and shape fits


def test_from_hf_state_dict_errors():
    with pytest.raises(TypeError, match="state_dict must be a dict"):
        from_hf_state_dict([("q_proj.weight", torch.zeros(1))])
    with pytest.raises(ValueError, match="'mlp.up_proj.weight' is not a weight of an attention layer"):
        from_hf_state_dict({"mlp.up_proj.weight": torch.zeros(1)})
    with pytest.raises(ValueError, match="no key starting with prefix 'layers.9.'"):
        from_hf_state_dict({"q_proj.weight": torch.zeros(1)}, "layers.9.")
