"""GLUE as He & Hofmann's Table 2 scores it (App. D.2, cramming's protocol): the Hub repository, each task's text
columns, number of labels and evaluation splits, Table 2's tasks in its column order and their display names. Plain
data: `simplified-glue --help` reads it without importing the training stack."""

from __future__ import annotations

#: the GLUE repository on the Hub
GLUE = "nyu-mll/glue"
#: GLUE task → (first text column, second text column or None, number of labels (1: regression), eval split)
GLUE_TASKS: dict[str, tuple[str, str | None, int, str]] = {
    "cola": ("sentence", None, 2, "validation"),
    "sst2": ("sentence", None, 2, "validation"),
    "mrpc": ("sentence1", "sentence2", 2, "validation"),
    "qqp": ("question1", "question2", 2, "validation"),
    "stsb": ("sentence1", "sentence2", 1, "validation"),
    "mnli": ("premise", "hypothesis", 3, "validation_matched"),
    "qnli": ("question", "sentence", 2, "validation"),
    "rte": ("sentence1", "sentence2", 2, "validation"),
    "wnli": ("sentence1", "sentence2", 2, "validation"),
}
#: GLUE task → the evaluation splits besides its eval split (MNLI is scored on matched and mismatched both)
GLUE_EXTRA_EVAL: dict[str, tuple[str, ...]] = {"mnli": ("validation_mismatched",)}

#: Table 2's tasks, in its column order (WNLI is not among them: cramming's GLUE_sane.yaml leaves it out)
TABLE2_TASKS = ("mnli", "sst2", "stsb", "rte", "qnli", "qqp", "mrpc", "cola")
#: the tasks that never enter the GLUE score
NOT_SCORED = ("wnli",)
#: each task as Table 2 names it
DISPLAY = {
    "mnli": "MNLI",
    "sst2": "SST-2",
    "stsb": "STS-B",
    "rte": "RTE",
    "qnli": "QNLI",
    "qqp": "QQP",
    "mrpc": "MRPC",
    "cola": "CoLA",
    "wnli": "WNLI",
}
