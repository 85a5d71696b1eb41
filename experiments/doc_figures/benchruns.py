"""The `make bench` runs the pages cite, and the figures several pages derive from them (ratios, pooled targets,
host peaks): shared, so that no page's module needs another's."""

from __future__ import annotations

import statistics
from typing import Any

from benchmarks import targets
from benchmarks.common import per_round

from .data import run
from .text import num

#: the full `make bench` runs of the current model code, and its two `generate` / `score` runs
CURRENT_RUNS = ("run13", "run14", "run15", "run16")
DECODE_RUNS = ("decode1", "decode2")
#: full runs of earlier code on a host with a 430 GFLOP/s GEMM peak: the evidence that the anchors' ratios depend on it
FAST_HOST_RUNS = ("run9", "run10", "run11", "run12")
#: the `--dtype bf16` runs (the bf16 targets, `python -m benchmarks.targets --dtype bf16`)
BF16_RUNS = ("bf16run1",)
#: the current code's `--dtype bf16` runs, pooled by the bf16 targets table (all on hosts whose bf16 GEMM peak is below
#: the float32 one): the `precision` section alone, the other sections, two full runs, then the compiled decoding
#: and `precision` sections of the current recipe, and the `mfu` section
BF16_CURRENT_RUNS = ("bf16precision1", "bf16run2", "bf16run3", "bf16run4", "bf16decode1", "bf16run5")
#: current runs whose compiled-decoding rows timed an earlier recipe (before `one_row_16bit`, or before the recipe's
#: `realize_opcount_threshold`): left out of the compiled-decoding targets' pool
BF16_EARLIER_RECIPE = ("bf16precision1", "bf16run3", "bf16run4")
#: the runs the bf16 targets table shows: bf16run1 (earlier code, a host whose bf16 GEMMs are the faster) and the
#: current ones
BF16_TARGET_RUNS = ("bf16run1", *BF16_CURRENT_RUNS)


def current_recipe_runs() -> tuple[str, ...]:
    """The current code's bf16 runs that timed the current compiled decoding recipe."""
    return tuple(n for n in BF16_CURRENT_RUNS if n not in BF16_EARLIER_RECIPE and "generate_compiled" in run(n))


def runs(names: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """The named runs, by name."""
    return {name: run(name) for name in names}


def ratio(section: dict[str, Any], model: str, base: str) -> dict[str, float]:
    """`model`'s speed over `base` in one section of a run: the median of the per-round ratios, their range, the
    ratio of the minimum times. In `train` and `compile` each group of models takes turns with a pre_ln of its own
    and the run keeps only the first group's pre_ln times: against pre_ln, a model's stored `vs_pre_ln` is used."""
    if base == "pre_ln" and "vs_pre_ln" in section[model]:
        stored = section[model]["vs_pre_ln"]
        return {k: stored[f"ratio_{k}"] for k in ("median", "low", "high", "of_min")}
    rounds = per_round(section[base], section[model])
    return {
        "median": statistics.median(rounds),
        "low": min(rounds),
        "high": max(rounds),
        "of_min": section[base]["min_s"] / section[model]["min_s"],
    }


def ratio_cell(r: dict[str, float], of_min: bool = True) -> str:
    """A ratio as the tables print it: median (low–high; ratio of the minimum times)."""
    inner = f"{num(r['low'])}–{num(r['high'])}" + (f"; {num(r['of_min'])}" if of_min else "")
    return f"{num(r['median'])} ({inner})"


def target(label: str, among: tuple[targets.Target, ...] = targets.TARGETS) -> targets.Target:
    """The target of `among` (`benchmarks.targets`' float32 targets by default) whose label starts with `label`."""
    (found,) = [t for t in among if t.label.startswith(label)]
    return found


SAS_P_TRAIN, SAS_TRAIN = target("training: sas_p /"), target("training: sas /")
GPT2_TRAIN, LLAMA_TRAIN = target("training: our pre_ln /"), target("training: `pre_ln_llama`")


def pooled(t: targets.Target) -> dict[str, Any]:
    """`benchmarks.targets`' figures for `t` over the current runs (those that hold its rows)."""
    return targets.evaluate(t, runs((*CURRENT_RUNS, *DECODE_RUNS)))


def by_run(t: targets.Target, names: tuple[str, ...] = CURRENT_RUNS) -> list[float]:
    """A target's per-run medians over `names` (excluded runs included)."""
    result = targets.evaluate(t, runs(names))
    return [cell["ratio"] for cell in result["runs"].values() if cell is not None]


def peaks(names: tuple[str, ...]) -> list[float]:
    return [targets.peak_gflops(run(name)) for name in names]


def bf16_pooled(t: targets.Target) -> dict:
    """`t` over the current code's bf16 runs (without those that timed an earlier decoding recipe, for a
    compiled-decoding target)."""
    compiled_decoding = "generate" in t.label and "compiled" in t.label
    names = tuple(n for n in BF16_CURRENT_RUNS if not (compiled_decoding and n in BF16_EARLIER_RECIPE))
    return targets.evaluate(t, runs(names))


def fused_saving() -> list[float]:
    """The fused LM head + loss's saving of a training step's peak memory against the logits path, %, per current
    run and model (pre_ln, sas_p)."""
    return [
        100 * (1 - row["fused"]["peak_MiB"] / row["logits"]["peak_MiB"])
        for m in ("pre_ln", "sas_p")
        for row in (run(name)["loss"][m] for name in CURRENT_RUNS)
    ]


def kv_cache_kib() -> set[float]:
    """The KV cache's KiB per token of every block type in the current runs."""
    return {r["kv_cache"][m]["bytes_per_token"] / 1024 for r in runs(CURRENT_RUNS).values() for m in r["kv_cache"]}


def run_names(names: list[str]) -> str:
    """Committed runs as the prose lists them, a series of consecutive runs as a span: `bf16precision1`,
    `bf16run2`–`bf16run4`, `bf16decode1`."""
    groups: list[list[str]] = []
    for name in names:
        stem, number = name.rstrip("0123456789"), name[len(name.rstrip("0123456789")) :]
        last = groups[-1][-1] if groups else ""
        last_stem = last.rstrip("0123456789")
        if groups and stem == last_stem and number and int(number) == int(last[len(last_stem) :]) + 1:
            groups[-1].append(name)
        else:
            groups.append([name])
    parts = [f"`{g[0]}`" if len(g) < 3 else f"`{g[0]}`–`{g[-1]}`" for g in groups]
    parts = [p for g, part in zip(groups, parts) for p in ([part] if len(g) != 2 else [f"`{g[0]}`", f"`{g[1]}`"])]
    return ", ".join(parts[:-1]) + f" and {parts[-1]}" if len(parts) > 1 else parts[0]


def bf16_pools() -> str:
    """Which of the current code's bf16 runs each bf16 target pools (the runs that time its rows), and how their
    hosts' bf16 GEMM peaks compare with their float32 ones."""
    pools = {t.label: [n for n, c in bf16_pooled(t)["runs"].items() if c is not None] for t in targets.BF16_TARGETS}
    compiled = {n for label, names in pools.items() if "generate" in label and "compiled" in label for n in names}
    other = {n for label, names in pools.items() if not ("generate" in label and "compiled" in label) for n in names}
    mfu = [n for n, r in runs(BF16_CURRENT_RUNS).items() if "mfu" in r and not targets.mfu_excluded(r)]
    order = list(BF16_CURRENT_RUNS)
    slower = {run(n)["meta"]["gemm_peak_gflops"]["bf16"] < run(n)["meta"]["gemm_peak_gflops"]["float32"] for n in order}
    # the prose states one comparison for all of them; hosts that differ render words the page lacks
    words = "NOT alike" if len(slower) != 1 else ("slower" if slower.pop() else "faster")
    return (
        f"{run_names(sorted(other, key=order.index))}; compiled decoding from "
        f"{run_names(sorted(compiled, key=order.index))}{' alone' if len(compiled) == 1 else ''}, MFU from "
        f"{run_names(mfu)}; all on hosts whose bf16 GEMMs are {words} than their float32 ones"
    )
