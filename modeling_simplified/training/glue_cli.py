"""`simplified-glue`: fine-tune a pretrained run on every GLUE task with several seeds and print Table 2's row
(`glue.run_glue`, which says what it writes). Bad input prints one message and exits with status 2; a task that
fails prints one message and exits with status 1 (2 when its data was the cause), every finished run kept."""

from __future__ import annotations

import argparse
import os
import sys

from .glue_tasks import GLUE, TABLE2_TASKS
from .presets import UsageError, add_set_option, first_line

EPILOG = f"""examples:
  simplified-glue --init-from runs/crammed-bert-sas_p                      # Table 2's 8 tasks, seeds 0 1 2
  simplified-glue --init-from runs/crammed-bert-sas_p --tasks rte mrpc --seeds 0
  simplified-glue --init-from RUN --tasks mr=path/to/folder stdlib-topic=embedded   # labelled data of your own
  HF_ENDPOINT=http://localhost:8090 simplified-glue --init-from RUN        # nyu-mll/glue from a Hub mirror

Each task and seed is one simplified-train run of the glue-finetune preset in OUTPUT/TASK/seedK; a finished one
is reused. Default tasks: {" ".join(TABLE2_TASKS)} (Table 2's; wnli is trained when named, never scored)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help).\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="simplified-glue",
        description="Fine-tune a pretrained run on GLUE as He & Hofmann's Table 2 (cramming's protocol): every "
        "task, several seeds, each task's own metrics, the GLUE score.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--init-from", required=True, help="the pretrained run (its output dir, export or checkpoint)")
    parser.add_argument(
        "--tasks",
        nargs="+",
        default=list(TABLE2_TASKS),
        metavar="TASK",
        help="GLUE tasks (cola sst2 mrpc qqp stsb mnli qnli rte wnli) or NAME=DATASET for a labelled dataset "
        "(a Hub id, a local folder, or 'embedded' for the offline stdlib-topic task)",
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], help="fine-tuning seeds (default: 0 1 2)")
    parser.add_argument("--output", help="the benchmark's folder (default: runs/glue/<the pretrained run's name>)")
    parser.add_argument("--dataset", default=GLUE, help=f"the GLUE repository (default: {GLUE})")
    parser.add_argument("--name", help="the table row's name (default: the pretrained run's folder name)")
    parser.add_argument("--max-steps", type=int, help="optimizer steps per run instead of the preset's 5 epochs")
    add_set_option(parser, "override a field of the glue-finetune preset for every task (as simplified-train)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit status."""
    args = build_parser().parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # the training stack loads once the arguments are read: --help and bad options answer without it
    from .glue import GlueTaskFailed, metric_legend, parse_task, render_table, run_glue

    def progress(line: str) -> None:
        print(f"simplified-glue: {line}", file=sys.stderr, flush=True)

    try:
        tasks = [parse_task(text, args.dataset) for text in args.tasks]
        glue = run_glue(
            args.init_from,
            tasks,
            args.seeds,
            args.output,
            overrides=args.overrides,
            max_steps=args.max_steps,
            dataset=args.dataset,
            name=args.name,
            progress=progress,
        )
    except UsageError as err:
        print(f"simplified-glue: error: {first_line(err)}", file=sys.stderr)
        return 2
    except GlueTaskFailed as err:
        print(f"simplified-glue: error: {first_line(err)}", file=sys.stderr)
        return 2 if isinstance(err.__cause__, UsageError) else 1
    print(render_table({glue["name"]: glue}))
    print(f"{metric_legend(glue)}; ×100, mean over seeds (min–max). GLUE: {glue['glue_score']['convention']}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
