"""docs/speed.md's float32 results: the `make bench` runs' tables (training, other sections, decoding, scoring, the
targets), the protocol and host, and what limits the ratios."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from typing import Any

from benchmarks import targets

from ..benchruns import (
    CURRENT_RUNS,
    DECODE_RUNS,
    FAST_HOST_RUNS,
    GPT2_TRAIN,
    LLAMA_TRAIN,
    SAS_P_TRAIN,
    by_run,
    fused_saving,
    kv_cache_kib,
    peaks,
    pooled,
    ratio,
    ratio_cell,
    runs,
    target,
)
from ..data import run
from ..registry import block, facts, table
from ..text import COUNTS, about_fraction, common, num, run_label, run_numbers, span

PAGE = "docs/speed.md"
#: the one-row product's run (`python -m benchmarks.gemv`)
GEMV = "gemv"

#: (label, section, model, base, the bound's key in the model's row or None for 1.000)
TRAIN_ROWS = (
    ("our pre_ln / `GPT2LMHeadModel`", "train", "pre_ln", "gpt2", None),
    ("`pre_ln_llama` / `LlamaForCausalLM`", "train", "pre_ln_llama", "llama", None),
    *((f"{m} / pre_ln", "train", m, "pre_ln", "flop_bound_vs_pre_ln") for m in ("sas_p", "sas", "simplest")),
    *(
        (f"{m} / pre_ln", "train", m, "pre_ln", "flop_bound_vs_pre_ln")
        for m in ("parallel", "value_skipinit", "post_ln", "normformer")
    ),
    ("compiled sas_p / compiled pre_ln", "compile", "sas_p", "pre_ln", "flop_bound_vs_pre_ln"),
    ("compiled pre_ln / compiled GPT-2", "compile", "pre_ln", "gpt2", None),
)


@block("speed-train")
def train_table() -> str:
    current = runs(CURRENT_RUNS)
    rows = []
    for label, section, model, base, bound_key in TRAIN_ROWS:
        first = current[CURRENT_RUNS[0]][section][model]
        bound = first[bound_key] if bound_key else 1.0
        figures = [ratio(r[section], model, base) for r in current.values()]
        cells = [num(f["median"]) if section == "compile" else ratio_cell(f) for f in figures]
        rows.append([label, num(bound), *cells])
    return table(["ratio", "bound", *map(run_label, current)], rows)


#: the other sections' rows: (label, the cell of one run)
OTHER_ROWS: tuple[tuple[str, Callable[[dict[str, Any]], str]], ...] = (
    (
        "`loss`: step time, logits path / fused head + loss (pre_ln; sas_p)",
        lambda r: "; ".join(num(r["loss"][m]["fused_speedup"]["ratio_median"]) for m in ("pre_ln", "sas_p")),
    ),
    (
        "`packing`: real tokens/s, one padding-free row / padded batch of 8 sequences of 16–128 tokens (pre_ln; sas_p)",
        lambda r: "; ".join(num(r["packing"][m]["packed_over_padded"]["ratio_median"], 2) for m in ("pre_ln", "sas_p")),
    ),
    (
        "`raptr`: pre_ln step on 9 of 18 layers / full step (embedding, head, AdamW not skipped)",
        lambda r: num(r["raptr"]["half_over_full_median"]),
    ),
    (
        "`allocator`: step time, glibc defaults / freed memory kept (GPT-2; pre_ln; sas_p)",
        lambda r: "; ".join(
            num(r["allocator"][m]["keep_speedup"]["ratio_median"]) for m in ("gpt2", "pre_ln", "sas_p")
        ),
    ),
)


@block("speed-other")
def other_table() -> str:
    current = runs(CURRENT_RUNS)
    rows = [[label, *(cell(r) for r in current.values())] for label, cell in OTHER_ROWS]
    return table(["other sections", *map(run_label, current)], rows)


@block("speed-decode")
def decode_table() -> str:
    every = runs((*CURRENT_RUNS, *DECODE_RUNS))
    rows = []
    for batch in (1, 8):
        for model in ("pre_ln", "sas_p"):
            group = f"batch_{batch}"
            bound = run(CURRENT_RUNS[0])["generate"][group][model]["weight_bound_vs_gpt2"]
            cells = [ratio_cell(ratio(r["generate"][group], model, "gpt2"), of_min=False) for r in every.values()]
            rows.append([str(batch), f"{model} / GPT-2", num(bound), *cells])
    return table(["batch", "ratio", "bound", *map(run_label, every)], rows)


@block("speed-score")
def score_table() -> str:
    every = runs((*CURRENT_RUNS, *DECODE_RUNS))
    names = [run_label(n) for n in every]
    rows = []
    for shape in ("8x128", "1x1024"):
        for model in ("sas", "sas_p"):
            bound = run(CURRENT_RUNS[0])["score"][shape][model]["flop_bound_vs_pre_ln"]
            medians = [ratio(r["score"][shape], model, "pre_ln")["median"] for r in every.values()]
            cells = [f"{num(m)} ({num(m / bound)})" for m in medians]
            rows.append([shape.replace("x", " × "), f"{model} / pre_ln", num(bound), *cells])
    for shape in ("8x128", "1x1024"):
        cells = [num(ratio(r["score"][shape], "pre_ln", "gpt2")["median"]) for r in every.values()]
        rows.append([shape.replace("x", " × "), "pre_ln / GPT-2", "1.000", *cells])
    head = ["batch × seq", "ratio", "bound", f"{names[0]}: ratio (share of bound)", *names[1:]]
    return table(head, rows)


@block("speed-targets")
def targets_table() -> str:
    rows = []
    for t in targets.TARGETS:
        p = pooled(t)["pooled"]
        if p is None:
            why = f"not counted: GEMM peaks {span(peaks(CURRENT_RUNS), 0)} GFLOP/s (by run {span(by_run(t))})"
            rows.append([t.label, why, "-", "-", "-"])
            continue
        figure = f"{num(p['ratio'])} ({num(p['low'])}–{num(p['high'])}; {p['rounds']})"
        weight_bounds = {cell["weight_bound"] for cell in pooled(t)["runs"].values() if cell and cell["weight_bound"]}
        label = t.label
        if len(weight_bounds) == 1:
            label = label.replace("weight-bytes bound beside", f"bytes bound {num(*weight_bounds)}")
        met = "yes" if p["met"] else "NO"
        rows.append([label, figure, num(p["bound"]), num(p["share_of_bound"]), met])
    return table(["target", "pooled median (range; rounds)", "bound", "pooled / bound", "met"], rows)


def _profile(row: dict[str, Any]) -> tuple[float, float, int]:
    """A profile's matmul time (`mm` + `addmm_`), the rest, and the calls of `aten::mul`."""
    ops = {e["op"]: e for e in row["top"]}
    matmul = ops["aten::mm"]["self_ms"] + ops["aten::addmm_"]["self_ms"]
    return matmul, row["total_self_ms"] - matmul, ops["aten::mul"]["calls"]


def _gemm_alone(row: dict[str, Any]) -> str:
    return (
        f"{num(row['gemm_gflop'], 1)} GFLOP in {num(row['gemm_time_alone_s'])} s "
        f"({row['gemm_gflop'] / row['gemm_time_alone_s']:.0f} GFLOP/s; peak {num(row['peak_gflops'], 1)}) of a "
        f"{num(row['step_median_s'])} s step"
    )


@facts(PAGE)
def results() -> list[str]:
    """The runs' figures in the prose: hosts, bounds, memory, decoding and what limits the ratios."""
    current = list(runs(CURRENT_RUNS).values())
    every = [*current, *runs(DECODE_RUNS).values()]
    run12, run14, run16 = run("run12"), run("run14"), run("run16")
    sas_p_bound = run16["train"]["sas_p"]["flop_bound_vs_pre_ln"]
    weights = run16["generate"]["batch_1"]
    byte_bound = weights["sas_p"]["weight_bound_vs_gpt2"]
    mfu = {m: [r["mfu"][m] for r in current] for m in ("gpt2", "pre_ln", "sas_p")}
    loss = {m: [r["loss"][m] for r in current] for m in ("pre_ln", "sas_p")}
    step = {m: [r["step_memory"][m]["peak_growth_MiB"] for r in current] for m in ("gpt2", "pre_ln", "sas_p")}
    long = [r["memory"]["2048"] for r in current]
    gemv = {(row["out"], row["in"]): row for row in run(GEMV)["rows"]}
    rate = {
        name: gemv[shape]["linear_GBps"] / gemv[shape]["f_linear_GBps"]
        for name, shape in (
            ("QKV", (2304, 768)),
            ("MLP-in", (3072, 768)),
            ("head", (50257, 768)),
            ("MLP-out", (768, 3072)),
        )
    }
    before_after = run("attention_interface_before_after")["cases"]
    sas_p_train = by_run(SAS_P_TRAIN)
    llama = by_run(LLAMA_TRAIN)
    decode8 = [ratio(r["generate"]["batch_8"], "sas_p", "gpt2")["median"] / byte_bound for r in every]
    pre_ln_profile, sas_p_profile = _profile(run12["profile"]["pre_ln"]), _profile(run12["profile"]["sas_p"])
    return [
        f"runs 9–12 had a GEMM peak of {span(peaks(FAST_HOST_RUNS), 0)} GFLOP/s, runs 13–16 (the current "
        f"figures) {span(peaks(CURRENT_RUNS), 0)} (`mfu`)",
        f"give sas_p / pre_ln {', '.join(num(x) for x in by_run(SAS_P_TRAIN, FAST_HOST_RUNS))}",
        f"{num(run16['train']['gpt2']['matmul_flops_per_token'] / 1e6, 1)} MFLOP a token for GPT-2, Llama and "
        f"every block with values and projections, {num(run16['train']['sas_p']['matmul_flops_per_token'] / 1e6, 1)} "
        f"for sas, sas_p and simplest (`run16.json`); the bound is **1.000** or **{num(sas_p_bound)}**",
        f"{num(weights['gpt2']['gemm_weights'] / 1e6, 1)}M for GPT-2 and pre_ln, "
        f"{num(weights['sas_p']['gemm_weights'] / 1e6, 1)}M for sas_p",
        f"**1.000** for pre_ln / GPT-2 and **{num(byte_bound)}** for sas_p / GPT-2",
        f"on hosts with a GEMM peak of {span(peaks(CURRENT_RUNS), 0)} GFLOP/s (`mfu`)",
        f"Runs 13 and 14 ran at commit {current[0]['meta']['commit']}",
        f"runs 15 and 16 at {common([r['meta']['commit'] for r in current[2:]])}",
        "pre_ln's step: "
        + ", ".join(num(r["train"]["pre_ln"]["median_s"]) for r in current[:-1])
        + f" and {num(current[-1]['train']['pre_ln']['median_s'])} s "
        f"({span([r['train']['pre_ln']['tokens_per_s'] for r in current], 0)} tokens/s), about twice run 12's "
        f"{num(run12['train']['pre_ln']['median_s'])} s",
        f"GPT-2 {span([100 * x['mfu'] for x in mfu['gpt2']], 1)}%, pre_ln "
        f"{span([100 * x['mfu'] for x in mfu['pre_ln']], 1)}%, sas_p {span([100 * x['mfu'] for x in mfu['sas_p']], 1)}% "
        "(GEMM-time shares "
        + ", ".join(f"{span([100 * x['gemm_time_share'] for x in mfu[m]], 0)}%" for m in mfu)
        + ")",
        f"(pre_ln / GPT-2 {span(by_run(GPT2_TRAIN, FAST_HOST_RUNS))} there, {span(by_run(GPT2_TRAIN))} here; "
        f"`pre_ln_llama` / Llama {span(by_run(LLAMA_TRAIN, FAST_HOST_RUNS))} there, {span(llama)} here)",
        f"peaks at {common([num(r['fused']['peak_MiB'], 0) for r in loss['pre_ln']])} MiB (pre_ln) and "
        f"{common([num(r['fused']['peak_MiB'], 0) for r in loss['sas_p']])} MiB (sas_p) with the fused LM head + "
        f"loss, −{common([f'{x:.0f}' for x in fused_saving()])}% against the logits path of the same runs "
        f"({common([num(r['logits']['peak_MiB'], 0) for r in loss['pre_ln']])}, "
        f"{common([num(r['logits']['peak_MiB'], 0) for r in loss['sas_p']])} MiB)",
        f"a step grows the resident set by {span(step['pre_ln'], 0)} MiB (pre_ln) and "
        f"{span(step['sas_p'], 0)} MiB (sas_p) against {span(step['gpt2'], 0)} MiB for `GPT2LMHeadModel` in the "
        f"same run ({span([r['step_memory']['pre_ln']['vs_gpt2'] for r in current], 2)}×)",
        f"Decoding keeps {num(common(list(kv_cache_kib())), 1)} KiB of KV cache per token for every block type",
        f"grows by {span([x['sdpa_MiB'] for x in long], 0)} MiB through sdpa against "
        f"{span([x['eager_MiB'] for x in long], 0)} MiB for an eager T×T reference "
        f"({span([x['eager_over_sdpa'] for x in long], 1)}×)",
        f"at commit {common([run(n)['meta']['commit'] for n in DECODE_RUNS])}, whose model code is that of "
        f"{current[0]['meta']['commit']}",
        f"({span([r['generate']['batch_1']['gpt2']['tokens_per_s'] for r in every], 1)} tokens/s at batch 1, "
        f"{span([r['generate']['batch_8']['gpt2']['tokens_per_s'] for r in every], 1)} at batch 8)",
        f"streams the weights at {span([r['linear_GBps'] for r in gemv.values()], 0)} GB/s where the "
        f"matrix-vector product `F.linear` takes gets {span([r['f_linear_GBps'] for r in gemv.values()], 0)}",
        f"(`python -m benchmarks.gemv`, [`{GEMV}.md`](benchmark/{GEMV}.md): "
        f"{num(rate['QKV'], 1)}× for the QKV matrix, {num(rate['MLP-in'], 1)}× for MLP-in, "
        f"{num(rate['head'], 1)}× for the tied head, {num(rate['MLP-out'], 1)}× for MLP-out",
        f"sas_p's ratio sits at {span(decode8, 2)}× its bound by the runs' medians",
        f"sas_p gains less than its {100 * (1 - weights['sas_p']['gemm_weights'] / weights['gpt2']['gemm_weights']):.0f}% "
        "fewer weight bytes",
        f"had cost `generate` {span([c['ratio_median'] for k, c in before_after.items() if k.startswith('generate')], 2)}× "
        "its speed",
        f"`pre_ln_llama` / Llama is below 1.0 in runs 13 and 14 ({num(llama[0])}, {num(llama[1])}) and above "
        f"in 15 and 16 ({num(llama[2])}, {num(llama[3])}); sas_p / pre_ln at {num(sas_p_train[1])} in run 14 is "
        f"{num(sas_p_train[1] / sas_p_bound, 2)} of its bound",
        f"({span(by_run(GPT2_TRAIN, FAST_HOST_RUNS))} in runs 9–12 on such a host",
        f"{_gemm_alone(run14['mfu']['pre_ln'])} on run 14's host",
        _gemm_alone(run12["mfu"]["pre_ln"]).replace(f"{num(run12['mfu']['pre_ln']['gemm_gflop'], 1)} GFLOP in ", "")
        + " on run 12's",
        f"`mm` + `addmm_` take {pre_ln_profile[0]:.0f} ms in pre_ln and {sas_p_profile[0]:.0f} ms in sas_p "
        f"({num(pre_ln_profile[0] / sas_p_profile[0])}), the other ops {pre_ln_profile[1]:.0f} against "
        f"{sas_p_profile[1]:.0f} ms ({num(pre_ln_profile[1] / sas_p_profile[1])})",
        f"`aten::mul` {sas_p_profile[2]} calls against {pre_ln_profile[2]}",
        f"The counted threshold, {SAS_P_TRAIN.fraction:g} × {num(sas_p_bound)} = "
        f"{num(SAS_P_TRAIN.fraction * sas_p_bound)}, lies inside one run's noise (run 14's "
        f"{num(sas_p_train[1])} is below it, the pooled median meets it)",
        f"`torch.compile`, which fuses it, gives {span([ratio(r['compile'], 'sas_p', 'pre_ln')['median'] for r in current])} "
        "in runs 13–16",
        f"(bound 1.000; {' and '.join(num(x) for x in by_run(GPT2_TRAIN, FAST_HOST_RUNS)[2:])} in runs 11–12, "
        f"{span(by_run(GPT2_TRAIN))} in runs 13–16)",
        f"GPT-2 spends {num(run12['mfu']['gpt2']['step_median_s'] - run12['mfu']['gpt2']['gemm_time_alone_s'], 2)} s "
        f"of its {num(run12['mfu']['gpt2']['step_median_s'])} s step outside its GEMMs "
        f"({num(run12['mfu']['gpt2']['gemm_time_alone_s'])} s timed alone), pre_ln "
        f"{num(run12['mfu']['pre_ln']['step_median_s'] - run12['mfu']['pre_ln']['gemm_time_alone_s'], 2)} s",
        f"({span([r['fused_speedup']['ratio_median'] for r in loss['pre_ln']])}× on our own pre_ln in runs "
        "13–16, `loss`)",
        f"at batch 1 reads every GEMM weight once per token, at {span([r['linear_GBps'] for r in gemv.values()], 0)} GB/s",
        f"**sas_p against {num(sas_p_bound)}.**",
        f"Our pre_ln / GPT-2 ≥ {GPT2_TRAIN.bound({}):g} is counted only on a host with a GEMM peak of "
        f"{targets.FAST_HOST_GFLOPS:.0f} GFLOP/s or more",
        f"Runs 13 and 14 ran at commit {current[0]['meta']['commit']} ({current[0]['meta']['date'][:10]}/"
        f"{current[1]['meta']['finished'][8:10]}), runs 15 and 16 at {current[2]['meta']['commit']} "
        f"({common([r['meta']['date'][:10] for r in current[2:]])})",
    ]


@facts(PAGE)
def protocol() -> list[str]:
    """The protocol and host (the runs' `meta`), the counts of runs and the targets' thresholds."""
    every = list(runs((*CURRENT_RUNS, *DECODE_RUNS)).values())
    meta = [r["meta"] for r in every]
    shape = json.loads(common([json.dumps(m["shape"], sort_keys=True) for m in meta]))
    machine = common([", ".join(m["machine"].split(", ")[:2]) for m in meta]).split(", ")
    every_met = all(p["met"] for t in targets.TARGETS if (p := pooled(t)["pooled"]) is not None)
    compiled = [ratio(run(name)["compile"], "sas_p", "pre_ln")["median"] for name in CURRENT_RUNS]
    threshold = SAS_P_TRAIN.fraction * run(CURRENT_RUNS[0])["train"]["sas_p"]["flop_bound_vs_pre_ln"]
    decode = {m: pooled(target(f"generate batch 1: {m}"))["pooled"]["ratio"] for m in ("sas_p", "pre_ln")}
    byte_bound = run(CURRENT_RUNS[0])["generate"]["batch_1"]["sas_p"]["weight_bound_vs_gpt2"]
    trained = [
        c["ratio_median"] for k, c in run("attention_interface_before_after")["cases"].items() if k.startswith("train")
    ]
    return [
        f"in runs {run_numbers(CURRENT_RUNS)}, "
        + (
            "not above the threshold in every run either"
            if min(compiled) < threshold
            else "above the threshold in every run"
        ),
        "sas_p stays "
        + ("below" if decode["sas_p"] / decode["pre_ln"] < byte_bound else "NOT below")
        + f" its {num(byte_bound)} bound over pre_ln at batch 1 (pooled medians {num(decode['sas_p'])} and "
        f"{num(decode['pre_ln'])} over GPT-2)",
        f"its speed, training {span(trained, 2)}×;",
        f"{shape['layers']} blocks, d = {shape['width']}, {shape['heads']} heads, MLP 3072, sequence "
        f"{shape['seq']}, with GPT-2's vocab {shape['vocab']} (the paper's vocab is 50000) and batch "
        f"{shape['batch']}, float32",
        f"The host: {machine[1].split()[0]} cores shared with other tenants, {machine[0]}, torch "
        f"{common([m['torch'] for m in meta])}, transformers {common([m['transformers'] for m in meta])}, "
        f"{common([m['torch_threads'] for m in meta])} threads",
        f"Runs {run_numbers(CURRENT_RUNS)}, {COUNTS[len(CURRENT_RUNS)]} full runs of the current model code",
        f"Runs {run_numbers(CURRENT_RUNS)} (full), and {COUNTS[len(DECODE_RUNS)]} runs of `make bench",
        f"Every counted target {'is met' if every_met else 'is NOT met'} by the pooled median of "
        f"{COUNTS[len(CURRENT_RUNS)]} full runs ({COUNTS[len(every)]} for decoding and scoring)",
    ]


#: the run whose profiles and `mfu` section the page reads for what limits the ratios
PROFILE_RUN = "run12"


@facts(PAGE)
def words() -> list[str]:
    """The runs the prose names (commands, pools, hosts) and its words: fractions of a step, which way the anchors'
    ratios moved, where the runs stand against the bounds and the thresholds."""
    current = list(runs(CURRENT_RUNS).values())
    shares = [r["mfu"][m]["gemm_time_share"] for r in current for m in ("gpt2", "pre_ln", "sas_p")]
    here = {t: by_run(t) for t in (GPT2_TRAIN, LLAMA_TRAIN)}
    there = {t: by_run(t, FAST_HOST_RUNS) for t in (GPT2_TRAIN, LLAMA_TRAIN)}
    less = "less" if all(max(here[t]) < min(there[t]) for t in here) else "NOT less"
    fast_peak = targets.FAST_HOST_GFLOPS
    none = "none" if max(peaks(CURRENT_RUNS)) < fast_peak else "NOT none"
    faster = "faster" if min(peaks(FAST_HOST_RUNS)) > max(peaks(CURRENT_RUNS)) else "NOT faster"
    threshold = SAS_P_TRAIN.fraction * current[0]["train"]["sas_p"]["flop_bound_vs_pre_ln"]
    alone = any(x < 1.0 for x in by_run(LLAMA_TRAIN)) or any(x < threshold for x in by_run(SAS_P_TRAIN))
    decode = {m: pooled(target(f"generate batch 1: {m}"))["pooled"]["ratio"] for m in ("sas_p", "pre_ln")}
    byte_bound = current[0]["generate"]["batch_1"]["sas_p"]["weight_bound_vs_gpt2"]
    above = "Above" if decode["pre_ln"] > 1 and decode["sas_p"] > byte_bound else "NOT above"

    def other_work(name: str) -> str:
        row = run(name)["mfu"]["pre_ln"]
        return about_fraction(1 - row["gemm_time_alone_s"] / row["step_median_s"])

    (overlapped,) = [
        n for n, r in zip(CURRENT_RUNS, current) if max(r["meta"]["load_average_at_end"]) > r["meta"]["torch_threads"]
    ]
    files = " ".join(f"docs/benchmark/{n}.json" for n in (*CURRENT_RUNS, *DECODE_RUNS))
    return [
        f'`make bench BENCH_ARGS="--json docs/benchmark/{CURRENT_RUNS[0]}.json"` (and '
        + ", ".join(f"`{n}`" for n in CURRENT_RUNS[1:])
        + ";",
        f'`make bench BENCH_ARGS="--sections generate,score --json docs/benchmark/{DECODE_RUNS[0]}.json"` (and '
        + ", ".join(f"`{n}`" for n in DECODE_RUNS[1:])
        + ")",
        f"`python -m benchmarks.targets {files}` (the runs of the current model code) pools every round's ratio of "
        "every run into one median",
        f"{run_label(overlapped).capitalize()}'s `train` section overlapped a low-priority",
        f"runs {run_numbers(FAST_HOST_RUNS)} timed the same training arithmetic and give sas_p / pre_ln",
        f"on these hosts about {about_fraction(statistics.median(shares), 0.05)} of a step is matmul at the peak rate, "
        f"so what our blocks save outside the GEMMs moves the anchors' ratios {less} than on runs "
        f"{run_numbers(FAST_HOST_RUNS)}'s host",
        f"ranges over runs {run_numbers(CURRENT_RUNS)}",
        f"and {none} of these runs had one",
        f"Runs {run_numbers(FAST_HOST_RUNS)} (earlier code, the {faster} host)",
        f"{'Not every' if alone else 'Every'} run meets each alone",
        f"{above} the bound at batch 1: the bound assumes both models read their weights equally fast, and they do not",
        f"on run 14's host ({other_work('run14')} of it other work)",
        f"on {run_label(PROFILE_RUN)}'s ({other_work(PROFILE_RUN)})",
        f"In {run_label(PROFILE_RUN)}'s profiles (`{PROFILE_RUN}.md`, self CPU time of one step)",
        f"pre_ln {num(run(PROFILE_RUN)['mfu']['pre_ln']['step_median_s'] - run(PROFILE_RUN)['mfu']['pre_ln']['gemm_time_alone_s'], 2)} s "
        f"({PROFILE_RUN}.json, `mfu`)",
        f"GB/s (`{GEMV}.md`)",
    ]
