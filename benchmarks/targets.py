"""The performance targets counted over committed `make bench` runs (their `train` and `loss` sections): one row
per target, each run's figure with its spread, and in how many runs it was met. The README's and docs/speed.md's
Speed tables are its output.

    python -m benchmarks.targets docs/benchmark/run2.json docs/benchmark/run3.json
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

#: peak memory growth of a training step before the fused head + loss (`docs/benchmark/loss.json`, logits path)
MEMORY_BEFORE = "docs/benchmark/loss.json"


@dataclass(frozen=True)
class RatioTarget:
    label: str
    model: str
    base: str
    at_least: float
    by_min_too: bool  # met only when the ratio of minimum times reaches it too

    def figure(self, run: dict) -> tuple[str, bool]:
        r = run["train"][self.model][f"vs_{self.base}"]
        met = r["ratio_median"] >= self.at_least and (not self.by_min_too or r["ratio_of_min"] >= self.at_least)
        text = f"{r['ratio_median']:.3f} ({r['ratio_low']:.3f}-{r['ratio_high']:.3f}; of mins {r['ratio_of_min']:.3f})"
        return text, met


TARGETS = (
    RatioTarget("our pre_ln / `GPT2LMHeadModel` ≥ 1.4 (eager, median)", "pre_ln", "gpt2", 1.4, False),
    RatioTarget("sas_p / pre_ln ≥ 1.13, median and ratio of mins", "sas_p", "pre_ln", 1.13, True),
    RatioTarget("sas / pre_ln ≥ 1.10, median and ratio of mins", "sas", "pre_ln", 1.10, True),
    RatioTarget("`pre_ln_llama` / `LlamaForCausalLM` ≥ 1.0 (median)", "pre_ln_llama", "llama", 1.0, False),
)


def memory_figure(run: dict, before: dict) -> tuple[str, bool]:
    cells, met = [], True
    for name in ("pre_ln", "sas_p"):
        old, new = before["loss"][name]["logits"]["peak_MiB"], run["loss"][name]["fused"]["peak_MiB"]
        cells.append(f"{name} {new:.0f} MiB ({new / old - 1:+.0%} vs {old:.0f})")
        met &= new <= 0.75 * old
    return ", ".join(cells), met


def table(runs: dict[str, dict], before: dict) -> str:
    names = list(runs)
    lines = [
        "| target | " + " | ".join(f"{n}: median (per-round range; of mins)" for n in names) + " | met in |",
        "|---" * (len(names) + 2) + "|",
    ]
    rows = [(t.label, lambda run, t=t: t.figure(run)) for t in TARGETS]
    rows.append(
        (
            "peak training-step memory at vocab 50257 ≥ 25% below the logits path's",
            lambda run: memory_figure(run, before),
        )
    )
    for label, figure in rows:
        cells = [figure(runs[n]) for n in names]
        met = sum(m for _, m in cells)
        lines.append(f"| {label} | " + " | ".join(c for c, _ in cells) + f" | {met} of {len(names)} runs |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.targets", description=__doc__)
    parser.add_argument("runs", nargs="+", help="benchmark JSON files of full `make bench` runs")
    parser.add_argument("--memory-before", default=MEMORY_BEFORE, help=f"(default: {MEMORY_BEFORE})")
    args = parser.parse_args(argv)
    runs = {}
    for path in args.runs:
        with open(path) as handle:
            runs[path.rsplit("/", 1)[-1].removesuffix(".json")] = json.load(handle)
    with open(args.memory_before) as handle:
        before = json.load(handle)
    print(table(runs, before))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
