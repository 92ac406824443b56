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
# # Notebook: Attention at work
#
# The code of the pages "Watching attention learn" and "Generating with a KV cache", cell by
# cell: train a tiny GPT on a task that needs attention by content, find its previous-token and
# induction heads, take them away, then generate with and without a KV cache.
#
# It needs `torch` and `matplotlib`; its first code cell fetches the package from the site
# when it is not installed.
# Training takes a few seconds on a laptop CPU.

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

from llm_attention.generate import generate
from llm_attention.induction import (
    InductionConfig,
    accuracy_without,
    head_scores,
    make_batch,
    trained_model,
)
from llm_attention_site.figures import shown

config = InductionConfig()
S = config.segment

# %% [markdown]
# ## The task
#
# Distinct random ids, except one segment that appears twice at random places. Inside the
# second copy the next token is the one that followed the current token in the first copy.

# %%
example = make_batch(config, 1, torch.Generator().manual_seed(7))
first, second = example.first.item(), example.second.item()
print(example.tokens[0].tolist())
print(f"the segment starts at {first} and again at {second}")
assert torch.equal(
    example.tokens[0, first : first + S], example.tokens[0, second : second + S]
)

# %% [markdown]
# ## Train, and measure on new sequences
#
# `trained_model` trains once per process (and, when the environment variable
# `LLM_ATTENTION_RUN_CACHE` names a folder, keeps the result there).

# %%
model, losses, seconds = trained_model(config)
held_out = make_batch(config, 512, torch.Generator().manual_seed(1234))
accuracy = accuracy_without(model, held_out, S)
print(f"trained in {seconds:.1f} s; accuracy on the repeat {accuracy:.1%}, "
      f"chance {1 / config.vocab_size:.1%}")
assert accuracy > 0.95

fig, ax = plt.subplots(figsize=(4.2, 2.6))
ax.plot(losses)
ax.set_xlabel("step")
ax.set_ylabel("loss on the repeat")
fig.tight_layout()
shown(fig, alt="The loss on the repeat against the training step")

# %% [markdown]
# ## The heads of the trained model on the example

# %%
with torch.no_grad(), model.record_attention() as weights:
    model(example.tokens)
fig, axes = plt.subplots(4, 2, figsize=(4.0, 8.4))  # a row of two heads at a time
for layer in range(2):
    for head in range(4):
        ax = axes[2 * layer + head // 2, head % 2]
        ax.imshow(weights[layer][0, head].numpy(), cmap="Blues", vmin=0, vmax=1)
        ax.set_title(f"layer {layer}, head {head}", fontsize=11)
        ax.set_xticks([])
        ax.set_yticks([])
fig.tight_layout()
shown(fig, alt="The weights of the eight heads on the example, one map per head")

# %% [markdown]
# ## Previous-token and induction scores, and ablation
#
# The mean weight on the previous position, and (in the second copy) on the position just
# after the earlier occurrence of the current token. Then the accuracy with heads zeroed.

# %%
with torch.no_grad(), model.record_attention() as weights:
    model(held_out.tokens)
previous, induction = head_scores(weights, held_out, S)
print("previous-token scores\n", previous.round(decimals=2))
print("induction scores\n", induction.round(decimals=2))
layer_1 = [(1, head) for head in range(config.num_heads)]
print(f"without one induction head: {accuracy_without(model, held_out, S, layer_1[:1]):.1%}")
print(f"without all of them:        {accuracy_without(model, held_out, S, layer_1):.1%}")
assert (induction[1] > 0.8).all()
assert accuracy_without(model, held_out, S, layer_1) < 0.25

# %% [markdown]
# ## Generate, without and with a KV cache
#
# The first 16 tokens of three sequences as prompts; greedy decoding fills the context.

# %%
prompt = held_out.tokens[:3, :16]
slow, slow_logits = generate(model, prompt, 8, use_cache=False)
fast, fast_logits = generate(model, prompt, 8, use_cache=True)
print(fast[:, 16:])
print(f"same tokens: {torch.equal(slow, fast)}; "
      f"largest logit gap {(slow_logits - fast_logits).abs().max():.1e}")
assert torch.equal(slow, fast)
