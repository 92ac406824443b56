"""The tiny GPT in the browser: the weights file holds the model exactly, the reference runs
are PyTorch's, the still figure shows the first input as PyTorch ran it, and the script's
comments quote the Python lines they mirror. (The browser's own numbers are compared with
PyTorch in tests/figure_checks.py, inside the page's one visit.)"""

from __future__ import annotations

import html
import json
import pathlib
import re

import pytest
import torch

from llm_attention.gpt import GPTModel
from llm_attention_site.live_model import (
    SYMBOLS,
    Example,
    after_earlier,
    decode,
    encode,
    examples_table,
    live_explorer,
    model_from_weights,
    read_weights,
    run,
    top_tokens,
    weights_file,
)

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "docs" / "assets" / "javascripts" / "tiny-gpt.js"


def _model(seed: int = 0) -> GPTModel:
    torch.manual_seed(seed)
    return GPTModel(32, 24, 64, 4, 2).eval()


def test_the_weights_file_holds_every_tensor_exactly_and_opens_as_safetensors():
    model = _model()
    name, data = weights_file(model)
    tensors, metadata = read_weights(data)
    state = model.state_dict()
    assert list(tensors) == list(state) and metadata["num_heads"] == "4"
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert len(norms) == 5 and all(float(metadata["layer_norm_eps"]) == m.eps for m in norms)
    for key, tensor in state.items():
        assert torch.equal(tensors[key], tensor), key
    assert int.from_bytes(data[:8], "little") % 8 == 0  # the numbers start aligned
    safetensors = pytest.importorskip("safetensors.torch")
    for key, tensor in safetensors.load(data).items():  # the format's own reader agrees
        assert torch.equal(tensor, state[key]), key
    assert re.fullmatch(r"tiny-gpt-[0-9a-f]{16}\.safetensors", name)
    assert weights_file(_model())[0] == name != weights_file(_model(1))[0]  # a digest


def test_a_model_from_the_file_computes_what_the_model_computes():
    """Its layer norms' epsilon included: a model with another one reads back with it."""
    model = _model()
    tokens = torch.randint(0, 32, (3, 24), generator=torch.Generator().manual_seed(0))
    for eps in (None, 1e-3):
        if eps is not None:
            for norm in (m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)):
                norm.eps = eps
        again = model_from_weights(weights_file(model)[1])
        with torch.no_grad():
            assert torch.equal(again(tokens), model(tokens)), eps
    model.final_norm.eps = 1e-4
    with pytest.raises(ValueError, match=r"layer norms must share one eps, got \[0.0001, 0.001\]"):
        weights_file(model)


def test_run_gives_every_heads_weights_and_the_probabilities_with_heads_off():
    model = _model()
    tokens = encode("CLIMBERS7QZCLIMB")
    computed = run(model, tokens)
    assert computed.weights.shape == (2, 4, 16, 16) and computed.probabilities.shape == (16, 32)
    assert torch.allclose(computed.weights.sum(-1), torch.ones(2, 4, 16))
    assert (computed.weights.triu(1) == 0).all()  # causal
    ids = torch.tensor([tokens])
    with torch.no_grad(), model.ablate([(1, 2), (0, 1)]):
        logits = model(ids)[0]  # (T, V)
    off = run(model, tokens, [(1, 2), (0, 1)])
    assert torch.allclose(off.probabilities, torch.softmax(logits, -1))
    assert not torch.allclose(off.probabilities, computed.probabilities)
    assert torch.equal(off.weights[0], computed.weights[0])  # layer 0 reads no ablated head's output
    assert (off.weights[1] - computed.weights[1]).abs().max() > 0  # layer 1 does (head 0, 1 off)


def test_symbols_and_the_positions_an_induction_head_looks_at():
    assert len(SYMBOLS) == len(set(SYMBOLS)) == 32 and decode(encode("ab 27")) == "AB27"
    assert after_earlier(encode("XB7PLUMBINGQPLUMB"), 16) == [2, 8]
    assert after_earlier(encode("ABC"), 2) == []
    with pytest.raises(ValueError, match=r"text must use the symbols .*got \['1', '8'\]"):
        encode("A18")
    with pytest.raises(TypeError, match="text must be a str, got int"):
        encode(3)
    with pytest.raises(TypeError, match="model must be a GPTModel, got dict"):
        weights_file({})
    with pytest.raises(TypeError, match="examples must be a non-empty sequence of Example"):
        live_explorer(_model(), [], "f", 1)


def test_the_still_figure_is_the_first_input_as_pytorch_ran_it():
    """What a reader without JavaScript sees: every head's weights for the last position (the
    shades, to two decimals), the marks after the earlier occurrence, and the likeliest next
    tokens to four decimals; the data the script needs, PyTorch's tokens among it."""
    model = _model()
    examples = [Example("a repeat", "CLIMBERS7QZCLIMB"), Example("off", "ABCA", ((1, 0),))]
    page = live_explorer(model, examples, "tiny-gpt-x.safetensors", 1234)
    computed = run(model, encode("CLIMBERS7QZCLIMB"))
    body = re.search(r"<tbody>(.*?)</tbody>", page).group(1)
    rows = re.findall(r"<tr [^>]*>(.*?)</tr>", body)
    assert len(rows) == 8
    for k, row in enumerate(rows):
        shades = [float(w or 0) for w in re.findall(r'<td(?: class="[^"]*")?(?: style="--w:([0-9.]+)")?>', row)]
        assert shades == [round(v, 2) for v in computed.weights.flatten(0, 1)[k, -1].tolist()], k
    marks = re.search(r"<tfoot>(.*?)</tfoot>", page).group(1)
    assert [i for i, cell in enumerate(re.findall(r"<td>([^<]*)</td>", marks)) if cell] == [5]
    shown = re.findall(r'<th scope="row">([^<]*)</th><td class="temperature-track">.*?'
                       r'<td class="temperature-value">([0-9.]+)</td>', page)
    top = top_tokens(computed.probabilities[-1])
    assert shown[:5] == [(s, f"{p:.4f}") for s, p in top]
    data = json.loads(html.unescape(re.search(r'data-live="([^"]*)"', page).group(1)))
    assert data["file"] == "tiny-gpt-x.safetensors" and data["bytes"] == 1234
    assert data["symbols"] == SYMBOLS and data["temperatures"][2] == 1.0
    assert [e["text"] for e in data["examples"]] == ["CLIMBERS7QZCLIMB", "ABCA"]
    assert data["examples"][1]["off"] == [[1, 0]]
    off = run(model, encode("ABCA"), [(1, 0)]).probabilities[-1]
    assert data["examples"][1]["pytorch"] == [[s, round(p, 4)] for s, p in top_tokens(off)]


def test_the_examples_table_prints_the_weight_on_the_token_after_the_match():
    model = _model()
    text = examples_table(model, [Example("twice", "XB7PLUMBINGQPLUMB"), Example("none", "ABC")])
    computed = run(model, encode("XB7PLUMBINGQPLUMB"))
    lines = text.splitlines()
    assert lines[0] == "twice: XB7PLUMBINGQPLUMB"
    assert lines[1] == "  weight on position 2 (7) and 8 (I), after the earlier B:"
    on_both = computed.weights[1, :, -1][:, [2, 8]].sum(-1)  # (H,)
    assert lines[3] == "  layer 1: " + " ".join(f"{v:.4f}" for v in on_both.tolist())
    assert lines[4].startswith("  next: ") and lines[6].startswith("  no earlier C")


def test_the_script_quotes_the_python_lines_it_mirrors_in_their_order():
    """Each "// gpt.py: ..." or "// multihead.py: ..." comment of tiny-gpt.js is a line of that
    file, and the forward pass quotes each step of the attention in the Python order."""
    script = SCRIPT.read_text(encoding="utf8")
    quoted = re.findall(r"^\s*// (gpt|multihead)\.py: (.+)$", script, re.MULTILINE)
    assert len(quoted) >= 15
    sources = {name: (ROOT / "src" / "llm_attention" / f"{name}.py").read_text(encoding="utf8")
               for name in ("gpt", "multihead")}
    lines = {name: [line.strip() for line in text.splitlines()] for name, text in sources.items()}
    for name, line in quoted:
        assert line.strip() in lines[name], f"tiny-gpt.js quotes {name}.py: {line!r}, not in it"
    attention = [line for name, line in quoted if name == "multihead"]
    order = [lines["multihead"].index(line.strip()) for line in attention]
    assert order == sorted(order), "the attention's steps are not in multihead.py's order"
    for step in ("attn_scores /= self.head_dim**0.5", "masked_fill_(mask_bool, -torch.inf)",
                 "torch.softmax(attn_scores, dim=-1)", "self.out_proj(context_vec)"):
        assert any(step in line for line in attention), step
