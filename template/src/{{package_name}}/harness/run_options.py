"""The run's options (train.sh's "Run" panel): what to train on and for how long, where the run
folder, the checkpoints and the ledger go, and when to log and stop. harness/options.py makes
each field an option, as it does the recipe's; config.json records them, a resume does not
check them (a resumed run may train for more epochs, or log more often)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from .errors import PACKAGE, DataError, checked_location, checked_path
from .options import REQUIRED, option


@dataclass(frozen=True)
class Run:
    data: str = option(
        REQUIRED,
        f"Prepared data set: where `python -m {PACKAGE}.prep ... --out` wrote it (docs/data.md: the places it may be)",
        parser=checked_location,
    )
    epochs: int = option(10, "Epochs to train")
    ledger: Path | None = option(None, "Write the sample ledger here (rank{r}.jsonl)", parser=checked_path)
    run_dir: Path | None = option(
        None, "The run folder (config.json, metrics.jsonl, checkpoints/); default: runs/<time>", parser=checked_path
    )
    checkpoint_every: int = option(0, "Also write a checkpoint every N steps (0: at the end of each epoch only)")
    log_every: int = option(0, "Also add the epoch's loss so far to metrics.jsonl every N steps (0: at its end only)")
    resume: bool = option(
        False,
        "Go on from the newest checkpoint of --run-dir (default: the newest run in runs/); "
        "a run folder that holds a checkpoint is always resumed",
        names=("--resume",),
    )
    stop_after_steps: int = option(0, "Write a checkpoint and stop after this many steps (0: run all --epochs)")

    def check(self) -> None:
        """Refuse options no run can use, before any process starts; DataError names the fix."""
        if self.epochs < 0:
            raise DataError(f"--epochs {self.epochs}: pass 0 or more")
        if self.ledger is not None and self.ledger.exists() and not self.ledger.is_dir():
            raise DataError(f"--ledger {self.ledger} is a file: pass a folder (it holds one rankN.jsonl per rank)")
        if self.run_dir is not None and self.run_dir.exists() and not self.run_dir.is_dir():
            raise DataError(f"--run-dir {self.run_dir} is a file: pass a folder")
        for name in ("checkpoint_every", "log_every", "stop_after_steps"):
            if getattr(self, name) < 0:
                raise DataError(f"--{name.replace('_', '-')} {getattr(self, name)}: pass 0 or a number of steps")

    def options(self) -> dict:
        """Every field, as config.json records it."""
        return {name: str(value) if isinstance(value, Path) else value for name, value in asdict(self).items()}
