"""docs/inference.md's figures of the compiled decoding recipe: `bf16decode1`'s batch-1 decoding rows of sas_p and
its host, and the recipe's first call (it compiles) from `bf16run5`'s decoding profile."""

from __future__ import annotations

from benchmarks import targets
from benchmarks.common import DTYPES

from ..benchruns import bf16_pooled, current_recipe_runs, target
from ..data import run
from ..registry import facts
from ..text import COUNTS, fraction, num

PAGE = "docs/inference.md"


@facts(PAGE)
def compiled_recipe() -> list[str]:
    """The recipe's figures: the runs of the current recipe (`bf16decode1`) and `bf16run5`'s decoding profile."""
    (name,) = current_recipe_runs()  # the prose reports one run
    r = run(name)
    precision, peaks = r["precision"], r["meta"]["gemm_peak_gflops"]
    eager, compiled = precision["generate_batch_1"]["sas_p"], precision["generate_batch_1_compiled"]["sas_p"]
    faster = [compiled[d]["median_s"] < eager[d]["median_s"] for d in DTYPES]
    decode = run("bf16run5")["profile"]["decode"]
    pooled = bf16_pooled(target("bf16 generate batch 1, compiled: sas_p bf16", targets.BF16_TARGETS))["pooled"]
    above = [run(n)["meta"]["gemm_peak_gflops"] for n in current_recipe_runs()]
    above = any(p["bf16"] > p["float32"] for p in above)
    gemv = run("gemv_bf16")["rows"]
    return [
        "Compiling `forward` with inductor decodes "
        + ("faster than eager in either precision" if all(faster) else "NOT faster than eager in either precision"),
        f"{COUNTS[len(current_recipe_runs())].capitalize()} quiet run of the current recipe (`{name}`",
        "bf16 weights decode "
        + ("faster" if faster[list(DTYPES).index("bf16")] else "NOT faster")
        + " compiled than eager, but "
        + ("short of" if pooled["ratio"] < targets.BF16_DECODE else "NOT short of")
        + f" the `{targets.BF16_DECODE}×` float32 that "
        + fraction(DTYPES["bf16"].itemsize / DTYPES["float32"].itemsize)
        + " the bytes would allow",
        f"A host whose bf16 peak is above its float32 one {'has measured' if above else 'has not measured'} the "
        "recipe yet",
        "which eager bf16 weights take, streams them "
        + ("slower" if all(g["linear_GBps"] < g["float32_linear_GBps"] for g in gemv) else "NOT slower")
        + " on a CPU whose",
        f"decoded sas_p in {num(compiled['bf16']['median_s'])} s with bf16 weights and",
        f"{num(compiled['float32']['median_s'])} s with float32 weights, against {num(eager['float32']['median_s'])} s",
        f"for eager float32 and {num(eager['bf16']['median_s'])} s for eager bf16",
        "On that host the bf16 GEMM peak is "
        + ("below" if peaks["bf16"] < peaks["float32"] else "NOT below")
        + " the float32 one",
        f"its first call took {num(decode['bf16']['first_call_s'], 1)} s with bf16 weights and "
        f"{num(decode['float32']['first_call_s'], 1)} s with float32 ones, where a warm call took "
        f"{num(decode['bf16']['warm_call_s'], 2)} and {num(decode['float32']['warm_call_s'], 2)} s",
    ]
