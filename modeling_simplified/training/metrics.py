"""The evaluation metrics of the sequence-classification task: each GLUE task's own metrics, as GLUE defines them
(Wang et al., 2019, Table 1), computed with scikit-learn and scipy, and the baseline a constant prediction scores.

- CoLA: Matthews correlation; SST-2, QNLI, RTE, WNLI: accuracy; MRPC, QQP: F1 (of the positive class) and accuracy;
  STS-B: Pearson and Spearman correlation; MNLI: accuracy, on `validation_matched` and `validation_mismatched`
  (the split handling is `data.GLUE_EXTRA_EVAL`'s).
- Any other classification data (the embedded `stdlib-topic`, a local labelled folder): accuracy; a regression
  (one output): Pearson and Spearman.

`main_metric` is the metric a task enters the GLUE score with (`glue.py`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

ACCURACY = ("accuracy",)
F1_ACCURACY = ("f1", "accuracy")
MATTHEWS = ("matthews_correlation",)
CORRELATIONS = ("pearson", "spearman")

#: GLUE task -> the metrics GLUE reports for it, the first one its main metric
GLUE_METRICS: dict[str, tuple[str, ...]] = {
    "cola": MATTHEWS,
    "sst2": ACCURACY,
    "mrpc": F1_ACCURACY,
    "qqp": F1_ACCURACY,
    "stsb": CORRELATIONS,
    "mnli": ACCURACY,
    "qnli": ACCURACY,
    "rte": ACCURACY,
    "wnli": ACCURACY,
}


def metric_names(task: str | None, num_labels: int) -> tuple[str, ...]:
    """The metrics of `task` (a GLUE task name, or any other name / None for other data) with `num_labels` outputs
    (1: a regression)."""
    if task in GLUE_METRICS:
        return GLUE_METRICS[task]
    return CORRELATIONS if num_labels == 1 else ACCURACY


def main_metric(task: str | None, num_labels: int) -> str:
    return metric_names(task, num_labels)[0]


def _correlation(fn, predictions: np.ndarray, labels: np.ndarray) -> float:
    """A correlation coefficient, 0 where it is undefined (a constant prediction or constant labels), as
    scikit-learn's `matthews_corrcoef` defines it for a constant prediction."""
    if np.ptp(predictions) == 0 or np.ptp(labels) == 0:
        return 0.0
    return float(fn(predictions, labels)[0])


def score(names: Sequence[str], predictions, labels) -> dict[str, float]:
    """The metrics `names` of `predictions` (class ids, or real values for the correlations) against `labels`."""
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    compute: dict[str, Callable[[], float]] = {
        "accuracy": lambda: accuracy_score(labels, predictions),
        "f1": lambda: f1_score(labels, predictions, zero_division=0.0),
        "matthews_correlation": lambda: matthews_corrcoef(labels, predictions),
        "pearson": lambda: _correlation(pearsonr, predictions.astype(float), labels.astype(float)),
        "spearman": lambda: _correlation(spearmanr, predictions.astype(float), labels.astype(float)),
    }
    return {name: float(compute[name]()) for name in names}


def predictions_of(logits: np.ndarray) -> np.ndarray:
    """Class ids from classification logits, the values themselves from a regression's one output."""
    logits = logits[0] if isinstance(logits, tuple) else logits
    return logits[:, 0] if logits.ndim == 2 and logits.shape[-1] == 1 else logits.argmax(-1)


def compute_metrics_for(task: str | None, num_labels: int) -> Callable:
    """The Trainer's `compute_metrics` for `task`: its metrics of an `EvalPrediction`."""
    names = metric_names(task, num_labels)

    def compute(eval_pred) -> dict[str, float]:
        return score(names, predictions_of(eval_pred.predictions), eval_pred.label_ids)

    return compute


def constant_baseline(task: str | None, num_labels: int, train_labels, eval_labels) -> tuple[str, dict[str, float]]:
    """(what it predicts, its metrics on `eval_labels`) of the constant prediction learned from the training labels:
    the most frequent class (ties: the smallest id), or for a regression the training mean (whose correlations are
    0: a constant predicts nothing)."""
    names = metric_names(task, num_labels)
    if num_labels == 1:
        value = float(np.mean(np.asarray(train_labels, dtype=float)))
        return f"the training mean {value:.4g}", score(names, np.full(len(eval_labels), value), eval_labels)
    counts = Counter(int(label) for label in train_labels)
    majority = min(counts, key=lambda label: (-counts[label], label))
    return f"the most frequent training class {majority}", score(
        names, np.full(len(eval_labels), majority), eval_labels
    )
