"""The paper's CodeParrot comparison (He & Hofmann, ICLR 2024, Figs. 2, 5, 23) in miniature.

Trains every causal block type of `modeling_simplified.configuration_simplified.BLOCKS` and one ablation,
`sas_softmax` (the skipless SAS block with plain softmax attention instead of shaped attention), with the same data
order, seeds and steps, through the training API (`TrainPlan` → `train`, with the diagnostics callback). As the
paper does (§4: "we tune the maximum learning rate ... on a logarithmic grid"; App. D.1), each block type gets its
own maximum learning rate:

1. **sweep**: every block at every lr of `--lr-grid` (default 1e-3, 2e-3, 4e-3), the first seed, `--sweep-steps`
   steps (default half of `--steps`); the lr with the lowest final eval loss is the block's (a diverged run counts
   as worst; `results.json` → `lr_sweep` records the grid, the loss at each lr and the choice);
2. **final**: every block at its chosen lr, every seed, `--steps` steps: the table, the claims and the plots.

`--no-sweep` trains every block at its preset's lr instead. βFF is as the preset family encodes the paper's
guidance (0.1 for the 768-wide models, 0.2 for narrower ones, App. D.1).

Modules: `planning` (the command's arguments and the runs they make, each a `TrainPlan`), `jobs` (training the
runs, reusing finished ones, in child processes with `--jobs`), `analysis` (lr choice, table, claims, RaPTr
comparison, signal propagation) and `report` (`results.md` and the plots, from `results.json` alone); `run` ties
them together (`python -m experiments.reproduce`).

The output folder (default `docs/reproduction/`) gets `results.json`, `results.md` (the table, the claims
verdicts computed from the table, the diagnostics), `loss_vs_step.png`, `loss_vs_time.png`, `gains.png`
(shaped-attention α, β, γ per layer, mean over heads, and βFF, against the step), `kurtosis.png` (activation
kurtosis per layer at the end) and `signal_propagation.png`. The runs themselves go to
`<runs-dir>/sweep/lr<lr>/<block>/` and `<runs-dir>/seed<k>/<block>/`; a finished run leaves its record there
(`record.json`, with its plan), and a later command whose plan for that run is the same reuses it instead of
training again (`--retrain` refuses reuse). So an interrupted reproduction resumes at the run it stopped in, and
runs trained by separate processes are summarised together. `--jobs N` trains each phase's unfinished runs in N
child processes (every N-th run each, torch threads split between them, logs in `<runs-dir>/<phase>-<i>.log`),
then this process summarises. On a small CPU that beats one process using every core: the miniature's GEMMs are
too small to scale across threads.

Paper scale on a GPU: `python -m experiments.reproduce --preset codeparrot --preset-shape` (the `codeparrot-<block>`
presets: 18x768, their steps and batch, the real CodeParrot data `huggingface-course/codeparrot-ds-train` /
`-valid`).
"""
