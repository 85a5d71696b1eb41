"""docs/training.md's results: bf16 fidelity (the fidelity runs' table and prose), the bf16 step's speed on a CPU,
its centring gradient and profile, the stream resume timing, the offline task's baseline and the packing runs."""

from __future__ import annotations

import json
from typing import Any

from ..benchruns import CURRENT_RUNS, runs
from ..data import glue_tiny, reproduction, run
from ..registry import block, facts, table
from ..text import COUNTS, common, lr_text, num, run_numbers, seeds_text, signed, span

PAGE = "docs/training.md"
#: the attention kernel's forward in the profiler (the backward is `..._backward`)
SDPA_FORWARD = "aten::_scaled_dot_product_flash_attention_for_cpu"
#: the fidelity runs' criteria as the table names them
CRITERIA = {"end_train_loss": "training loss, last 10%", "final_eval_loss": "eval loss, last step"}
#: the relative difference below which two per-call kernel times read as "the same"
SAME_PER_CALL = 0.02


def _fidelity() -> dict[str, Any]:
    return reproduction("bf16-fidelity")


@block("training-bf16-fidelity")
def fidelity_table() -> str:
    """Each block's final losses per seed in float32 and bf16, the paired differences and the float32 seed range."""
    result = _fidelity()
    rows = []
    for point in result["points"]:
        row = result["comparison"][f"{point['block']} @ {point['lr']:g}"]
        for criterion, c in row.items():
            rows.append(
                [
                    f"{point['block']} ({lr_text(point['lr'])})",
                    CRITERIA[criterion],
                    " / ".join(num(v, 4) for v in c["float32"]),
                    " / ".join(num(v, 4) for v in c["bf16"]),
                    " / ".join(signed(v, 4) for v in c["difference"]),
                    num(c["float32_range"], 4),
                    "yes" if c["within_float32_spread"] else "no",
                ]
            )
    head = [
        "block (lr)",
        "criterion",
        "float32, seeds 0 / 1",
        "bf16, seeds 0 / 1",
        "bf16 − float32 per seed",
        "float32 seed range",
        "bf16 within it",
    ]
    return table(head, rows)


def _largest_difference(label: str) -> float:
    return max(abs(d) for c in _fidelity()["comparison"][label].values() for d in c["difference"])


def _seed_ranges(*labels: str) -> list[float]:
    rows = _fidelity()["comparison"]
    return [c["float32_range"] for label in labels for c in rows[label].values()]


def _within(*labels: str) -> str:
    rows = _fidelity()["comparison"]
    return "both" if all(c["within_float32_spread"] for label in labels for c in rows[label].values()) else "NOT"


@facts(PAGE)
def bf16_fidelity() -> list[str]:
    """The bf16 section's fidelity figures."""
    return [
        f"pre_ln and sas_p are within it on {_within('pre_ln @ 0.004', 'sas_p @ 0.008')} criteria: bf16 moves their "
        f"final losses by at most {num(_largest_difference('pre_ln @ 0.004'), 4)} and "
        f"{num(_largest_difference('sas_p @ 0.008'), 4)}, where their float32 seeds differ by "
        f"{span(_seed_ranges('pre_ln @ 0.004', 'sas_p @ 0.008'), 4)}",
        f"at Pre-LN's lr, 4e-3, sas in bf16 is within its float32 spread ({_within('sas @ 0.004')} criteria, "
        f"differences at most {num(_largest_difference('sas @ 0.004'), 4)} against a seed range of "
        f"{span(_seed_ranges('sas @ 0.004'), 4)})",
    ]


def _against_range(difference: float, seed: int, spread: float, what: str = "") -> str:
    """A paired bf16 − float32 difference against the float32 seed range: +0.0510 in seed 0 (more than 0.0340)."""
    side = "more" if abs(difference) > spread else "less"
    return f"{signed(difference, 4)} in seed {seed} ({side} than {num(spread, 4)}{what})"


@facts(PAGE)
def bf16_fidelity_runs() -> list[str]:
    """The code each side ran, the rerun, and the one point outside float32's seed spread, per seed."""
    result = _fidelity()
    reference = reproduction("codeparrot-tiny")["environment"]["commit"][:7]
    commit, changes, _ = result["environment"]["commit"].partition("+changes")
    reruns = result["float32_vs_committed"]
    others = sorted({p["block"] for p in result["points"]} - {name.split(" seed ")[0] for name in reruns})
    steps = common([r["steps"] for fidelity_runs in result["runs"].values() for r in fidelity_runs])
    rows = result["comparison"]
    labels = [f"{point['block']} @ {point['lr']:g}" for point in result["points"]]
    (edge,) = [label for label in labels if not all(c["within_float32_spread"] for c in rows[label].values())]
    edge_block, lr = edge.split(" @ ")
    lr = lr_text(float(lr))
    train_range, eval_range = (rows[edge][c]["float32_range"] for c in ("end_train_loss", "final_eval_loss"))
    train = [
        _against_range(
            rows[edge]["end_train_loss"]["difference"][i], seed, train_range, "" if i else ", the float32 seeds' range"
        )
        for i, seed in enumerate(result["seeds"])
    ]
    evaluation = [
        _against_range(rows[edge]["final_eval_loss"]["difference"][i], seed, eval_range)
        for i, seed in enumerate(result["seeds"])
    ]
    both_ways = all(min(c["difference"]) < 0 < max(c["difference"]) for c in rows[edge].values())
    largest = max(labels, key=_largest_difference) == edge
    narrowest = all(min(labels, key=lambda x: rows[x][c]["float32_range"]) == edge for c in rows[edge])
    rerun = "; ".join(name.replace(" seed ", ", seed ") for name in reruns)
    reproduced = "reproduced" if set(reruns.values()) == {"equal"} else "did NOT reproduce"
    return [
        f"seeds {seeds_text([str(x) for x in result['seeds']])}, {steps} steps, and compares them",
        f"The float32 records were trained at commit {reference}; the bf16 runs ran at commit {commit[:7]}"
        f"{' with uncommitted changes' if changes else ''}, and {COUNTS[len(reruns)]} float32 run was trained "
        f"again there: {rerun}, which {reproduced} its committed record's every logged loss",
        f"It does not show it for {' and '.join(others)}: their float32 records were not rerun",
        f"`git log {reference}..{commit[:7]} -- modeling_simplified/`",
        f"{edge_block} at its own lr, {lr}, is not: bf16 − float32 on the training loss is {' and '.join(train)}; on "
        f"the eval loss {' and '.join(evaluation)}. The differences there go {'both ways' if both_ways else 'ONE way'}",
        f"Of the {COUNTS[len(labels)]} points, {edge_block} at {lr} has {'the' if largest else 'NOT the'} largest "
        f"bf16 − float32 differences and {'the' if narrowest else 'NOT the'} narrowest float32 seed ranges on "
        "both criteria",
    ]


@facts(PAGE)
def bf16_on_a_cpu() -> list[str]:
    """The bf16-on-a-CPU paragraph: `benchmarks/bf16_crossover.py`'s one-thread rows."""
    crossover = run("bf16_crossover")
    rows = crossover["rows"]
    narrow = [r for r in rows if r["batch"] == 8]
    ratio = {b: span([r["bf16_over_float32"] for r in narrow if r["block_type"] == b], 2) for b in ("pre_ln", "sas_p")}
    (demo,) = [r for r in rows if r["batch"] == 32]
    widths = sorted({r["hidden_size"] for r in narrow})
    slower = "every width" if all(r["bf16_over_float32"] > 1 for r in narrow) else "SOME widths"
    top = crossover["bf16_slower_up_to_hidden_size"]
    return [
        f"hidden_size {widths[0]} to {widths[-1]} on ONE thread",
        f"bf16 was slower at {slower}: its step took {ratio['pre_ln']}× float32's for pre_ln and ",
        f"{ratio['sas_p']}× for sas_p (medians",
        f"and {num(demo['bf16_over_float32'], 2)}× at the demo's shape",
        f"only above hidden_size {top} (not measured here",
        f"at hidden_size ≤ {top} prints one",
    ]


@facts(PAGE)
def bf16_centring() -> list[str]:
    """The bf16 centring gradient's figures: `benchmarks.before_after --dtype bf16`'s run."""
    cases = run("bf16_centring_before_after")["cases"]
    sas_p, pre_ln = cases["train sas_p 8x128"], cases["train pre_ln 8x128"]
    return [
        f"It made sas_p's bf16 step at the paper's shape {num(sas_p['ratio_median'])}× faster",
        f"(per-round range {num(sas_p['ratio_low'])}–{num(sas_p['ratio_high'])}) and left",
        f"pre_ln's unchanged ({num(pre_ln['ratio_median'])})",
    ]


@facts(PAGE)
def bf16_profile() -> list[str]:
    """Where a bf16 shaped step's time goes: `bf16profile1`, one profiled step per model, eager and compiled. The
    zero-query call's cost is sas_p's attention-forward time beyond pre_ln's (twice the calls)."""
    r = run("bf16profile1")
    profiles = r["profile"]
    eager = profiles["eager"]
    pre_ln, sas_p = eager["pre_ln"], eager["sas_p"]
    forward = {m: eager[m]["ops"][SDPA_FORWARD] for m in ("pre_ln", "sas_p")}
    zero_query = forward["sas_p"]["self_ms"] - forward["pre_ln"]["self_ms"]
    # ms per kernel call: the zero-query calls' (sas_p's extra ones) and pre_ln's real ones
    per_call = {
        "zero_query": zero_query / (forward["sas_p"]["calls"] - forward["pre_ln"]["calls"]),
        "real": forward["pre_ln"]["self_ms"] / forward["pre_ln"]["calls"],
    }
    gemm = {mode: {m: p["categories_ms"]["gemm"] for m, p in profiles[mode].items()} for mode in profiles}
    rest = {
        mode: {m: p["categories_ms"]["rest"] - profiles[mode]["pre_ln"]["categories_ms"]["rest"] for m, p in ps.items()}
        for mode, ps in profiles.items()
    }
    return [
        f"`{r['meta']['command']}`",
        f"sas_p's attention kernel ran forward {forward['sas_p']['calls']} times in {num(forward['sas_p']['self_ms'], 1)}"
        f" ms against pre_ln's {forward['pre_ln']['calls']} in {num(forward['pre_ln']['self_ms'], 1)} ms",
        f"the zero-query call costs {num(zero_query, 1)} ms, {num(100 * zero_query / sas_p['total_self_ms'], 1)}% "
        f"of sas_p's {sas_p['total_self_ms']:.0f} ms, "
        + ("the same" if abs(per_call["zero_query"] / per_call["real"] - 1) < SAME_PER_CALL else "NOT the same")
        + f" per call as the real one (within {SAME_PER_CALL:.0%})",
        f"GEMMs take {pre_ln['categories_ms']['gemm']:.0f} ms in pre_ln and {gemm['eager']['sas_p']:.0f} ms in sas_p "
        f"({num(gemm['eager']['pre_ln'] / gemm['eager']['sas_p'])}; {gemm['eager']['sas']:.0f} ms in sas, "
        f"{num(gemm['eager']['pre_ln'] / gemm['eager']['sas'])}) eager, "
        f"{num(gemm['compiled']['pre_ln'] / gemm['compiled']['sas_p'])} and "
        f"{num(gemm['compiled']['pre_ln'] / gemm['compiled']['sas'])} compiled, against the FLOP bound "
        f"{num(run('bf16run2')['train']['sas_p']['flop_bound_vs_pre_ln'])}",
        f"rest of the step is {signed(rest['eager']['sas_p'], 0)} ms (sas_p) and {signed(rest['eager']['sas'], 0)}"
        f" ms (sas) beyond pre_ln's eager, {signed(rest['compiled']['sas_p'], 0)} and "
        f"{signed(rest['compiled']['sas'], 0)} ms compiled",
    ]


@facts(PAGE)
def demo_resume_offline_packing() -> list[str]:
    """Besides bf16: the demo model's size (the reproduction's sas_p runs of the same preset), the stream resume
    timing (`benchmarks.stream_resume`), the offline task's constant baseline (glue_tiny's glue.json) and the packing
    section's batch and runs (the current `make bench` runs)."""
    parameters = common([r["parameters"] for r in reproduction("codeparrot-tiny")["runs"] if r["block"] == "sas_p"])
    stream = run("stream_resume")
    times = {
        kind: f"{stream[kind]['median_s']:.2f} s ({span([stream[kind]['min_s'], stream[kind]['max_s']], 2)})"
        for kind in ("restored", "skipped")
    }
    glue = glue_tiny()
    baseline = common(
        [g["tasks"]["stdlib-topic"]["baseline"]["validation"]["accuracy"] for g in glue["blocks"].values()]
    )
    current = list(runs(CURRENT_RUNS).values())
    shape = common([json.dumps(r["meta"]["shape"], sort_keys=True) for r in current])
    cpus = common([r["meta"]["machine"].split(", ")[1].split()[0] for r in current])
    packing = [r["packing"] for r in current]
    return [
        f"(SAS-P, 4 blocks, d=128, {parameters / 1e6:.1f}M parameters",
        f"from step {stream['setup']['checkpoint_step']} of a local stream of {stream['setup']['documents']:,} "
        f"documents (crammed-bert-tiny-sas_p, {COUNTS[stream['setup']['rounds']]} rounds",
        f"the first step came after {times['restored']} restored and {times['skipped']} skipped, "
        f"{num(stream['skipped_over_restored'], 2)}× as long",
        f"with Python {glue['environment']['python']}'s, a constant prediction of the most frequent training class "
        f"scores {100 * baseline:.1f}% on the validation split",
        f"({common([p['tokens'] for p in packing])} real tokens, "
        f"{common([p['padded_tokens'] for p in packing]):,} when padded to the longest)",
        "at the paper's CodeParrot shape ({layers}×{width})".format(**json.loads(shape))
        + f" on this project's host of {cpus} CPUs. In the {COUNTS[len(current)]} current runs (runs "
        f"{run_numbers(CURRENT_RUNS)},",
        "real tokens/s of the packed row over the padded batch, by run: "
        f"{span([p['pre_ln']['packed_over_padded']['ratio_median'] for p in packing], 2)}× for pre_ln, "
        f"{span([p['sas_p']['packed_over_padded']['ratio_median'] for p in packing], 2)}× for sas_p",
        f"the padded batch wastes {100 * (1 - packing[-1]['tokens'] / packing[-1]['padded_tokens']):.0f}% of its tokens",
        "which of these makes sas_p's gain the "
        + (
            "smaller"
            if all(
                p["sas_p"]["packed_over_padded"]["ratio_median"] < p["pre_ln"]["packed_over_padded"]["ratio_median"]
                for p in packing
            )
            else "NOT smaller"
        ),
    ]


@facts(PAGE)
def bf16_words() -> list[str]:
    """The bf16 section's words: the crossover benchmark's protocol and verdict, `bf16run1`'s host, the fidelity
    rerun and the seeds per point."""
    crossover = run("bf16_crossover")
    first = run("bf16run1")
    faster = first["precision"]["train"]["pre_ln"]["bf16_vs_float32"]["ratio_median"] > 1
    fidelity = reproduction("bf16-fidelity")
    rerun = fidelity["float32_vs_committed"]
    (again,) = rerun
    peaks = run("bf16profile1")["meta"]["gemm_peak_gflops"]
    block, seed = again.split(" seed ")
    return [
        f"**bf16 on a CPU: {'slower' if crossover['bf16_slower_up_to_hidden_size'] else 'NOT slower'} at small widths.**",
        f"{COUNTS[crossover['meta']['rounds']]} rounds after {COUNTS[crossover['meta']['warmup']]} warm-up",
        f"`bf16run1`, vocab {first['meta']['shape']['vocab']}, {COUNTS[first['meta']['torch_threads']]} threads, "
        f"trained {'faster' if faster else 'NOT faster'} in bf16 on its host",
        f"{COUNTS[len(rerun)]} float32 run was trained again there: {block}, seed {seed}, which "
        + ("reproduced" if rerun[again] == "equal" else "did NOT reproduce")
        + f" its committed record's every logged loss. That {'shows' if rerun[again] == 'equal' else 'does NOT show'} "
        f"{block}'s float32 training unchanged between the two commits. It does not show it for",
        f"{COUNTS[len(fidelity['seeds'])]} seeds per point",
        f"a quiet Intel host whose bf16 GEMMs are {'slower' if peaks['bf16'] < peaks['float32'] else 'faster'} than "
        "its float32 ones",
    ]
