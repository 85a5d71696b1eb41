"""`kv_cache`: the KV cache a decoding step keeps per token, for every block type and `GPT2LMHeadModel`: the bytes of
the keys and values in the cache after a cached forward of `seq` tokens (batch 1), per token, against GPT-2's. Every
block type caches keys and values of every layer (shaped attention's `C·X` reads the cached values), so the figure
is the same for all at equal width; what differs is which models share it."""

from __future__ import annotations

import torch

from benchmarks.common import Context
from modeling_simplified.configuration_simplified import BLOCK_TYPES

ON_CUDA = True
BF16 = False
NAMES = ("gpt2", *BLOCK_TYPES)


def cache_bytes(cache) -> int:
    """Bytes of every layer's keys and values in a transformers `Cache`."""
    return sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))


def run(ctx: Context) -> dict:
    seq = 16 if ctx.quick else ctx.shape.seq
    prompt = ctx.ids(batch=1, seq=seq, seed=1)
    out = {}
    for name in NAMES:
        model = ctx.build(name).eval()
        with torch.no_grad():
            result = model(input_ids=prompt, use_cache=True)
        cache = getattr(result, "cache", None) or result.past_key_values
        out[name] = {"bytes_per_token": cache_bytes(cache) / seq}
        del model, result, cache
    for row in out.values():
        row["vs_gpt2"] = row["bytes_per_token"] / out["gpt2"]["bytes_per_token"]
    return out


def table(result: dict) -> str:
    lines = ["## KV cache per token (batch 1)", "| model | KiB per token | vs GPT2LMHeadModel |", "|---|---|---|"]
    for name, r in result.items():
        lines.append(f"| {name} | {r['bytes_per_token'] / 1024:.1f} | {r['vs_gpt2']:.2f}× |")
    return "\n".join(lines)
