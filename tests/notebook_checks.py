"""The numbers each notebook's page relies on, checked against the book or a by-hand computation
from what the notebook left behind: a notebook that runs but computes something else fails.

``CHECKS[name](namespace)`` maps each check's description to whether it holds, in the namespace
the notebook script left. tests/test_notebook_download.py runs it at the end of each downloaded
notebook, in the clean environment: it needs torch alone.
"""

from __future__ import annotations

import torch


def _close(got, *expected):
    return torch.allclose(got, torch.tensor(expected), atol=1e-4)


def _softmax_rows(x):  # (T, d) -> (T, T): softmax(X X^T), written here
    scores = x @ x.T  # (T, T)
    return scores.exp() / scores.exp().sum(dim=-1, keepdim=True)  # (T, T)


CHECKS = {
    "attention_at_work.py": lambda ns: {
        "accuracy on the repeat > 95%": ns["accuracy"] > 0.95,
        "layer 1 induction scores > 0.8": bool((ns["induction"][1] > 0.8).all()),
        "cached tokens == uncached tokens": torch.equal(ns["slow"], ns["fast"]),
    },
    "causal_attention.py": lambda ns: {
        "the book's first context vector": _close(ns["context_vecs"][0, 0], -0.4519, 0.2216),
        "no weight on the future": not ns["attn_weights"].triu(1).any(),
    },
    "modern_attention.py": lambda ns: {
        "cache bytes scale with num_kv_heads": (
            ns["sizes"][8] == 4 * ns["sizes"][2] == 8 * ns["sizes"][1]
        ),
        "rolling cache holds its window": (ns["rolling"].held, ns["rolling"].length) == (8, 40),
        "cached decoding == one pass": ns["difference"] < 1e-5,
        "absorbed latent decoding == plain": ns["absorbed_gap"] < 1e-5,
        "latent cache: d_c + d_r numbers per token": (
            ns["latent_cache"].nbytes == 2 * 32 * (32 + 8) * 4
        ),
    },
    "multi_head_attention.py": lambda ns: {
        "the book's wrapper output": _close(ns["wrapped"][0, 0], -0.4519, 0.2216, 0.4772, 0.1063),
        "the book's MultiHeadAttention output": _close(ns["out"][0, 0], 0.3190, 0.4858),
        "GPT-2 layer parameters": ns["count"] == 4 * 768 * 768 + 768,  # 4 matrices, 1 bias
    },
    "simple_self_attention.py": lambda ns: {
        "the book's context vector": _close(ns["context_vec_2"], 0.4419, 0.6515, 0.5683),
        "softmax(X X^T) X": torch.allclose(
            ns["all_context_vecs"], _softmax_rows(ns["inputs"]) @ ns["inputs"]
        ),
    },
    "toy_heatmap.py": lambda ns: {
        "softmax(X X^T)": torch.allclose(ns["weights"], _softmax_rows(ns["inputs"])),
    },
    "trainable_self_attention.py": lambda ns: {
        "the book's context vector": _close(ns["context_vec_2"], 0.3061, 0.8210),
        "the book's SelfAttentionV1 output": _close(ns["first_v1"], 0.2996, 0.8053),
    },
    "why_attention.py": lambda ns: {
        "RNN forgets token 0 by 50 tokens, attention does not":
            ns["effects"][50][0] < 1e-6 < ns["effects"][50][1],
    },
}
