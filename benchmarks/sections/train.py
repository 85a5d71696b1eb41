"""`train`: training-step time (forward with labels, backward, clipping at 1, fused AdamW on `parameter_groups`,
`zero_grad`) of every block type at the CodeParrot shape (18 blocks, d=768, 12 heads, MLP 3072, vocab 50257, seq 128,
batch 8), as ratios to our `pre_ln`, and two anchors of the same shape and attention implementation (sdpa): our
`pre_ln` against `GPT2LMHeadModel`, and `pre_ln_llama` (our pre_ln with RMSNorm, SwiGLU of width 8/3·d, rotary
positions, tied embeddings) against `LlamaForCausalLM` configured alike, in a group of their own.

Models are timed round-robin in groups that fit in memory, each model in a process of its own (its own heap; one step
runs at a time); the order rotates every round; after `TRAIN_WARMUP` warm-up rounds, each round gives one ratio per
model, and the median of those ratios is the figure (their min..max is the spread). The analytic matmul-FLOP bound of
each ratio (weights of every GEMM, attention scores and mixing) stands next to it.
"""

from __future__ import annotations

from benchmarks.common import TRAIN_WARMUP, Context, format_ratio, ratios, round_robin_processes

ON_CUDA = True
BF16 = True
#: train groups: each fits in memory (4 models with AdamW state at the CodeParrot shape is ~11 GB) and has pre_ln;
#: together they hold every block type (`BLOCK_TYPES`, tested)
TRAIN_GROUPS = (
    ("gpt2", "pre_ln", "sas_p", "sas"),
    ("pre_ln", "parallel", "value_skipinit", "simplest"),
    ("pre_ln", "post_ln", "normformer"),
    ("llama", "pre_ln_llama"),
)
#: transformers' classes users pick today, each timed against our block configured like it
ANCHORS = {"gpt2": "pre_ln", "llama": "pre_ln_llama"}
ANCHOR_CLASSES = {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM"}


def run(ctx: Context) -> dict:
    return run_groups(ctx, TRAIN_GROUPS)


def table(result: dict) -> str:
    return render(result, "Training step, eager (sdpa)")


def run_groups(ctx: Context, groups: tuple[tuple[str, ...], ...], compiled: bool = False) -> dict:
    """Train-step groups, each timed round-robin; ratios to pre_ln (and of the anchors) from the same group."""
    rows: dict[str, dict] = {}
    for group in groups:
        for name, row in _group(ctx, group, compiled).items():
            if name != "pre_ln" or "pre_ln" not in rows:  # pre_ln's row from the first group (with gpt2)
                rows[name] = row
    return rows


def _group(ctx: Context, group: tuple[str, ...], compiled: bool) -> dict[str, dict]:
    shape = ctx.shape
    workers = {name: ctx.train_process(name, compiled=compiled, wait=False) for name in group}
    results = round_robin_processes(workers, ctx.rounds, warmup=TRAIN_WARMUP + 1 if compiled else TRAIN_WARMUP)
    flops = {name: w.info["flops"] for name, w in workers.items()}
    params = {name: w.info["params"] for name, w in workers.items()}
    rows = {}
    for name in group:
        rows[name] = {
            **results[name],
            "group": list(group),
            "params_M": params[name] / 1e6,
            "tokens_per_s": shape.batch * shape.seq / results[name]["median_s"],
            "matmul_flops_per_token": flops[name],
        }
        if "pre_ln" in group:
            rows[name]["vs_pre_ln"] = ratios(results, "pre_ln")[name]
            rows[name]["flop_bound_vs_pre_ln"] = flops["pre_ln"] / flops[name]
    for anchor, ours in ANCHORS.items():
        if anchor in group and ours in group:
            rows[ours][f"vs_{anchor}"] = ratios(results, anchor)[ours]
            rows[ours][f"flop_bound_vs_{anchor}"] = flops[anchor] / flops[ours]
    return rows


def render(result: dict, title: str) -> str:
    lines = [
        f"## {title}",
        "| model | params M | median step s | min s | spread | CPU s | tokens/s | vs pre_ln: median (range, of mins) "
        "| FLOP bound vs pre_ln |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in result.items():
        vs, bound = ("-", "-")
        if "vs_pre_ln" in r:
            vs, bound = format_ratio(r["vs_pre_ln"]), f"{r['flop_bound_vs_pre_ln']:.3f}"
        lines.append(
            f"| {name} | {r['params_M']:.1f} | {r['median_s']:.3f} | {r['min_s']:.3f} | {r['spread']:.0%} | "
            f"{r['cpu_median_s']:.2f} | {r['tokens_per_s']:.0f} | {vs} | {bound} |"
        )
    for anchor, ours in ANCHORS.items():
        if f"vs_{anchor}" in result.get(ours, {}):
            r = result[ours]
            lines += [
                "",
                f"{ours} vs {ANCHOR_CLASSES[anchor]}: {format_ratio(r[f'vs_{anchor}'])}; FLOP bound "
                f"{r[f'flop_bound_vs_{anchor}']:.3f}; parameters {r['params_M']:.2f}M vs {result[anchor]['params_M']:.2f}M",
            ]
    groups = dict.fromkeys(tuple(v["group"]) for v in result.values())
    lines.append(f"(groups: {', '.join('/'.join(g) for g in groups)})")
    return "\n".join(lines)
