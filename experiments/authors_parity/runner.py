"""One process per run, resumable: a run is its job (written to `job.json` in its folder once it has finished) and the
files it must leave; `execute` runs what is not done, `--jobs` at a time, each after the runs it needs."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "build" / "authors-parity"


@dataclasses.dataclass
class Run:
    """One process: `cmd` with `job` written to `folder/job.json`; done when `outputs` exist for the same job."""

    name: str
    job: dict
    outputs: tuple[str, ...]
    cmd: list[str]
    after: tuple[str, ...] = ()

    def folder(self) -> Path:
        return BUILD / "runs" / self.name

    def done(self) -> bool:
        saved = self.folder() / "job.json"
        return (
            saved.is_file()
            and json.loads(saved.read_text()) == self.job
            and all((self.folder() / o).is_file() for o in self.outputs)
        )

    def record(self) -> dict:
        """The run's (first) output, read."""
        return json.loads((self.folder() / self.outputs[0]).read_text())


def execute(runs: list[Run], jobs: int) -> list[str]:
    """Run what is not done, `jobs` at a time, each after the runs it needs; returns the failures (one line each)."""
    runs = list({r.name: r for r in runs}.values())
    by_name = {r.name: r for r in runs}
    pending = [r for r in runs if not r.done()]
    print(f"{len(runs) - len(pending)} of {len(runs)} runs done before; {len(pending)} to run", flush=True)
    failures: list[str] = []
    finished: set[str] = {r.name for r in runs if r.done()}

    def one(run: Run) -> None:
        while any(a not in finished for a in run.after):
            if any(a in {f.split(":")[0] for f in failures} for a in run.after):
                failures.append(f"{run.name}: skipped (a run it needs failed)")
                return
            time.sleep(2)
        folder = run.folder()
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "job.json").unlink(missing_ok=True)
        job_file = folder / "job.pending.json"
        job_file.write_text(json.dumps(run.job, indent=1))
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
        started = time.time()
        with open(folder / "log.txt", "w") as log:
            rc = subprocess.run(
                [*run.cmd, str(job_file)], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT
            ).returncode
        if rc or not all((folder / o).is_file() for o in run.outputs):
            failures.append(f"{run.name}: exit {rc}; see {folder / 'log.txt'}")
            return
        job_file.rename(folder / "job.json")
        finished.add(run.name)
        print(f"{run.name}: {time.time() - started:.0f} s", flush=True)

    # the runs others need first
    order = sorted(pending, key=lambda r: (not any(r.name in o.after for o in by_name.values()), bool(r.after)))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, order))
    return failures
