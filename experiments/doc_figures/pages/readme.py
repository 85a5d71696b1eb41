"""README.md's results: its speed tables (float32 and bf16 targets pooled), the paper-scale parameter counts, and
its few sentences on the reproduction, RaPTr, memory and bf16 on a CPU."""

from __future__ import annotations

import functools
import json

from benchmarks import targets
from modeling_simplified import SimplifiedConfig
from modeling_simplified.hub_cards.card import count_parameters

from ..benchruns import (
    BF16_CURRENT_RUNS,
    CURRENT_RUNS,
    FAST_HOST_RUNS,
    GPT2_TRAIN,
    LLAMA_TRAIN,
    SAS_P_TRAIN,
    SAS_TRAIN,
    bf16_pooled,
    bf16_pools,
    by_run,
    fused_saving,
    kv_cache_kib,
    peaks,
    pooled,
    runs,
    target,
)
from ..claims import CLAIM_LABELS, family_steps, in_both, raptr_lead, training_hours
from ..data import DEPTH, reproduction, run
from ..registry import block, facts, table
from ..text import COUNTS, common, lr_text, num, span

PAGE = "README.md"
#: the block-types table: He & Hofmann's CodeParrot shape (§4.2) with GPT-2's vocabulary, the config defaults
PAPER_SHAPE = dict(
    num_hidden_layers=18, hidden_size=768, num_attention_heads=12, intermediate_size=3072, vocab_size=50257
)


def _figure(p: dict) -> str:
    """A pooled target's median and per-round range: 1.137 (1.034–1.338)."""
    return f"{num(p['ratio'])} ({num(p['low'])}–{num(p['high'])})"


def _median(label: str) -> str:
    return num(pooled(target(label))["pooled"]["ratio"])


@block("readme-speed")
def speed_table() -> str:
    gpt2 = (
        f"{span(by_run(GPT2_TRAIN))} by run on these {span(peaks(CURRENT_RUNS), 0)} GFLOP/s hosts; "
        f"{span(by_run(GPT2_TRAIN, FAST_HOST_RUNS))} on {span(peaks(FAST_HOST_RUNS), 0)} GFLOP/s hosts (runs 9–12)"
    )
    decode = run(CURRENT_RUNS[0])["generate"]
    rows = [
        [
            "training: sas_p × faster than pre_ln",
            num(pooled(SAS_P_TRAIN)["pooled"]["bound"]),
            _figure(pooled(SAS_P_TRAIN)["pooled"]),
        ],
        [
            "training: sas × faster than pre_ln",
            num(pooled(SAS_TRAIN)["pooled"]["bound"]),
            _figure(pooled(SAS_TRAIN)["pooled"]),
        ],
        ["training: our pre_ln × faster than `GPT2LMHeadModel`", "1.000", gpt2],
        [
            "training: `pre_ln_llama` × faster than `LlamaForCausalLM`",
            "1.000",
            f"{_figure(pooled(LLAMA_TRAIN)['pooled'])}; by run {span(by_run(LLAMA_TRAIN))}",
        ],
    ]
    for batch in (1, 8):
        bound = decode[f"batch_{batch}"]["sas_p"]["weight_bound_vs_gpt2"]
        rows.append(
            [
                f"`generate`, batch {batch}: sas_p / pre_ln × faster than GPT-2",
                f"{num(bound)} / 1.000",
                f"{_median(f'generate batch {batch}: sas_p')} / {_median(f'generate batch {batch}: pre_ln')}",
            ]
        )
    rows.append(
        [
            "scoring 8 × 128: sas / sas_p × faster than pre_ln",
            num(pooled(target("scoring 8x128: sas /"))["pooled"]["bound"]),
            f"{_median('scoring 8x128: sas /')} / {_median('scoring 8x128: sas_p')}",
        ]
    )
    head = [
        "× faster than (the first over the second; above 1: the first is faster)",
        "bound",
        "pooled median (per-round range)",
    ]
    return table(head, rows)


@block("readme-speed-bf16")
def bf16_table() -> str:
    """Every bf16 target pooled over the current code's runs (`bf16_pooled`), its share of the bound and whether it
    is met, beside the float32 target of the same ratio pooled over the float32 runs."""
    float32 = {t.label: t for t in targets.TARGETS}
    rows = []
    for t in targets.BF16_TARGETS:
        p = bf16_pooled(t)["pooled"]
        if p is None:
            continue
        twin = float32.get(t.label.removeprefix("bf16 "))
        f32 = _figure(pooled(twin)["pooled"]) if twin else "-"
        met = "yes" if p["met"] else "NO"
        rows.append([t.label.removeprefix("bf16 "), _figure(p), num(p["share_of_bound"]), met, f32])
    for m, p in targets.pooled_bf16_mfu(runs(BF16_CURRENT_RUNS)).items():
        if m != "gpt2":
            figure = f"{num(100 * p['median'], 1)}% ({num(100 * p['low'], 1)}–{num(100 * p['high'], 1)}%)"
            rows.append([f"MFU ≥ {targets.BF16_MFU:.0%}: {m}", figure, "-", "yes" if p["met"] else "NO", "-"])
    head = ["target (bf16)", "bf16, pooled: median (range)", "pooled / bound", "met", "float32, pooled"]
    return table(head, rows)


@functools.cache
def paper_scale_parameters(block_type: str) -> int:
    """`SimplifiedForCausalLM`'s parameters at `PAPER_SHAPE` (the model card's count, on the meta device)."""
    return count_parameters(SimplifiedConfig(block_type=block_type, **PAPER_SHAPE), "SimplifiedForCausalLM")


@facts(PAGE)
def miniature() -> list[str]:
    """The parameter counts, and the paragraph on what the miniature can and cannot show."""
    cp, mlm, depth = reproduction("codeparrot-tiny"), reproduction("crammed-bert-tiny"), reproduction(DEPTH)
    both_steps = common([family_steps(cp), family_steps(mlm)])
    seeds = COUNTS[common([len({r["seed"] for r in result["runs"]}) for result in (cp, mlm)])]
    counts = {b: paper_scale_parameters(b) / 1e6 for b in CLAIM_LABELS if b != "sas_softmax"}
    sizes = [r["parameters"] / 1e6 for result in (cp, mlm) for r in result["runs"]]
    shallow, deep = depth["depths"]
    return [
        *(f"| `{b}` | {n:.2f}M |" for b, n in counts.items()),
        f"4 blocks of width 128, {both_steps} steps on the embedded corpora (resumable; the two comparisons' runs train "
        f"for {training_hours(cp, mlm):.1f} hours in all",
        f"an lr sweep per block, {seeds} seeds,",
        f"Fig. 6's depth scaling at {shallow} and {deep} blocks",
        f"Its models hold {span(sizes, 1)}M parameters and train for {both_steps} steps on a CPU; the paper's hold "
        f"{span(list(counts.values()), 0)}M (the table above)",
        f"and {seeds} seeds settle only large differences",
    ]


@facts(PAGE)
def reproduction_summary() -> list[str]:
    cp = reproduction("codeparrot-tiny")
    gaps = [row["generalisation_gap"][0] for row in cp["settings"]["best_lr"]["table"].values()]
    fig5 = "SAS and SAS-P ahead of Pre-LN at equal measured time (Fig. 5) " + common(
        [in_both(cp, f"{b} ahead of Pre-LN") for b in ("SAS", "SAS-P")]
    )
    return [fig5, f"a {span(gaps, 2)}-nat generalisation gap"]


@facts(PAGE)
def raptr() -> list[str]:
    comparisons = reproduction("codeparrot-tiny")["raptr"]

    def gaps(key: str, sep: str) -> str:
        row = comparisons[key]
        return f"{num(row['raptr_minus_full_mean'])}{sep}{' / '.join(num(d) for d in row['raptr_minus_full'])}"

    shared_lr = lr_text(reproduction("codeparrot-tiny")["lrs"]["shared_lr"])
    return [
        f"(pre_ln, 4×128, lr {shared_lr}, seeds 0 and 1) {raptr_lead()} of the full model",
        f"at equal steps ({gaps('equal_steps', ' eval loss, per seed ')};",
        f"at equal layer FLOPs ({gaps('equal_flops', '; ')};",
        f"RaPTr's lr schedule ({gaps('same_schedule', '; ')};",
        f"and, by {_less_or_not(comparisons)}, when the full model also trains",
    ]


def _less_or_not(comparisons: dict) -> str:
    """RaPTr's lead when the full model trains on its schedule too, against its leads at equal steps and FLOPs."""
    same = abs(comparisons["same_schedule"]["raptr_minus_full_mean"])
    others = [abs(comparisons[k]["raptr_minus_full_mean"]) for k in ("equal_steps", "equal_flops")]
    return "less" if same < min(others) else "NOT less"


@facts(PAGE)
def speed() -> list[str]:
    """The speed section's protocol, memory and KV cache, and bf16 on a CPU."""
    current = list(runs(CURRENT_RUNS).values())
    loss = [r["loss"]["pre_ln"] for r in current]
    shape = json.loads(common([json.dumps(r["meta"]["shape"], sort_keys=True) for r in current]))
    cores = common([r["meta"]["machine"].split(", ")[1].split()[0] for r in current])
    return [
        "of the same shape ({layers}×{width}, vocab {vocab}, batch {batch} × {seq}, float32, ".format(**shape)
        + f"{cores} shared CPU cores)",
        f"Pooled over the {COUNTS[len(current)]} full runs of the current code",
        f"The fused LM head + loss takes {common([f'{x:.0f}' for x in fused_saving()])}% off a training "
        f"step's peak memory ({common([num(r['fused']['peak_MiB'], 0) for r in loss])} against "
        f"{common([num(r['logits']['peak_MiB'], 0) for r in loss])} MiB for pre_ln)",
        f"a step grows the resident set by {span([r['step_memory']['pre_ln']['vs_gpt2'] for r in current], 2)}× "
        "GPT-2's",
        f"the KV cache is {common(list(kv_cache_kib())):.0f} KiB per token for every block type",
        f"pooled over the current code's bf16 runs that time it ({bf16_pools()}), beside",
        f"up to hidden_size {run('bf16_crossover')['bf16_slower_up_to_hidden_size']}, a bf16 training step measured "
        "slower than float32's",
    ]
