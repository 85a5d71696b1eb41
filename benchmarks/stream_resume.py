"""How long a streamed run's `--resume` takes to train its first step, from the checkpoint's stream state against
re-reading the consumed stream (the Trainer's own resume): `python -m benchmarks.stream_resume [--json FILE]`.

A streamed masked-LM run (crammed-bert-tiny-sas_p's model and recipe, `data.streaming=true`) over a local folder of
JSON-lines shards (the embedded prose, repeated to `--documents`) trains `2 × --steps` steps with a checkpoint at
`--steps`. Each round copies the run back to that checkpoint twice and resumes both copies, in alternating order:
one with the checkpoint's stream state ("restored"), one without it ("skipped": the Trainer reads and tokenises
the first `--steps` batches again to skip them). Reported: each resume's seconds to its first trained step
(`segments[-1].first_step_s` of metrics.json), median and range over the rounds, and their ratio. Both resumes
must end with identical weights (checked)."""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
from pathlib import Path

from safetensors.torch import load_file

from modeling_simplified.training import corpus
from modeling_simplified.training.cli import main as train


def shards(folder: Path, documents: int, count: int = 4) -> None:
    """`documents` prose rows (the embedded corpus, repeated with a number so no two are equal) in `count` files."""
    texts = [row[corpus.PROSE_COLUMN] for row in corpus.prose_dataset("train")]
    folder.mkdir(parents=True)
    for k in range(count):
        rows = [{"text": f"{i}. {texts[i % len(texts)]}"} for i in range(k, documents, count)]
        (folder / f"train-{k:05d}-of-{count:05d}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "validation.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[:64]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stream_resume", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="the checkpoint the resumes start from")
    parser.add_argument("--documents", type=int, default=40_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        shards(root / "data", args.documents)
        steps = 2 * args.steps
        common = [
            "--preset", "crammed-bert-tiny-sas_p", "--dataset", str(root / "data"), "--max-steps", str(steps),
            "--set", "data.streaming=true", "--set", "training.batch_ramp_to=null",
            "--set", f"training.save_steps={args.steps}", "--set", f"training.eval_steps={steps}",
            "--set", "training.save_total_limit=null", "--no-export",
        ]  # fmt: skip
        base = root / "run"
        if train([*common, "--output-dir", str(base)]) != 0:
            raise SystemExit("the run to resume from failed")
        shutil.rmtree(base / f"checkpoint-{steps}")
        (base / "metrics.json").unlink()
        times: dict[str, list[float]] = {"restored": [], "skipped": []}
        for r in range(args.rounds):
            order = ("restored", "skipped") if r % 2 == 0 else ("skipped", "restored")
            for how in order:
                run = root / f"{how}-{r}"
                shutil.copytree(base, run)
                if how == "skipped":
                    for state in run.glob("checkpoint-*/stream_state.pt"):
                        state.unlink()
                if train([*common, "--output-dir", str(run), "--resume"]) != 0:
                    raise SystemExit(f"the {how} resume failed")
                segment = json.loads((run / "metrics.json").read_text())["segments"][-1]
                if segment.get("stream") != how:
                    raise SystemExit(f"the {how} resume reports {segment.get('stream')!r}")
                times[how].append(segment["first_step_s"])
            a, b = (load_file(root / f"{how}-{r}" / f"checkpoint-{steps}" / "model.safetensors") for how in times)
            if not all((a[k] == b[k]).all() for k in a):
                raise SystemExit("the two resumes ended with different weights")
    report = {
        how: {"median_s": statistics.median(t), "min_s": min(t), "max_s": max(t), "rounds": t}
        for how, t in times.items()
    }
    report["skipped_over_restored"] = report["skipped"]["median_s"] / report["restored"]["median_s"]
    report["setup"] = {"checkpoint_step": args.steps, "documents": args.documents, "rounds": args.rounds}
    print(f"resume from step {args.steps} of a stream, seconds to the first trained step (median, range):")
    for how in times:
        print(f"  {how:9s} {report[how]['median_s']:7.2f}  ({report[how]['min_s']:.2f}-{report[how]['max_s']:.2f})")
    print(f"  skipped / restored: {report['skipped_over_restored']:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
