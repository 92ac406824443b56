# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""The trained tiny GPT in the reader's browser: its weights file, the inputs run at
build, and the live explorer's HTML.

Shapes: ``T`` tokens (at most the model's context), ``V`` vocabulary size, ``L`` layers,
``H`` heads per layer.

The build writes the trained model's weights once (``hooks/site.py``), beside the page
that shows it, in the safetensors layout: 8 bytes holding the header's length (little
endian), a JSON header giving each tensor's dtype, shape and byte range, then the raw
float32 numbers, little endian. Float32, not float16: the file (about 420 KB) holds the
trained model exactly, and is fetched only when the reader opens the explorer. Its
metadata carries the two numbers the shapes do not give: the heads per layer and the
layer norms' epsilon. The script computes in float64 from these float32 numbers, and so
does ``run`` on ``model.double()``: the site's tests hold the two within
``BROWSER_TOLERANCE``, far above float64 rounding and far below what a wrong step or
constant moves (an epsilon of 1e-6 for 1e-5 moves probabilities by 1e-6 to 2e-5). The
file's name holds a digest of its bytes, so that a page and a file from different runs
cannot meet: the page would ask for a file that is not there.

The site's scripts do the rest: ``docs/assets/javascripts/tiny-gpt.js`` reads the file
and runs ``GPTModel``'s forward pass step by step as ``gpt.py`` and ``multihead.py``
write it; ``live-explorer.js`` draws what it returns. Without JavaScript the figure
shows the first input as PyTorch computed it at build.

- ``SYMBOLS``: the 32 token ids as the reader types them, ``encode`` and ``decode``;
- ``weights_file(model)`` the file's name and bytes, ``read_weights(data)`` back;
- ``run(model, tokens, off)``: every head's weights and the next-token probabilities
  at every position, with the heads in ``off`` switched off (``GPTModel.ablate``);
- ``live_explorer(...)`` the figure, ``examples_table(...)`` its numbers as text.

Standalone: torch, the standard library, and ``gpt.py`` and ``explorer.py``.
"""

from __future__ import annotations

import hashlib
import html
import json
import struct
from collections.abc import Sequence
from typing import NamedTuple

import torch

from llm_attention.gpt import GPTModel

from .explorer import DARK_INK_FROM, LIGHT_INK_FROM, _payload, ink_classes

# The base32 alphabet of RFC 4648: one keyboard character per token id.
SYMBOLS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
TOP = 5  # next tokens shown with a bar each
TEMPERATURES = (0.25, 0.5, 1.0, 2.0, 4.0)
MARK = "\u25b2"  # under the tokens after the query's earlier occurrences
# The most the browser's weights and probabilities may differ from PyTorch's, both in
# float64 on the file's float32 weights (rounding alone gives about 1e-16 to 1e-14).
BROWSER_TOLERANCE = 1e-9


def encode(text: str) -> list[int]:
    """The token ids of ``text``, one symbol per token (case and spaces ignored)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    letters = text.upper().replace(" ", "")
    unknown = sorted({c for c in letters if c not in SYMBOLS})
    if unknown:
        raise ValueError(f"text must use the symbols {SYMBOLS}, got {unknown}")
    return [SYMBOLS.index(c) for c in letters]


def decode(tokens: Sequence[int]) -> str:
    """The symbols of ``tokens``, one per token."""
    return "".join(SYMBOLS[int(t)] for t in tokens)


def weights_file(model: GPTModel) -> tuple[str, bytes]:
    """The model's weights in the safetensors layout (float32), and a file name that
    holds a digest of them: ``tiny-gpt-<digest>.safetensors``."""
    if not isinstance(model, GPTModel):
        raise TypeError(f"model must be a GPTModel, got {type(model).__name__}")
    header, chunks, offset = {}, [], 0
    for name, tensor in model.state_dict().items():
        values = tensor.detach().to("cpu", torch.float32).contiguous().numpy()
        data = values.astype("<f4").tobytes()  # little endian, whatever the machine
        header[name] = {
            "dtype": "F32",
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        chunks.append(data)
        offset += len(data)
    heads = model.trf_blocks[0].att.num_heads  # the shapes give neither this
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    eps = {m.eps for m in norms}  # nor this
    if len(eps) != 1:
        raise ValueError(f"model's layer norms must share one eps, got {sorted(eps)}")
    header["__metadata__"] = {"format": "pt", "num_heads": str(heads),
                              "layer_norm_eps": repr(eps.pop())}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the numbers start on a multiple of 8 bytes
    data = struct.pack("<Q", len(text)) + text + b"".join(chunks)
    return f"tiny-gpt-{hashlib.sha256(data).hexdigest()[:16]}.safetensors", data


def read_weights(data: bytes) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The tensors and the metadata of a file written by ``weights_file``."""
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    metadata = header.pop("__metadata__", {})
    start = 8 + length
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        raw = bytearray(data[start + begin : start + end])
        flat = torch.frombuffer(raw, dtype=torch.float32)  # (numel,); little endian
        tensors[name] = flat.reshape(entry["shape"])
    return tensors, metadata


def model_from_weights(data: bytes) -> GPTModel:
    """A ``GPTModel`` (eval mode) with the weights of a ``weights_file``."""
    tensors, metadata = read_weights(data)
    vocab_size, emb_dim = tensors["tok_emb.weight"].shape
    blocks = {name.split(".")[1] for name in tensors if name.startswith("trf_blocks.")}
    model = GPTModel(
        vocab_size, tensors["pos_emb.weight"].shape[0], emb_dim,
        int(metadata["num_heads"]), len(blocks),
    )  # fmt: skip
    model.load_state_dict(tensors)
    for norm in model.modules():
        if isinstance(norm, torch.nn.LayerNorm):
            norm.eps = float(metadata["layer_norm_eps"])
    return model.eval()


class Run(NamedTuple):
    """What the model computes on one sequence: every head's weights ``(L, H, T, T)``
    and the next-token probabilities after every position ``(T, V)``."""

    weights: torch.Tensor
    probabilities: torch.Tensor


@torch.no_grad()
def run(
    model: GPTModel, tokens: Sequence[int], off: Sequence[tuple[int, int]] = ()
) -> Run:
    """Run ``tokens`` through ``model`` with the ``(layer, head)`` pairs of ``off``
    switched off (their context vectors zeroed, ``GPTModel.ablate``)."""
    ids = torch.tensor([list(tokens)], dtype=torch.long)  # (1, T)
    with model.ablate(list(off)), model.record_attention() as recorded:
        logits = model(ids)[0]  # (T, V)
    weights = torch.stack([layer[0] for layer in recorded])  # (L, H, T, T)
    return Run(weights, torch.softmax(logits, dim=-1))  # (T, V)


class Example(NamedTuple):
    """An input typed into the explorer at build: its name, its symbols, and the heads
    switched off."""

    name: str
    text: str
    off: tuple[tuple[int, int], ...] = ()


def after_earlier(tokens: Sequence[int], query: int) -> list[int]:
    """The positions just after each earlier occurrence of the token at ``query``: where
    an induction head looks."""
    return [p + 1 for p in range(query) if tokens[p] == tokens[query]]


def top_tokens(probabilities: torch.Tensor, k: int = TOP) -> list[tuple[str, float]]:
    """The ``k`` likeliest next tokens ``(V,)``, as (symbol, probability)."""
    values, ids = torch.topk(probabilities.double(), k)
    return [(SYMBOLS[int(i)], float(v)) for v, i in zip(values, ids)]


def examples_table(model: GPTModel, examples: Sequence[Example]) -> str:
    """What PyTorch computes for each example at its last position, as text: each head's
    weight on the token after the earlier occurrence (or its largest weight, where the
    last token has no earlier occurrence), and the likeliest next tokens."""
    lines = []
    for example in examples:
        tokens = encode(example.text)
        computed = run(model, tokens, example.off)
        last = len(tokens) - 1
        targets = after_earlier(tokens, last)
        off = ", ".join(f"layer {layer} head {head}" for layer, head in example.off)
        title = f"{example.name}: {example.text}" + (f" ({off} off)" if off else "")
        lines.append(title)
        if targets:
            where = " and ".join(f"{p} ({example.text[p]})" for p in targets)
            earlier = example.text[last]
            lines.append(f"  weight on position {where}, after the earlier {earlier}:")
        else:
            first = example.text[last]
            lines.append(f"  no earlier {first}: each head's largest weight, at:")
        for layer in range(computed.weights.shape[0]):
            cells = []
            for head in range(computed.weights.shape[1]):
                row = computed.weights[layer, head, last]  # (T,)
                if targets:
                    cells.append(f"{float(row[targets].sum()):.4f}")
                else:
                    cells.append(f"{float(row.max()):.4f}@{int(row.argmax())}")
            lines.append(f"  layer {layer}: " + " ".join(cells))
        top = top_tokens(computed.probabilities[last], 3)
        top = "  ".join(f"{symbol} {p:.4f}" for symbol, p in top)
        lines.append(f"  next: {top}")
    return "\n".join(lines)


def _shade(value: float) -> str:
    """A cell of weight ``value`` as the explorer grids draw it (two decimals)."""
    shown = round(value, 2)
    classes = ink_classes(shown)
    ink = f' class="{" ".join(classes)}"' if classes else ""
    style = f' style="--w:{shown:.2f}"' if shown else ""
    return f"<td{ink}{style}></td>"


def _grid(tokens: list[int], computed: Run, query: int, off) -> str:
    """Every head's weights for ``query`` over the keys: a row per head, a column per
    token, the tokens after the query's earlier occurrences marked under the grid."""
    num_layers, num_heads = computed.weights.shape[:2]
    head = "".join(
        f'<th scope="col"{" class=live-query" if p == query else ""}>{SYMBOLS[t]}</th>'
        for p, t in enumerate(tokens)
    )
    rows = []
    for layer in range(num_layers):
        for h in range(num_heads):
            row = computed.weights[layer, h, query].tolist()
            cells = "".join(
                _shade(row[p]) if p <= query else "<td></td>"
                for p in range(len(tokens))
            )
            state = "off" if (layer, h) in off else "on"
            rows.append(
                f'<tr data-layer="{layer}" data-head="{h}" data-state="{state}">'
                f'<th scope="row"><span class="live-head">L{layer} H{h}</span></th>'
                f"{cells}</tr>"
            )
    targets = set(after_earlier(tokens, query))
    marks = "".join(
        f"<td>{MARK if p in targets else ''}</td>" for p in range(len(tokens))
    )
    return (
        '<div class="explorer-grid"><table class="explorer-table live-table">'
        '<thead><tr><th scope="col" class="explorer-corner"><span>head \u2193</span> '
        f"<span>key \u2192</span></th>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody>"
        f'<tfoot><tr><th scope="row">{MARK} after</th>{marks}</tr></tfoot>'
        "</table></div>"
    )


def _probabilities(probabilities: torch.Tensor) -> str:
    """The likeliest next tokens with a bar each, and the rest together."""
    top = top_tokens(probabilities)
    rest = max(0.0, 1.0 - sum(p for _, p in top))
    bars = "".join(
        f'<tr><th scope="row">{html.escape(name)}</th><td class="temperature-track">'
        f'<span style="width: {p * 100:.1f}%"></span></td>'
        f'<td class="temperature-value">{p:.4f}</td></tr>'
        for name, p in [*top, (f"other {len(SYMBOLS) - TOP}", rest)]
    )
    return (
        '<table class="temperature-table live-probabilities"><thead><tr>'
        '<th scope="col">next token</th><th scope="col">probability</th>'
        '<th scope="col"><span class="explorer-hidden">value</span></th></tr></thead>'
        f"<tbody>{bars}</tbody></table>"
    )


def _last_probabilities(model: GPTModel, example: Example) -> torch.Tensor:
    """PyTorch's next-token probabilities after the example's last token: ``(V,)``."""
    return run(model, encode(example.text), example.off).probabilities[-1]


def live_explorer(
    model: GPTModel,
    examples: Sequence[Example],
    file_name: str,
    file_bytes: int,
    *,
    caption: str = "",
) -> str:
    """HTML for the live explorer: the first example as PyTorch computed it at build
    (what a reader without JavaScript sees), and what the script needs to run the model
    on any input: the weights file's name (beside the page) and size, the symbols, the
    examples with PyTorch's likeliest next tokens, and the temperatures."""
    if not examples or not all(isinstance(e, Example) for e in examples):
        raise TypeError(
            f"examples must be a non-empty sequence of Example, got {examples!r}"
        )
    first = examples[0]
    tokens = encode(first.text)
    computed = run(model, tokens, first.off)
    last = len(tokens) - 1
    data = {
        "file": file_name,
        "bytes": file_bytes,
        "symbols": SYMBOLS,
        "temperatures": list(TEMPERATURES),
        "examples": [
            {
                "name": e.name,
                "text": e.text,
                "off": [list(pair) for pair in e.off],
                "pytorch": [
                    [symbol, round(p, 4)]
                    for symbol, p in top_tokens(_last_probabilities(model, e))
                ],
            }
            for e in examples
        ],
    }
    status = (
        f"{html.escape(first.name)}: {first.text}. After position {last} "
        f"(\u201c{first.text[last]}\u201d), PyTorch at build:"
    )
    return (
        '<figure data-search-exclude class="explorer live-explorer" '
        f'data-light-ink-from="{LIGHT_INK_FROM}" data-dark-ink-from="{DARK_INK_FROM}" '
        f'data-live="{_payload(data)}">'
        f'<p class="live-status">{status}</p>'
        f"{_grid(tokens, computed, last, set(first.off))}"
        f'<div class="live-next">{_probabilities(computed.probabilities[last])}</div>'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )
