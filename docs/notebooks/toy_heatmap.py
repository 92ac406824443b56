# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Notebook: Attention weights of the running example
#
# Six tokens, "Your journey starts with one step", each a vector of three numbers.
# Without any trained weights, token $i$ attends to token $j$ in proportion to
# $\exp(x_i \cdot x_j)$:
#
# $$\alpha_{ij} = \mathrm{softmax}_j\left(x_i \cdot x_j\right)$$
#
# This notebook computes those weights with the `llm_attention` package and draws them.
# Run it top to bottom; it needs `torch` and `matplotlib`: its first code cell fetches the
# package from the site when it is not installed.

# %%
# Downloaded from the site? Then this cell saves the site's fetch_packages.py beside the
# notebook and runs it: it fetches the package's modules from the site, once, into
# ./llm_attention/, and the site's figure helpers into ./llm_attention_site/. With the
# packages installed (the repository's set-up), it does nothing.
import importlib.util
import runpy
import urllib.request

SITE_URL = "http://127.0.0.1:8000/"  # the build writes the site's address here
if importlib.util.find_spec("llm_attention_site") is None:
    fetcher = urllib.request.urlretrieve(f"{SITE_URL}code/llm_attention_site/fetch_packages.py",
                                         "fetch_packages.py")[0]
    runpy.run_path(fetcher, {"SITE_URL": SITE_URL}, run_name="__main__")

# %%
import torch

from llm_attention_site.figures import heatmap, shown
from llm_attention.simple import attention_weights
from llm_attention.toy import TOKENS, toy_embeddings

inputs = toy_embeddings()  # (6, 3)
weights = attention_weights(inputs)  # (6, 6)
print(weights)

# %% [markdown]
# Each row is one query token's attention over all six tokens, so each row sums to one.

# %%
row_sums = weights.sum(dim=-1)
assert torch.allclose(row_sums, torch.ones(6))
print(row_sums)

# %% [markdown]
# The heatmap: rows are the tokens doing the attending (queries), columns the tokens attended to (keys).

# %%
shown(heatmap(weights, TOKENS, TOKENS, title=r"softmax($X X$ᵀ), the running example"),
      alt="6 by 6 heatmap of the attention weights of the running example")

# %% [markdown]
# "journey" and "starts" have almost the same embedding. Both of their rows put the two
# largest weights on "journey" and "starts": similar vectors have large dot products.

# %%
for token in ("journey", "starts"):
    row = weights[TOKENS.index(token)]  # (6,)
    top_two = {TOKENS[j] for j in row.topk(2).indices.tolist()}
    assert top_two == {"journey", "starts"}, top_two
    print(f"{token:>8} attends most to {sorted(top_two)}")

# %% [markdown]
# Try editing a row of `inputs` and running the cells again.
