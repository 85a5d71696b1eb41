"""docs/inference.md's figures of the compiled decoding recipe: `bf16decode1`'s batch-1 decoding rows of sas_p and
its host, and the recipe's first call (it compiles) from `bf16run5`'s decoding profile."""

from __future__ import annotations

from ..data import run
from ..registry import facts
from ..text import num

PAGE = "docs/inference.md"


@facts(PAGE)
def compiled_recipe() -> list[str]:
    r = run("bf16decode1")
    precision, peaks = r["precision"], r["meta"]["gemm_peak_gflops"]
    eager, compiled = precision["generate_batch_1"]["sas_p"], precision["generate_batch_1_compiled"]["sas_p"]
    decode = run("bf16run5")["profile"]["decode"]
    return [
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
