"""Train the induction model of "Watching attention learn" with several seeds; keep the scores.

For each seed (the model's initial weights and its training batches), the script records the
accuracy on the repeated part, every head's previous-token and induction score, and the accuracy
with heads zeroed: each head alone, the induction heads (score above 0.5) one more at a time in
order of score, and every head of layer 0. The page reads the results file to say which claims
held for every seed, and by what margin.

Writes ``benchmarks/induction_seeds.json`` (with the machine, threads and versions).

    python benchmarks/induction_seeds.py             # 8 seeds, about 5 s each on 2 cores
    python benchmarks/induction_seeds.py --seeds 2   # a smoke run
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
import time

import torch

from llm_attention.induction import (
    InductionConfig,
    accuracy_without,
    head_scores,
    make_batch,
    trained_model,
)

ROOT = pathlib.Path(__file__).resolve().parent.parent
EVAL_SEED, EVAL_SIZE = 1234, 512  # one held-out batch, the same for every seed
INDUCTION_THRESHOLD = 0.5

sys.path.insert(0, str(ROOT / "benchmarks"))
from common import machine_info, set_threads  # noqa: E402


def evaluate(config: InductionConfig) -> dict:
    model, losses, seconds = trained_model(config)
    batch = make_batch(config, EVAL_SIZE, torch.Generator().manual_seed(EVAL_SEED))
    with torch.no_grad(), model.record_attention() as weights:
        model(batch.tokens)
    previous, induction = head_scores(weights, batch, config.segment)  # (L, H) each
    layers, heads = previous.shape
    every_head = [(layer, head) for layer in range(layers) for head in range(heads)]
    by_score = sorted(every_head, key=lambda lh: -induction[lh].item())
    inductive = [lh for lh in by_score if induction[lh] > INDUCTION_THRESHOLD]
    return {
        "seed": config.seed,
        "train_s": seconds,
        "first_loss": losses[0],
        "final_loss": sum(losses[-20:]) / 20,
        "accuracy": accuracy_without(model, batch, config.segment),
        "previous_score": previous.tolist(),
        "induction_score": induction.tolist(),
        "induction_heads": inductive,
        "accuracy_without_head": {
            f"{layer},{head}": accuracy_without(model, batch, config.segment, [(layer, head)])
            for layer, head in every_head
        },
        "accuracy_without_top_induction_heads": [
            accuracy_without(model, batch, config.segment, inductive[:k])
            for k in range(len(inductive) + 1)
        ],
        "accuracy_without_layer_0": accuracy_without(
            model, batch, config.segment, [(0, head) for head in range(heads)]
        ),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=8, help="how many seeds, from 0")
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    parser.add_argument(
        "--results", type=pathlib.Path, default=ROOT / "benchmarks" / "induction_seeds.json"
    )
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be at least 1, got {args.seeds}")
    set_threads(parser, args.threads)
    started, runs = time.perf_counter(), []
    for seed in range(args.seeds):
        runs.append(evaluate(InductionConfig(seed=seed)))
        run = runs[-1]
        print(f"[{seed + 1}/{args.seeds}] seed {seed}: {run['train_s']:.1f} s, accuracy "
              f"{run['accuracy']:.3f}, induction heads {run['induction_heads']}, without them "
              f"{run['accuracy_without_top_induction_heads'][-1]:.3f}", file=sys.stderr, flush=True)  # fmt: skip
    config = dataclasses.asdict(InductionConfig())
    config.pop("seed")
    config.pop("nudge")  # always None here: plain runs
    report = {
        "machine": machine_info(),
        "config": config | {"eval_seed": EVAL_SEED, "eval_size": EVAL_SIZE,
                            "induction_threshold": INDUCTION_THRESHOLD},  # fmt: skip
        "runs": runs,
        "wall_s": time.perf_counter() - started,
    }
    args.results.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.results} in {report['wall_s']:.0f} s", file=sys.stderr)
    return report


if __name__ == "__main__":
    main()
