"""The loss curve of a run (matplotlib, Agg canvas: no display needed)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def loss_points(log_history: list[dict]) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """(train, eval) loss points `(step, loss)` from a Trainer's `state.log_history`."""
    train = [(e["step"], e["loss"]) for e in log_history if "loss" in e and "step" in e]
    evaluation = [(e["step"], e["eval_loss"]) for e in log_history if "eval_loss" in e and "step" in e]
    return train, evaluation


def plot_loss_curve(log_history: list[dict], path: str | Path, title: str = "") -> Path:
    """Write a PNG of the train and eval loss against the optimizer step."""
    train, evaluation = loss_points(log_history)
    fig = Figure(figsize=(6.4, 4.0), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if train:
        ax.plot(*zip(*train), label="train loss", color="tab:blue", linewidth=1.2)
    if evaluation:
        ax.plot(*zip(*evaluation), "o-", label="eval loss", color="tab:orange", linewidth=1.2, markersize=4)
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy loss")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, format="png")
    return path
