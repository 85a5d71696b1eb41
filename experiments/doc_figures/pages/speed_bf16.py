"""docs/speed.md's bf16 results: the bf16 targets over the `--dtype bf16` runs, the runs' commands and hosts, and
what limits them."""

from __future__ import annotations

from benchmarks import targets
from benchmarks.common import DTYPES

from ..benchruns import (
    BF16_CURRENT_RUNS,
    BF16_EARLIER_RECIPE,
    BF16_RUNS,
    BF16_TARGET_RUNS,
    bf16_pooled,
    current_recipe_runs,
    ratio,
    ratio_cell,
    runs,
    target,
)
from ..data import run
from ..registry import block, facts, table
from ..text import COUNTS, common, num, run_label, span

PAGE = "docs/speed.md"
#: the bf16 one-row product's run (`python -m benchmarks.gemv --dtype bf16`)
GEMV_BF16 = "gemv_bf16"


@block("speed-bf16")
def bf16_table() -> str:
    """The bf16 targets over the `--dtype bf16` runs (`benchmarks.targets.BF16_TARGETS`): each run's median and
    range, and the current code's runs pooled (each round against its own host's bound)."""
    shown = runs(BF16_TARGET_RUNS)
    rows = []
    for t in targets.BF16_TARGETS:
        result = targets.evaluate(t, shown)
        cells = []
        for cell in result["runs"].values():
            text = "-" if cell is None else f"{num(cell['ratio'])} ({num(cell['low'])}–{num(cell['high'])})"
            cells.append(text + (" ✓" if cell and cell["met"] else ""))
        p = bf16_pooled(t)["pooled"]
        if p is None:
            pooled_cells = ["-", "-", "not measured"]
        else:
            figure = f"{num(p['ratio'])} ({num(p['low'])}–{num(p['high'])}; {p['rounds']})"
            pooled_cells = [figure, num(p["share_of_bound"]), "yes" if p["met"] else "NO"]
        rows.append([t.label, *cells, *pooled_cells])
    mfu = [", ".join(f"{m} {num(100 * v, 1)}%" for m, v in targets.bf16_mfu(r).items()) or "-" for r in shown.values()]
    mfu = [
        cell + (" (peak a float32 GEMM's: not counted)" if targets.mfu_excluded(r) and "mfu" in r else "")
        for cell, r in zip(mfu, shown.values())
    ]
    pooled_mfu = targets.pooled_bf16_mfu(runs(BF16_CURRENT_RUNS))
    models = [m for m in pooled_mfu if m != "gpt2"]
    figure = ", ".join(
        f"{m} {num(100 * p['median'], 1)}% ({num(100 * p['low'], 1)}–{num(100 * p['high'], 1)}; {p['runs']} runs)"
        for m, p in pooled_mfu.items()
    )
    met = "yes" if models and all(pooled_mfu[m]["met"] for m in models) else "NO"
    label = f"bf16 MFU ≥ {targets.BF16_MFU:.0%} of the bf16 GEMM peak, pre_ln and sas_p"
    rows.append([label, *mfu, figure or "-", "-", met])
    cells = [
        ratio_cell(ratio(r["compile"], "pre_ln", "gpt2"), of_min=False) if "compile" in r else "-"
        for r in shown.values()
    ]
    rows.append(["(no target) compiled, bf16: pre_ln / GPT-2", *cells, "-", "-", "-"])
    head = ["target", *map(run_label, shown), "pooled, current code: median (range; rounds)", "pooled / bound", "met"]
    return table(head, rows)


def _gemm_speed(peaks: dict[str, float]) -> str:
    """How a host's bf16 GEMMs compare with its float32 ones, by the run's measured peaks."""
    return "slower" if peaks["bf16"] < peaks["float32"] else "faster"


@facts(PAGE)
def targets_and_runs() -> list[str]:
    """The bf16 targets' thresholds, and the bf16 runs' commands and hosts."""
    bf16_flop = common([t.fraction for t in targets.BF16_TARGETS if "FLOP bound" in t.label])
    bf16_gpt2 = common([t.bound({}) for t in targets.BF16_TARGETS if "sas_p / GPT-2" in t.label])
    precision = run("bf16precision1")["meta"]
    peaks = precision["gemm_peak_gflops"]
    flags = set(precision["cpu_flags"])
    return [
        f"the bf16 step ≥ {targets.BF16_STEP_SHARE} × the ratio of the two GEMM peaks over the float32 step "
        f"(matmul bound), bf16 MFU ≥ {targets.BF16_MFU:.0%}, sas_p and sas ≥ {bf16_flop} × their FLOP bound over "
        f"pre_ln, eager and compiled, bf16 decoding at batch 1, eager and by the compiled recipe "
        f"([inference.md](inference.md)), ≥ {targets.BF16_DECODE}× float32 weights",
        f"and sas_p ≥ {bf16_gpt2:.2f}× GPT-2 at batch 1 and batch 8",
        f"Run `bf16run1` (`{run('bf16run1')['meta']['command']}`;",
        f"Run `bf16precision1` (`{precision['command']}`;",
        f"host whose bf16 GEMM peak is {num(peaks['bf16'] / peaks['float32'], 2)} of its float32 one "
        f"({peaks['bf16']:.0f} against {peaks['float32']:.0f} GFLOP/s; "
        + ("`avx512_bf16` among its flags" if "avx512_bf16" in flags else "NO `avx512_bf16`")
        + (", no `amx_bf16`)" if "amx_bf16" not in flags else ", `amx_bf16` too)"),
        "host whose bf16 GEMM peak is "
        + ("below" if peaks["bf16"] < peaks["float32"] else "NOT below")
        + " its float32 one (the table above)",
    ]


@facts(PAGE)
def bf16run2() -> list[str]:
    """`bf16run2`: the current code's bf16 sections other than `precision`, its host's peaks and its eager training
    ratios against their bound."""
    r = run("bf16run2")
    meta = r["meta"]
    peaks = meta["gemm_peak_gflops"]
    sections = meta["command"].split("--sections ")[1].split()[0].split(",")
    train = {m: num(ratio(r["train"], m, "pre_ln")["median"]) for m in ("sas_p", "sas")}
    bound = common([num(r["train"][m]["flop_bound_vs_pre_ln"]) for m in ("sas_p", "sas")])
    return [
        f"Run `bf16run2` (`{meta['command']}`;",
        f"measured the current code's {', '.join(f'`{x}`' for x in sections[:-1])} and `{sections[-1]}` sections "
        f"on a host whose bf16 GEMM peak is {num(peaks['bf16'] / peaks['float32'], 2)} of its float32 one "
        f"({peaks['bf16']:.0f} against {peaks['float32']:.0f} GFLOP/s)",
        f"On `bf16run2`'s host sas_p / pre_ln is {train['sas_p']} in bf16 and sas / pre_ln {train['sas']} (eager; "
        f"bound {bound}), where bf16 GEMMs are {_gemm_speed(peaks)} than float32 ones; no run of the current code "
        f"comes from a host like `bf16run1`'s, where they are {_gemm_speed(run('bf16run1')['meta']['gemm_peak_gflops'])}",
    ]


@facts(PAGE)
def full_runs() -> list[str]:
    """The current code's full bf16 runs (`bf16run3`, `bf16run4`): their command and hosts."""
    names = ("bf16run3", "bf16run4")
    commands = {run(n)["meta"]["command"].replace(n, "bf16runN") for n in names}
    (command,) = commands  # one command, the run's name apart
    sections = command.split("--sections ")[1].split()[0].split(",")
    ratios = [run(n)["meta"]["gemm_peak_gflops"]["bf16"] / run(n)["meta"]["gemm_peak_gflops"]["float32"] for n in names]
    return [
        f"Runs {' and '.join(f'`{n}`' for n in names)} (`{command.replace('bf16runN', names[0])}`, and the same "
        f"for `{names[1]}`;",
        f"measured the current code's {', '.join(f'`{x}`' for x in sections[:-1])} and `{sections[-1]}` sections on "
        f"hosts whose bf16 GEMM peak is {span(ratios, 2)} of their float32 one",
    ]


@facts(PAGE)
def first_host() -> list[str]:
    """The prose of the bf16 limits on `bf16run1`'s host: the run itself, the bf16 GEMV rates and the centring
    gradient's before/after run."""
    (name,) = BF16_RUNS
    r = run(name)
    peaks = r["meta"]["gemm_peak_gflops"]
    precision = r["precision"]
    speedup = {
        k: {m: precision[k][m]["bf16_vs_float32"]["ratio_median"] for m in ("pre_ln", "sas_p")}
        for k in precision
        if k in ("train", "generate_batch_1")
    }
    mfu = r["mfu"]["pre_ln"]
    rows = run(GEMV_BF16)["rows"]
    gemv = {"bf16": [row["linear_GBps"] for row in rows], "float32": [row["float32_linear_GBps"] for row in rows]}
    sas_p = run("bf16_centring_before_after")["cases"]["train sas_p 8x128"]
    return [
        f"pre_ln's bf16 MFU is {num(100 * mfu['mfu'], 1)}% (GEMM-time share {num(100 * mfu['gemm_time_share'], 1)}%)",
        f"a step gains {num(speedup['train']['pre_ln'])}× (pre_ln) where the GEMM peaks differ "
        f"{num(peaks['bf16'] / peaks['float32'], 2)}× ({peaks['float32']:.0f} against {peaks['bf16']:.0f} GFLOP/s)",
        f"sas_p gained less in that run, {num(speedup['train']['sas_p'])}×",
        f"sas_p / pre_ln was {num(ratio(r['train'], 'sas_p', 'pre_ln')['median'])} in bf16 against its bound of "
        f"{num(r['train']['sas_p']['flop_bound_vs_pre_ln'])}",
        f"Decoding with bf16 weights gains {num(speedup['generate_batch_1']['pre_ln'])}× and "
        f"{num(speedup['generate_batch_1']['sas_p'])}× (pre_ln, sas_p; batch 1)",
        f"streams bf16 weights at {span(gemv['bf16'], 1)} GB/s where the float32 rule streams float32 ones at "
        f"{span(gemv['float32'], 1)} in the same run (`python -m benchmarks.gemv --dtype bf16`, "
        f"[`{GEMV_BF16}.md`](benchmark/{GEMV_BF16}.md))",
        f"sas_p's bf16 step is {num(sas_p['ratio_median'])}× faster against the code of that run",
    ]


@facts(PAGE)
def limits() -> list[str]:
    """The bf16 targets the current code misses: the pooled training ratios, and the compiled recipe's weight-read
    rates (GEMM weights × bytes per weight × the call's tokens/s, `bf16decode1`)."""
    pooled = {
        label: bf16_pooled(target(label, targets.BF16_TARGETS))["pooled"]
        for label in (
            "bf16 training: sas_p /",
            "bf16 training: sas /",
            "bf16 training, compiled: sas_p /",
            "bf16 training, compiled: sas /",
            "bf16 generate batch 1, compiled: pre_ln bf16",
            "bf16 generate batch 1, compiled: sas_p bf16",
        )
    }
    r = run("bf16decode1")
    rates = {}
    for m in ("pre_ln", "sas_p"):
        weights = r["generate_compiled"]["batch_1"][m]["gemm_weights"]
        tokens_per_s = r["precision"]["generate_batch_1_compiled"][m]["tokens_per_s"]
        rates[m] = {d: weights * dtype.itemsize * tokens_per_s[d] / 1e9 for d, dtype in DTYPES.items()}
    return [
        verdicts(),
        f"bf16 / float32 weights pool to {num(pooled['bf16 generate batch 1, compiled: pre_ln bf16']['ratio'])} (pre_ln) "
        f"and {num(pooled['bf16 generate batch 1, compiled: sas_p bf16']['ratio'])} (sas_p)",
        f"reads sas_p's bf16 weights at {num(rates['sas_p']['bf16'], 1)} GB/s and its float32 weights at "
        f"{num(rates['sas_p']['float32'], 1)} GB/s (pre_ln: {num(rates['pre_ln']['bf16'], 1)} and "
        f"{num(rates['pre_ln']['float32'], 1)})",
    ]


#: the bf16 targets as the limits' verdict sentence names them, in its order: (phrase, the labels' starts)
VERDICT_GROUPS = (
    ("the bf16 step against the ratio of the peaks", ("bf16 training step: pre_ln", "bf16 training step: sas_p")),
    ("MFU (against the bf16 GEMM peak)", ("MFU",)),
    ("both anchors", ("bf16 training: our pre_ln", "bf16 training: `pre_ln_llama`")),
    (
        "eager bf16 decoding against float32",
        ("bf16 generate batch 1, eager: pre_ln", "bf16 generate batch 1, eager: sas_p"),
    ),
    (
        "sas_p against GPT-2 at both batch sizes, eager and compiled",
        (
            "bf16 generate batch 1: sas_p / GPT-2",
            "bf16 generate batch 8: sas_p / GPT-2",
            "bf16 generate batch 1, compiled: sas_p / GPT-2",
            "bf16 generate batch 8, compiled: sas_p / GPT-2",
        ),
    ),
    ("eager sas_p / pre_ln", ("bf16 training: sas_p /",)),
    ("eager sas / pre_ln", ("bf16 training: sas /",)),
    ("compiled sas_p / pre_ln", ("bf16 training, compiled: sas_p /",)),
    ("compiled sas / pre_ln", ("bf16 training, compiled: sas /",)),
    (
        "compiled decoding against float32 weights",
        ("bf16 generate batch 1, compiled: pre_ln bf16", "bf16 generate batch 1, compiled: sas_p bf16"),
    ),
)


def _met(label: str) -> tuple[bool, dict | None]:
    """Whether the pooled figure of the bf16 target `label` (or the pooled MFU) meets it, and the figure."""
    if label == "MFU":
        pooled_mfu = targets.pooled_bf16_mfu(runs(BF16_CURRENT_RUNS))
        return all(p["met"] for m, p in pooled_mfu.items() if m != "gpt2"), None
    p = bf16_pooled(target(label, targets.BF16_TARGETS))["pooled"]
    return bool(p["met"]), p


def verdicts() -> str:
    """The limits' verdict sentence, rendered from the table's `met` flags: each group of targets under "Met" or
    "Missed", a single training ratio with its pooled figure and its share of the bound. A group whose targets
    differ is an error (split the group)."""
    lists: dict[bool, list[str]] = {True: [], False: []}
    for phrase, labels in VERDICT_GROUPS:
        found = [_met(label) for label in labels]
        (met,) = {m for m, _ in found}
        figure = found[0][1] if len(found) == 1 and found[0][1] and "training" in labels[0] else None
        lists[met].append(
            phrase + (f" ({num(figure['ratio'])}, {num(figure['share_of_bound'])} of the bound)" if figure else "")
        )
    return ". ".join(
        f"{word}: {'; '.join(lists[met])}" for word, met in (("Met", True), ("Missed", False)) if lists[met]
    )


@facts(PAGE)
def bf16_runs_named() -> list[str]:
    """The bf16 runs the prose names (the targets' command, the pools, the hosts) and its words on them."""
    first = run("bf16precision1")
    peaks = first["meta"]["gemm_peak_gflops"]
    train = first["precision"]["train"]["pre_ln"]["bf16_vs_float32"]["ratio_median"]
    (host,) = BF16_RUNS
    recipe = current_recipe_runs()
    pooled_runs = [n for n in BF16_TARGET_RUNS if n not in BF16_CURRENT_RUNS]
    r = run(host)
    speed = ratio(r["train"], "sas_p", "pre_ln")["median"]
    bound = r["train"]["sas_p"]["flop_bound_vs_pre_ln"]
    slower_hosts = all(
        run(n)["meta"]["gemm_peak_gflops"]["bf16"] < run(n)["meta"]["gemm_peak_gflops"]["float32"]
        for n in BF16_CURRENT_RUNS
    )

    def names(found: list[str] | tuple[str, ...]) -> str:
        found = [f"`{n}`" for n in found]
        return found[0] if len(found) == 1 else ", ".join(found[:-1]) + " and " + found[-1]

    return [
        f"so bf16 trains {'slower' if train < 1 else 'NOT slower'} there, as its peaks "
        + ("predict" if (train < 1) == (peaks["bf16"] < peaks["float32"]) else "do NOT predict"),
        "`python -m benchmarks.targets --dtype bf16 "
        + " ".join(f"docs/benchmark/{n}.json" for n in BF16_TARGET_RUNS)
        + "`",
        f"the pooled columns pool the current code's runs (all but {names(pooled_runs)})",
        f"the compiled-decoding rows pool only the runs of the current recipe ({names(recipe)}: "
        f"{COUNTS[len(recipe)]} run{'s' if len(recipe) != 1 else ''}), since {names(BF16_EARLIER_RECIPE)} timed "
        "earlier ones",
        f"**bf16 on `{host}`'s host.**",
        *(f"run `{n}` (`{run(n)['meta']['command']}`" for n in ("bf16decode1", "bf16run5")),
        f"whose forward and backward cost {'more' if speed < 1 else 'NOT more'} than its "
        f"{'fewer' if bound > 1 else 'NOT fewer'} matmul FLOPs saved",
        f"{names(recipe)} measured it on a host whose bf16 GEMM peak is "
        + (
            "below"
            if all(
                run(n)["meta"]["gemm_peak_gflops"]["bf16"] < run(n)["meta"]["gemm_peak_gflops"]["float32"]
                for n in recipe
            )
            else "NOT below"
        )
        + " its float32 one",
        f"(pooled, the table above; bf16 GEMMs {'slower' if slower_hosts else 'NOT slower'} than float32 ones there)",
    ]
