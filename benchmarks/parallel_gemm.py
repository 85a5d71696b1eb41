"""Would the parallel block's fused input projection pay here? (`python -m benchmarks.parallel_gemm`)

In a parallel block (sas_p, parallel, simplest) attention's query/key projection and the MLP's `W_in` read the same
normed input, so PaLM (Chowdhery et al. 2022) fuses them into one matmul; He & Hofmann (Table 1) suggest that a
more optimised parallel block could gain this way. This times the three GEMMs of a training step that such a fusion
would change, separate against fused, at the CodeParrot shape (1024 tokens, d=768, query/key 1536, MLP 3072):
forward `X·Wᵀ`, the input gradient (two products and their sum against one product), and the weight gradients.
Timed with `common.round_robin` (one warm-up round, the order rotating every round); prints medians,
minima, and the median of the per-round separate/fused ratios with the ratio of the minimum times. It leaves
out what a fusion would add: concatenating the two output gradients (or the weights) every step.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from benchmarks.common import ratios, round_robin, timed


def cases(tokens: int, width: int, qk: int, mlp: int) -> dict[str, dict]:
    x = torch.randn(tokens, width)
    w_qk, w_in = torch.randn(qk, width) * 0.02, torch.randn(mlp, width) * 0.02
    w_cat = torch.cat([w_qk, w_in])
    d_qk, d_in = torch.randn(tokens, qk), torch.randn(tokens, mlp)
    d_cat = torch.cat([d_qk, d_in], 1)
    return {
        "forward": {"separate": lambda: (F.linear(x, w_qk), F.linear(x, w_in)), "fused": lambda: F.linear(x, w_cat)},
        "input gradient": {"separate": lambda: d_qk @ w_qk + d_in @ w_in, "fused": lambda: d_cat @ w_cat},
        "weight gradient": {"separate": lambda: (d_qk.t() @ x, d_in.t() @ x), "fused": lambda: d_cat.t() @ x},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.parallel_gemm", description=__doc__)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.rounds} interleaved rounds")
    print("| GEMMs | separate ms (median, min) | fused ms (median, min) | separate / fused: median (of mins) |")
    print("|---|---|---|---|")
    totals = {"separate": 0.0, "fused": 0.0}
    for name, pair in cases(tokens=1024, width=768, qk=1536, mlp=3072).items():
        results = round_robin(pair, timed(lambda _kind, product: product()), args.rounds)
        speed_up = ratios(results, "separate")["fused"]
        for kind in totals:
            totals[kind] += results[kind]["median_s"]
        sep, fus = results["separate"], results["fused"]
        print(
            f"| {name} | {sep['median_s'] * 1e3:.2f}, {sep['min_s'] * 1e3:.2f} | "
            f"{fus['median_s'] * 1e3:.2f}, {fus['min_s'] * 1e3:.2f} | "
            f"{speed_up['ratio_median']:.3f} ({speed_up['ratio_of_min']:.3f}) |"
        )
    print(
        f"| all three | {totals['separate'] * 1e3:.2f} | {totals['fused'] * 1e3:.2f} | "
        f"{totals['separate'] / totals['fused']:.3f} |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
