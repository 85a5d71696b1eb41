"""The benchmark sections, by name, in the order `make bench` runs them. A section is a module with `run(ctx)` (a
`common.Context` in, a JSON-able result out), `table(result)` (the Markdown it prints) and `ON_CUDA` (whether it
runs under `--device cuda`; the others measure the CPU process: RSS, the CPU profiler) and `BF16` (whether it
measures in bf16 under `--dtype bf16`). A new section is a module
here and one entry below."""

from __future__ import annotations

from types import ModuleType

from . import (
    allocator,
    compile,
    generate,
    generate_compiled,
    kv_cache,
    loss,
    memory,
    mfu,
    packing,
    precision,
    profile,
    quantization,
    raptr,
    score,
    step_memory,
    train,
)

SECTIONS: dict[str, ModuleType] = {
    "train": train,
    "mfu": mfu,
    "generate": generate,
    "generate_compiled": generate_compiled,
    "precision": precision,
    "quantization": quantization,
    "score": score,
    "kv_cache": kv_cache,
    "memory": memory,
    "step_memory": step_memory,
    "compile": compile,
    "profile": profile,
    "raptr": raptr,
    "packing": packing,
    "loss": loss,
    "allocator": allocator,
}
