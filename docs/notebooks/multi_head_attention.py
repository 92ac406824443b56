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
# # Notebook: Multi-head attention
#
# The code of the chapter "Multi-head attention" (chapter 5 of the site), cell by cell: heads
# side by side, then one module that splits its projections into heads,
#
# $$\mathrm{head}_h = \mathrm{softmax}\left(\frac{Q_h K_h^\top}{\sqrt{d_h}} + M\right) V_h .$$
#
# It needs `torch` and `matplotlib`; its first code cell fetches the package from the site
# when it is not installed.

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
import matplotlib.pyplot as plt
import torch

from llm_attention_site.figures import heatmap, shown
from llm_attention.multihead import MultiHeadAttention
from llm_attention.multihead_wrapper import MultiHeadAttentionWrapper
from llm_attention.toy import TOKENS, toy_embeddings

inputs = toy_embeddings()  # (6, 3)
batch = torch.stack((inputs, inputs), dim=0)  # (2, 6, 3)

# %% [markdown]
# ## Heads in a list
#
# Two `CausalAttention` heads of `d_out=2`, concatenated: four numbers per token. With the
# book's seed the first token gets `[-0.4519, 0.2216, 0.4772, 0.1063]`.

# %%
torch.manual_seed(123)
wrapper = MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2)
with torch.no_grad():
    wrapped = wrapper(batch)  # (2, 6, 4)
book = torch.tensor([-0.4519, 0.2216, 0.4772, 0.1063])
assert torch.allclose(wrapped[0, 0], book, atol=1e-4)
print(wrapped)

# %% [markdown]
# ## One module, split into heads
#
# The forward pass by hand, printing every shape, checked against the module.

# %%
torch.manual_seed(123)
mha = MultiHeadAttention(3, 2, 6, 0.0, num_heads=2)
b, T, _ = batch.shape
H, d_h = mha.num_heads, mha.head_dim

def split(t):  # (B, T, d_out) -> (B, H, T, d_h)
    return t.view(b, T, H, d_h).transpose(1, 2)


with torch.no_grad():
    q = split(mha.W_query(batch))  # (B, H, T, d_h)
    k = split(mha.W_key(batch))  # (B, H, T, d_h)
    v = split(mha.W_value(batch))  # (B, H, T, d_h)
    scores = q @ k.transpose(2, 3)  # (B, H, T, T)
    scores = scores.masked_fill(mha.mask[:T, :T], -torch.inf)  # (B, H, T, T)
    attn_weights = torch.softmax(scores / d_h**0.5, dim=-1)  # (B, H, T, T)
    per_head = attn_weights @ v  # (B, H, T, d_h)
    merged = per_head.transpose(1, 2).reshape(b, T, H * d_h)  # (B, T, d_out)
    out = mha.out_proj(merged)  # (B, T, d_out)
    assert torch.allclose(out, mha(batch))
shapes = {"q": q, "k": k, "scores": scores, "per_head": per_head,
          "merged": merged, "out": out}
for name, t in shapes.items():
    print(f"{name:<9}", tuple(t.shape))
assert torch.allclose(out[0, 0], torch.tensor([0.3190, 0.4858]), atol=1e-4)
print("first token:", out[0, 0])

# %% [markdown]
# One attention map per head.

# %%
fig, axes = plt.subplots(H, 1, figsize=(4.4, 3.6 * H))  # one above the other
for h, ax in enumerate(axes):
    title = f"head {h + 1}"
    heatmap(attn_weights[0, h], TOKENS, TOKENS, title=title, ax=ax)
shown(fig, alt="The weights of each head, as 6 by 6 heatmaps")

# %% [markdown]
# ## A GPT-2-sized module (exercise 3.3)
#
# 768 numbers in and out, 12 heads, 1024 tokens of context.

# %%
gpt2_attention = MultiHeadAttention(768, 768, 1024, 0.0, num_heads=12)
count = sum(p.numel() for p in gpt2_attention.parameters())
assert count == 3 * 768 * 768 + 768 * 768 + 768
print(f"{count:,} parameters, head_dim = {gpt2_attention.head_dim}")

# %% [markdown]
# Try it: give `MultiHeadAttention` `d_out=12, num_heads=3` and print the shapes again.
