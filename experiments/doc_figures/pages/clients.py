"""docs/clients.md's figures: torchao int8 weight-only decoding against float32 and bf16 at the paper's shape (the
`quantization` section's run `quantization1`), against each precision's weight-bytes bound and the int8 goal."""

from __future__ import annotations

from benchmarks import targets
from benchmarks.common import format_ratio
from benchmarks.sections import generate

from ..data import run
from ..registry import block, facts, table
from ..text import num

PAGE = "docs/clients.md"
#: the run at the paper's shape (`python -m benchmarks.benchmark --sections quantization`)
QUANTIZATION = "quantization1"


@block("clients-quantization")
def quantization_table() -> str:
    """Each batch and precision: tokens/s, the ratio to float32 per round, the weight-bytes bound, the logit error."""
    q = run(QUANTIZATION)["quantization"]
    rows = [
        (
            batch.removeprefix("batch_"),
            name,
            num(r["tokens_per_s"], 1),
            format_ratio(r["vs_float32"]),
            num(r["weight_bound_vs_float32"], 2),
            f"{q['max_logit_error_vs_float32'][name]:.1e}",
        )
        for batch in (f"batch_{b}" for b in generate.BATCHES)
        for name, r in q[batch].items()
    ]
    head = (
        "batch",
        "weights",
        "tokens/s",
        "vs float32: median (range, of mins)",
        "weight-bytes bound",
        "largest logit error vs float32",
    )
    return table(head, rows)


@facts(PAGE)
def quantized_decoding() -> list[str]:
    """The run's host, the int8 goal against its ratio and the two reasons the run records."""
    r = run(QUANTIZATION)
    q, meta = r["quantization"], r["meta"]
    int8 = q["batch_1"]["int8"]["vs_float32"]["ratio_median"]
    bf16 = {b: q[f"batch_{b}"]["bf16"]["vs_float32"]["ratio_median"] for b in generate.BATCHES}
    share = q["float32_read_share_of_memory_rate"]
    peaks = q["gemm_peak_gflops"]
    units = [f for f in targets.BF16_UNIT_FLAGS if f in q["cpu_flags"]]
    profiled = q["int8_profile_batch_1"]
    bound = share >= targets.BANDWIDTH_BOUND_SHARE
    # tokens a row decodes: the batch-1 rate times its time
    new_tokens = round(q["batch_1"]["float32"]["tokens_per_s"] * q["batch_1"]["float32"]["median_s"])
    return [
        f"`{QUANTIZATION}` ([{QUANTIZATION}.json](benchmark/{QUANTIZATION}.json), torchao {q['torchao']}, "
        f"{meta['torch_threads']} threads)",
        f"decodes sas_p from a prompt of {generate.PROMPT} tokens to {new_tokens} new tokens, median of "
        f"{meta['rounds']} rounds",
        f"GEMM peak {peaks['float32']:.0f} GFLOP/s in float32 and {peaks['bf16']:.1f} in bf16, CPU flags "
        f"{', '.join(q['cpu_flags'])}: "
        + (f"bf16 units ({', '.join(units)})" if units else "no bf16 units, so bf16 is emulated"),
        f"memory read rate {q['memory_read_GBps']:.1f} GB/s",
        f"int8 decodes at {num(int8)}× float32 at batch 1, "
        + ("short of" if int8 < targets.INT8_DECODE else "NOT short of")
        + f" the `{targets.INT8_DECODE}×` goal",
        f"converting weights takes {100 * profiled['conversion_share']:.0f}% of an int8 batch-1 step's self CPU "
        f"time and GEMMs {100 * profiled['gemm_share']:.0f}%",
        f"float32 batch-1 decoding reads its weights at {num(q['float32_batch_1_weight_read_GBps'], 1)} GB/s, "
        f"{num(share, 2)} of the memory rate: "
        + ("bandwidth-bound" if bound else "not bandwidth-bound")
        + f" by the `{targets.BANDWIDTH_BOUND_SHARE}` share the goal asks",
        f"bf16 weights decode at {num(bf16[1])}× float32 at batch 1 and {num(bf16[8])}× at batch 8",
        f"largest float32 logit of {num(q['max_abs_logit_float32'], 1)}",
    ]
