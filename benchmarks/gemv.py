"""Weight-streaming rate of one decoding row's product `x·Wᵀ` on this CPU, the kernels' fixed rule against
`F.linear`: `python -m benchmarks.gemv [--json FILE]`. Each shape cycles through enough distinct matrices (about
500 MB, more than any cache) that every call reads its weights from memory, as a decoding step does; GB/s of
weights read, median of 7 timed passes. `linear` is `modeling_simplified.kernels_simplified.linear` under
`torch.no_grad()`: one float32 row on the CPU is the first column of `W·[x, x]ᵀ` (the two-column GEMM, timed
alone too), 16-bit weights take `F.linear`. `--dtype bf16` measures bf16 weights, and beside them `linear` on the
float32 weights of the same shapes in the same run (the rate the bf16 one is set against)."""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

from modeling_simplified.kernels_simplified import linear

#: (out, in) of the CodeParrot shape's matrices: fused QKV, MLP in, MLP out, attention out, the tied LM head
SHAPES = ((2304, 768), (3072, 768), (768, 3072), (768, 768), (50257, 768))
BYTES = 500e6


def rate(fn, matrices: list[torch.Tensor], x: torch.Tensor) -> float:
    """GB/s of weights read by `fn(x, W)` over every matrix, median of 7 passes after one untimed."""
    gigabytes = sum(w.numel() * w.element_size() for w in matrices) / 1e9
    times = []
    for i in range(8):
        start = time.perf_counter()
        for w in matrices:
            fn(x, w)
        if i:
            times.append(time.perf_counter() - start)
    return gigabytes / statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gemv", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", choices=("float32", "bf16"), default="float32", help="the weights' dtype")
    parser.add_argument("--json", help="write the rates here")
    args = parser.parse_args(argv)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    torch.manual_seed(0)
    rows = []
    print(
        f"{args.dtype} weights\n| W (out × in) | F.linear GB/s | W·[x, x]ᵀ GB/s | linear GB/s | linear / F.linear |\n"
        "|---|---|---|---|---|"
    )
    with torch.no_grad():
        for out_features, in_features in SHAPES:
            count = max(2, round(BYTES / (out_features * in_features * dtype.itemsize)))
            matrices = [torch.randn(out_features, in_features).to(dtype) for _ in range(count)]
            x = torch.randn(1, in_features).to(dtype)
            f_linear, ours = rate(F.linear, matrices, x), rate(linear, matrices, x)
            two_columns = rate(lambda x, w: torch.mm(w, x.repeat(2, 1).t()), matrices, x)
            row = {
                "out": out_features,
                "in": in_features,
                "f_linear_GBps": f_linear,
                "two_column_GBps": two_columns,
                "linear_GBps": ours,
            }
            del matrices
            line = f"| {out_features} × {in_features} | {f_linear:.1f} | {two_columns:.1f} | {ours:.1f} | {ours / f_linear:.2f} |"
            if dtype != torch.float32:
                count = max(2, round(BYTES / (out_features * in_features * 4)))
                matrices = [torch.randn(out_features, in_features) for _ in range(count)]
                row["float32_linear_GBps"] = rate(linear, matrices, x.float())
                line += f" float32 linear {row['float32_linear_GBps']:.1f} GB/s"
                del matrices
            rows.append(row)
            print(line)
    if args.json:
        meta = {
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "dtype": args.dtype,
            "command": "python -m benchmarks.gemv" + (f" --dtype {args.dtype}" if args.dtype != "float32" else ""),
        }
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
