"""The paper's block comparisons in miniature: CodeParrot next-token prediction (He & Hofmann, ICLR 2024, §4,
Figs. 2, 5, 23; App. D.1) and crammed-BERT masked-LM pre-training with fine-tuning (§5, Fig. 7, Table 1; App. D.2).

Trains every variant of a preset family (causal: every block type of
`modeling_simplified.configuration_simplified.BLOCKS` and the ablation `sas_softmax`, the skipless SAS block with
plain softmax attention; masked LM: pre_ln, parallel, sas, sas_p, simplest) with the same data order, seeds and
steps, through the training API (`TrainPlan` → `train`, with the diagnostics callback):

1. **lr sweep**: every variant at every lr of `--lr-grid` (default 1e-3, 2e-3, 4e-3), the first seed, the full
   number of steps. The paper tunes "the maximum LR ... on training loss, using a logarithmic grid" (§4): the
   criterion is the training loss at the end (the mean of the logged training losses over the last 10% of the
   steps; a diverged run is the worst, ties go to the smaller lr). While a variant's best lr is the smallest
   (largest) it tried, the sweep adds that lr divided (multiplied) by `--lr-factor` (2), up to `--max-lrs` lrs, so
   that the best has a worse neighbour on both sides (`bracketed` in `results.json`).
2. **seeds**: every variant at its chosen lr and at Pre-LN's chosen lr (the paper's App. D.1 setting: "for our
   best (SAS and SAS-P) models, [the lr] was found to be 1e−3, which exactly matched that of the default Pre-LN"),
   every seed; with `--raptr`, pre_ln with RaPTr at equal steps and at equal layer FLOPs, and the full model with
   RaPTr's lr schedule.
3. **fine-tuning** (masked-LM families, `--finetune`, default `mr`): every variant's pretrained runs at its chosen
   lr fine-tuned with App. D.2's recipe on MR (Pang & Lee's sentence polarity data, fetched with pip; `finetune`),
   against pre_ln's architecture fine-tuned from scratch: Table 1's claim on a real labelled data set, not GLUE.
4. **step time**: every variant's training step at this shape, measured as `make bench` measures the paper shape
   (`timing`): the time axis of the loss-vs-time curves and of the claims at equal time.

**The depth family** (`--depths SHALLOW DEEP`, Fig. 6; `make reproduce-depth`, preset `codeparrot-depth`): Pre-LN,
SAS, SAS-P and V-SkipInit, MLP 2d, at both depths: at the shallow one the lr sweep above, at the deep one each
variant's sweep from its shallow best lr and that lr's two neighbours (grown the same way), then every seed at
each depth's chosen lr; βFF's init scales as 1/sqrt(depth) (App. D.1: 0.2 at 18 layers, 0.1 at 72). `depth`
checks Fig. 6's claims (each block improves with depth, V-SkipInit does not, SAS and SAS-P near-indistinguishable
from Pre-LN at both depths, V-SkipInit's gap grows) and reports the signal propagation at initialisation (the
tokens' cosine similarity and effective rank after every block). Its runs go to `<runs-dir>/<family>/L<depth>/`.

Modules: `planning` (the command's arguments and the runs they make, each a `TrainPlan`), `jobs` (training the
runs, reusing finished ones, in child processes with `--jobs`), `finetune`, `timing`, `analysis` (the sweep's choice, the
tables, the claims, RaPTr, signal propagation), `depth` (the depth family's claims) and `report` (`results.md` and the plots, from `results.json`
alone); `run` ties them together (`python -m experiments.reproduce`).

The output folder (default `docs/reproduction/<family>/`) gets `results.json` (every run's record, the sweep,
the measured step times, both settings' tables and claims), `results.md`, `lr_sweep.png`, `loss_vs_step.png`,
`loss_vs_time.png`, `gains.png`, `kurtosis.png` and `signal_propagation.png`. The runs go to
`<runs-dir>/<family>/lr<lr>/seed<k>/<variant>/`; a finished run leaves its record there (`record.json`, with its
plan), and a later command whose plan for that run is the same reuses it instead of training again (`--retrain`
refuses reuse). So an interrupted reproduction resumes at the run it stopped in. `--jobs N` trains each batch of
unfinished runs in N child processes (every N-th run of a queue file each, torch threads split between them, logs
in `<runs-dir>/<family>/<batch>-<i>.log`), then this process summarises.

Paper scale on a GPU: `python -m experiments.reproduce --preset codeparrot` (the `codeparrot-<block>` presets:
18x768, their steps and batch, the real CodeParrot data) or `--preset crammed-bert`.
"""
