"""The performance targets counted over committed `make bench` runs: one row per target, each run's figure (the
median of its per-round ratios, with their range; ✓ where it alone meets the target) and the pooled figure, the
median of every round's ratio of every run, beside the bound the target is a fraction of. The README's Speed table and
docs/speed.md's targets table are its figures over runs 13–16 and decode1/2 (`python -m experiments.doc_figures`).

    python -m benchmarks.targets docs/benchmark/run13.json docs/benchmark/run14.json docs/benchmark/run15.json

Targets: training (`train`) at ≥ 0.96 of the matmul-FLOP bound for sas_p and sas over pre_ln; our pre_ln ≥ 1.3×
`GPT2LMHeadModel` on a host whose GEMM peak (`mfu`) is ≥ 400 GFLOP/s (on a slower host the figure is reported
beside its peak, not counted); `pre_ln_llama` ≥ 1.0× `LlamaForCausalLM`; greedy decoding (`generate`) sas_p ≥ 1.10×
and pre_ln ≥ 1.0× GPT-2's tokens/s at batch 1 and 8 (beside the weight-bytes bound); scoring (`score`) sas and
sas_p ≥ 0.95 of their forward FLOP bound over pre_ln.

`--dtype bf16` counts the bf16 targets over `--dtype bf16` runs (`BF16_TARGETS`, and bf16 MFU ≥ 60%), relative to the
host's own GEMM peaks (both recorded in every run's meta), on every host with bf16 units (`BF16_UNIT_FLAGS`).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from benchmarks.common import per_round

#: the GEMM peak (GFLOP/s) from which our pre_ln / GPT-2 training target counts
FAST_HOST_GFLOPS = 400.0


@dataclass(frozen=True)
class Target:
    """`rows(run)` gives the (model, base) result rows of a run, or None where the run lacks them; `bound(run)` the
    bound the ratio is compared with; met when the ratio ≥ `fraction` × bound."""

    label: str
    rows: Callable[[dict], tuple[dict, dict] | None]
    bound: Callable[[dict], float]
    fraction: float
    #: runs whose figure does not count (e.g. a slow host), with why
    excluded: Callable[[dict], str | None] = lambda run: None


def _rows(*path: str, model: str, base: str) -> Callable[[dict], tuple[dict, dict] | None]:
    """The (model, base) result rows a run holds under `path` (e.g. "train", or "generate", "batch_1")."""

    def rows(run: dict) -> tuple[dict, dict] | None:
        group = run
        for key in path:
            group = group.get(key, {})
        return (group[model], group[base]) if model in group and base in group else None

    return rows


def peak_gflops(run: dict) -> float | None:
    """The run's measured GEMM peak (`mfu`), None where it has none (older runs measured it differently)."""
    return next((row["peak_gflops"] for row in run.get("mfu", {}).values() if "peak_gflops" in row), None)


def _slow_host(run: dict) -> str | None:
    peak = peak_gflops(run)
    if peak is None:
        return "no GEMM peak measured"
    return None if peak >= FAST_HOST_GFLOPS else f"host peak {peak:.0f} GFLOP/s < {FAST_HOST_GFLOPS:.0f}"


TARGETS = (
    Target(
        "training: sas_p / pre_ln ≥ 0.96 × FLOP bound",
        _rows("train", model="sas_p", base="pre_ln"),
        lambda run: run["train"]["sas_p"]["flop_bound_vs_pre_ln"],
        0.96,
    ),
    Target(
        "training: sas / pre_ln ≥ 0.96 × FLOP bound",
        _rows("train", model="sas", base="pre_ln"),
        lambda run: run["train"]["sas"]["flop_bound_vs_pre_ln"],
        0.96,
    ),
    Target(
        f"training: our pre_ln / `GPT2LMHeadModel` ≥ 1.3 (hosts ≥ {FAST_HOST_GFLOPS:.0f} GFLOP/s)",
        _rows("train", model="pre_ln", base="gpt2"),
        lambda run: 1.3,
        1.0,
        _slow_host,
    ),
    Target(
        "training: `pre_ln_llama` / `LlamaForCausalLM` ≥ 1.0",
        _rows("train", model="pre_ln_llama", base="llama"),
        lambda run: 1.0,
        1.0,
    ),
    *(
        Target(
            f"generate batch {batch}: {model} / GPT-2 ≥ {at_least:.2f} (weight-bytes bound beside)",
            _rows("generate", f"batch_{batch}", model=model, base="gpt2"),
            lambda run, at_least=at_least: at_least,
            1.0,
        )
        for batch in (1, 8)
        for model, at_least in (("sas_p", 1.10), ("pre_ln", 1.0))
    ),
    *(
        Target(
            f"scoring {shape}: {model} / pre_ln ≥ 0.95 × FLOP bound",
            _rows("score", shape, model=model, base="pre_ln"),
            lambda run, shape=shape, model=model: run["score"][shape][model]["flop_bound_vs_pre_ln"],
            0.95,
        )
        for shape in ("8x128", "1x1024")
        for model in ("sas", "sas_p")
    ),
)


#: CPU flags of native bf16 dot products: a host with one of them has bf16 units (one without emulates bf16 slowly:
#: its figures are reported, not counted)
BF16_UNIT_FLAGS = ("avx512_bf16", "amx_bf16")
#: the bf16 training step's speed-up over float32 is counted against this share of the host's bf16 / float32
#: GEMM-peak ratio (both peaks measured in every run: the goal holds on any host with bf16 units)
BF16_STEP_SHARE = 0.85
#: bf16 MFU (`mfu` of a `--dtype bf16` run) counted against this share of the host's bf16 GEMM peak
BF16_MFU = 0.60
#: bf16 decoding at batch 1 against float32 (eager, and each by the compiled recipe of docs/inference.md), beside the
#: weight-bytes bound 2
BF16_DECODE = 1.6
#: torchao int8 weight-only decoding at batch 1 against float32 (the `quantization` section, weight-bytes bound about
#: 4), a goal on a host where float32 decoding is bandwidth-bound
INT8_DECODE = 1.8
#: float32 batch-1 decoding is bandwidth-bound where it reads its weights at this share of the host's memory rate or more
BANDWIDTH_BOUND_SHARE = 0.7


def bf16_peak_ratio(run: dict) -> float | None:
    peaks = run.get("meta", {}).get("gemm_peak_gflops")
    return peaks["bf16"] / peaks["float32"] if peaks else None


def _no_bf16_units(run: dict) -> str | None:
    meta = run.get("meta", {})
    if meta.get("dtype") != "bf16":
        return "not a --dtype bf16 run"
    if meta.get("device", "cpu") != "cpu":
        return None
    if not set(meta.get("cpu_flags", ())) & set(BF16_UNIT_FLAGS):
        return f"no bf16 units (none of {', '.join(BF16_UNIT_FLAGS)})"
    return None


def _precision_rows(kind: str, model: str) -> Callable[[dict], tuple[dict, dict] | None]:
    """A `precision` section's (bf16, float32) rows of `model`: bf16's speed-up over float32 per round."""

    def rows(run: dict) -> tuple[dict, dict] | None:
        row = run.get("precision", {}).get(kind, {}).get(model)
        return (row["bf16"], row["float32"]) if row else None

    return rows


#: the bf16 targets of a `--dtype bf16` run (`python -m benchmarks.targets --dtype bf16 RUN ...`), relative to the
#: host's own peaks and counted on every host with bf16 units; bf16 MFU is `bf16_mfu`'s, not a ratio of times
BF16_TARGETS = (
    *(
        Target(
            f"bf16 training step: {m} bf16 / float32 ≥ {BF16_STEP_SHARE} × the host's bf16 / float32 GEMM-peak ratio",
            _precision_rows("train", m),
            lambda run: run["precision"]["peak_ratio"],
            BF16_STEP_SHARE,
            _no_bf16_units,
        )
        for m in ("pre_ln", "sas_p")
    ),
    *(
        Target(
            f"bf16 training{label}: {m} / pre_ln ≥ 0.96 × FLOP bound",
            _rows(section, model=m, base="pre_ln"),
            lambda run, m=m, section=section: run[section][m]["flop_bound_vs_pre_ln"],
            0.96,
            _no_bf16_units,
        )
        for section, label in (("train", ""), ("compile", ", compiled"))
        for m in ("sas_p", "sas")
    ),
    Target(
        "bf16 training: our pre_ln / `GPT2LMHeadModel` ≥ 1.0",
        _rows("train", model="pre_ln", base="gpt2"),
        lambda run: 1.0,
        1.0,
        _no_bf16_units,
    ),
    Target(
        "bf16 training: `pre_ln_llama` / `LlamaForCausalLM` ≥ 1.0",
        _rows("train", model="pre_ln_llama", base="llama"),
        lambda run: 1.0,
        1.0,
        _no_bf16_units,
    ),
    *(
        Target(
            f"bf16 generate batch 1{label}: {m} bf16 / float32 weights ≥ {BF16_DECODE} (weight-bytes bound 2)",
            _precision_rows(kind, m),
            lambda run: BF16_DECODE,
            1.0,
            _no_bf16_units,
        )
        for kind, label in (("generate_batch_1", ", eager"), ("generate_batch_1_compiled", ", compiled"))
        for m in ("pre_ln", "sas_p")
    ),
    *(
        Target(
            f"bf16 generate batch {batch}{label}: sas_p / GPT-2 ≥ 1.10 (weight-bytes bound beside)",
            _rows(section, f"batch_{batch}", model="sas_p", base="gpt2"),
            lambda run: 1.10,
            1.0,
            _no_bf16_units,
        )
        for section, label in (("generate", ""), ("generate_compiled", ", compiled"))
        for batch in (1, 8)
    ),
)


def bf16_mfu(run: dict) -> dict[str, float]:
    """Each model's MFU in a `--dtype bf16` run (its `mfu` section: against the best bf16 GEMM of its steps)."""
    return {name: row["mfu"] for name, row in run.get("mfu", {}).items()}


def mfu_excluded(run: dict) -> str | None:
    """Why a run's bf16 MFU does not count: no bf16 units, or a peak that is not a bf16 GEMM's (runs before the
    `mfu` section took the peak in the run's precision only: on a host whose float32 GEMMs are the faster, a float32
    GEMM of the step set it)."""
    excluded = _no_bf16_units(run)
    if excluded is None and "mfu" in run:
        peak = next(iter(run["mfu"].values()))["peak_gemm"]
        if not peak.endswith("bfloat16"):
            return f"its peak is a float32 GEMM's ({peak})"
    return excluded


def pooled_bf16_mfu(runs: dict[str, dict]) -> dict[str, dict]:
    """Per model, the median bf16 MFU over the runs that count (`mfu_excluded`), its range and whether it meets
    `BF16_MFU`."""
    values: dict[str, list[float]] = {}
    for run in runs.values():
        if mfu_excluded(run) is None:
            for name, mfu in bf16_mfu(run).items():
                values.setdefault(name, []).append(mfu)
    return {
        name: {
            "median": statistics.median(v),
            "low": min(v),
            "high": max(v),
            "runs": len(v),
            "met": statistics.median(v) >= BF16_MFU,
        }
        for name, v in values.items()
    }


def evaluate(target: Target, runs: dict[str, dict]) -> dict:
    """Per run: its median per-round ratio, range, bound, and whether it counts; pooled over the counted runs: the
    median of all their per-round ratios, their range, the mean bound, and the median of every round's ratio over its
    own run's bound (the share of the bound: hosts with other peaks pool fairly), met when that share reaches the
    target's fraction."""
    cells, pooled, bounds, shares = {}, [], [], []
    for name, run in runs.items():
        rows = target.rows(run)
        if rows is None:
            cells[name] = None
            continue
        ratios = per_round(rows[1], rows[0])
        median, bound, excluded = statistics.median(ratios), target.bound(run), target.excluded(run)
        cells[name] = {
            "ratio": median,
            "low": min(ratios),
            "high": max(ratios),
            "bound": bound,
            "weight_bound": rows[0].get("weight_bound_vs_gpt2"),  # generate rows: shown beside the ratio
            "excluded": excluded,
            "met": median >= target.fraction * bound,
        }
        if excluded is None:
            pooled += ratios
            bounds.append(bound)
            shares += [r / bound for r in ratios]  # each round against its own host's bound
    if not pooled:
        return {"runs": cells, "pooled": None}
    bound = statistics.fmean(bounds)
    median = statistics.median(pooled)
    return {
        "runs": cells,
        "pooled": {
            "ratio": median,
            "low": min(pooled),
            "high": max(pooled),
            "rounds": len(pooled),
            "bound": bound,
            "share_of_bound": statistics.median(shares),
            "met": statistics.median(shares) >= target.fraction,
        },
    }


def _cell(cell: dict | None) -> str:
    if cell is None:
        return "-"
    text = f"{cell['ratio']:.3f} ({cell['low']:.3f}-{cell['high']:.3f}){' ✓' if cell['met'] else ''}"
    if cell.get("weight_bound"):
        text += f", bytes bound {cell['weight_bound']:.3f}"
    if cell.get("excluded"):
        text += f" [not counted: {cell['excluded']}]"
    return text


def table(runs: dict[str, dict], bf16: bool = False) -> str:
    names = list(runs)
    peaks = ", ".join(f"{n} {peak_gflops(r):.0f}" if peak_gflops(r) else f"{n} -" for n, r in runs.items())
    lines = [f"GEMM peak per run (GFLOP/s): {peaks}."]
    if bf16:
        lines += [
            "GEMM peaks per run, float32 / bf16 (GFLOP/s, `PEAK_GEMM`): "
            + ", ".join(
                f"{n} {r['meta']['gemm_peak_gflops']['float32']:.0f} / {r['meta']['gemm_peak_gflops']['bf16']:.0f}"
                for n, r in runs.items()
            )
            + ".",
            f"bf16 MFU per run (target ≥ {BF16_MFU:.0%}): "
            + "; ".join(
                f"{n} "
                + ", ".join(f"{m} {v:.1%}" for m, v in bf16_mfu(r).items())
                + (f" [not counted: {mfu_excluded(r)}]" if mfu_excluded(r) and "mfu" in r else "")
                for n, r in runs.items()
            )
            + ". Pooled (median of the counted runs, range): "
            + (
                ", ".join(
                    f"{m} {p['median']:.1%} ({p['low']:.1%}-{p['high']:.1%}; {p['runs']} runs) "
                    + ("met" if p["met"] else "NOT met")
                    for m, p in pooled_bf16_mfu(runs).items()
                )
                or "no run counts"
            )
            + ".",
        ]
    lines += [
        "",
        "| target | "
        + " | ".join(f"{n}: median (per-round range)" for n in names)
        + " | pooled: median (range; rounds) | bound | pooled / bound | met (pooled) |",
        "|---" * (len(names) + 5) + "|",
    ]
    for target in BF16_TARGETS if bf16 else TARGETS:
        result = evaluate(target, runs)
        cells = " | ".join(_cell(result["runs"][n]) for n in names)
        p = result["pooled"]
        if p is None:
            lines.append(f"| {target.label} | {cells} | - | - | - | not counted |")
            continue
        lines.append(
            f"| {target.label} | {cells} | {p['ratio']:.3f} ({p['low']:.3f}-{p['high']:.3f}; {p['rounds']}) | "
            f"{p['bound']:.3f} | {p['share_of_bound']:.3f} | {'yes' if p['met'] else 'NO'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.targets", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", help="benchmark JSON files of full `make bench` runs")
    parser.add_argument(
        "--dtype", choices=("float32", "bf16"), default="float32", help="which targets (default float32)"
    )
    args = parser.parse_args(argv)
    runs = {}
    for path in args.runs:
        with open(path) as handle:
            runs[path.rsplit("/", 1)[-1].removesuffix(".json")] = json.load(handle)
    print(table(runs, bf16=args.dtype == "bf16"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
