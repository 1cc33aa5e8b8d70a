"""DDP training on prepared data; launched by ./train.sh (torchrun), one process per rank.

    NPROC=2 ./train.sh --data data --epochs 3 --ledger ledger

Its options come in groups, a panel each in --help: the run's (harness/run_options.py), the
recipe's (recipe.py: what is trained and how, the step included) and the reading's. This file is
the loop. Rank 0 logs loss, accuracy (training and held-out), the learning rate, samples/s and
the data wait (harness/tally.py) every epoch into the run folder (harness/run_folder.py:
config.json, metrics.jsonl, which `python -m <package>.report` draws, checkpoints/); with
--ledger DIR each rank writes DIR/rank{r}.jsonl, a line a step. A run folder that holds a
checkpoint is resumed (harness/checkpoint.py), on other sizes too.
"""

from __future__ import annotations

import os
from typing import Annotated

import torch
import torch.distributed as dist
import typer
from torch.nn.parallel import DistributedDataParallel

from .data.loader import RankLoader, check_data, rank_loaders
from .data.reading import Reading
from .harness.checkpoint import Position, restore, to_resume, write_checkpoint
from .harness.ddp import broadcast_buffers, check_layout, check_replicas_agree, epoch_voice, init_distributed
from .harness.errors import LOST_PEER_EXIT, lost_a_peer, report, report_ending, reported_as_one_line, worker_killed
from .harness.launcher_watch import end_with_launcher
from .harness.ledger import LedgerWriter
from .harness.options import check_resumable, options_of, resume_options
from .harness.progress import advance, steps_done
from .harness.rank_exit import run_then_exit
from .harness.run_folder import RunFolder, agreed_run_dir, config
from .harness.run_options import Run
from .harness.tally import Tally
from .recipe import METRIC, Recipe

app = typer.Typer(add_completion=False)


@app.command()
@options_of(run=Run, recipe=Recipe, reading=Reading)
def main(
    run: Run,  # one option per field (harness/options.py), each group a panel of --help
    recipe: Recipe,
    reading: Reading,  # how the data set is read (data/reading.py)
    preflight: Annotated[int, typer.Option(help="Only check the data for this many ranks, then exit", hidden=True)] = 0,
) -> None:
    options = {**run.options(), **recipe.options(), **reading.options()}  # config.json's record
    order = reading.order()  # what the data order depends on beside the recipe
    with reported_as_one_line():
        recipe.check()
        run.check()
        reading.check()
        if preflight:
            manifest_sha256 = check_data(run.data, reading=reading, world_size=preflight, batch_size=recipe.batch_size)
            if run.run_dir is not None:
                check_resumable(run.run_dir, recipe.options(), order, manifest_sha256)
            return
        if "TORCHELASTIC_RUN_ID" in os.environ:  # started by torchrun
            end_with_launcher()
        rank, world_size, device = init_distributed()
        try:
            check_layout()
            loader, heldout = rank_loaders(
                run.data, reading=reading, seed=recipe.seed, world_size=world_size, rank=rank,
                batch_size=recipe.batch_size, pin_memory=device.type == "cuda",
                image_size=recipe.image_size, augment=recipe.augment, tokenizer=recipe.text_tokenizer(),
                crop_scale_min=recipe.crop_scale_min,
            )  # fmt: skip
            folder = RunFolder(agreed_run_dir(run.run_dir, run.resume))
            train(run, recipe, loader, heldout, folder, device, options=options, order=order)
        except (RuntimeError, OSError, EOFError) as err:
            if ending := worker_killed(err):  # what a restart may mend: the launcher restarts, or names it
                report_ending(rank, ending)
                raise SystemExit(1) from None
            if not isinstance(err, RuntimeError) or not lost_a_peer(err):
                raise
            # Another rank died (its own message says why) and torchrun is stopping this one:
            # a traceback here would only bury that message.
            report(f"error: rank {rank} stopped: another rank ended first ({err})"[:300], consequence=True)
            raise SystemExit(LOST_PEER_EXIT) from None
        finally:
            dist.destroy_process_group()


def train(run: Run, recipe: Recipe, loader: RankLoader, heldout, folder: RunFolder, device: torch.device, *,
          options: dict, order: dict) -> None:  # fmt: skip
    rank, world_size = dist.get_rank(), dist.get_world_size()
    run_config = config(options, run.data, loader.manifest_sha256, world_size)  # every rank takes part
    checked = resume_options(recipe.options(), order, run_config["manifest_sha256"])
    # The same initial weights on every rank (DDP would broadcast rank 0's anyway), the same every run.
    torch.manual_seed(recipe.seed)
    model = recipe.build_model(loader.example(), loader.manifest).to(device)
    optimizer = recipe.build_optimizer(model)
    schedule = recipe.build_schedule(optimizer, total_steps=run.epochs * loader.steps)
    parts = recipe.parts(model, optimizer, schedule)
    resumed = to_resume(folder.path, run.resume, checked)  # a run folder with a checkpoint is always resumed
    start, carried = restore(resumed, parts, seed=recipe.seed, rank=rank, world_size=world_size)
    tally = Tally(**carried)  # this rank's sums of the epoch (so far, when resumed) and the steps it ran
    model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    ledger = run.ledger and LedgerWriter(run.ledger, rank, world_size, (start.epoch, start.step) if resumed else None)
    if rank == 0:
        folder.start(run_config, resumed_at=start if resumed else None)
        print(f"{world_size} ranks x {loader.num_workers} workers x batch {recipe.batch_size}: {loader.steps} steps "
              f"per epoch; run folder {folder.path}", flush=True)  # fmt: skip
        if resumed:
            print(f"resuming at epoch {start.epoch} step {start.step} (checkpoint of {resumed['world_size']} ranks)")
    lr = optimizer.param_groups[0]["lr"]
    try:
        for epoch in range(start.epoch, run.epochs):
            done = start.done if epoch == start.epoch else ()
            first_step = steps_done(done)
            steps = first_step + loader.steps_left(epoch, done)
            for step, batch in tally.timed(enumerate(loader.epoch(epoch, done), start=first_step)):
                if ledger:
                    ledger.write(epoch, step, batch["key"], batch["y"].tolist() if "y" in batch else None)
                loss_sum, correct, lr = recipe.step(model, optimizer, schedule, on_device(batch, device))
                tally.add(loss=loss_sum, correct=correct, seen=len(batch["key"]), at=(epoch, step))
                stopping, next_step = tally.steps == run.stop_after_steps, step + 1
                if run.log_every and next_step % run.log_every == 0 and next_step < steps:
                    totals = tally.summary(world_size, device)  # every rank takes part
                    if rank == 0:
                        folder.log({"epoch": epoch, "step": next_step, **totals, "lr": lr})
                if next_step < steps and (stopping or run.checkpoint_every and next_step % run.checkpoint_every == 0):
                    here = Position.within(epoch, advance(done, next_step - first_step, world_size, loader.num_workers))
                    write_checkpoint(folder.checkpoints, here, model, parts, tally.kept(), checked)
                    if stopping:  # by --stop-after-steps, at the checkpoint just written
                        return stopped(folder, tally, f"at epoch {epoch} step {next_step}")
            line = end_of_epoch(epoch, steps, lr, model, tally, folder, device)  # then the checkpoint, then the
            write_checkpoint(folder.checkpoints, Position(epoch + 1, 0), model, parts, tally.kept(), checked)
            held_out(line, recipe, model, heldout, folder, device)  # held-out pass (why: held_out)
            if tally.steps == run.stop_after_steps and epoch + 1 < run.epochs:
                return stopped(folder, tally, f"at the end of epoch {epoch}")
    finally:  # also on the way out of a failed run: the lines written so far stay in the ledger
        if ledger:
            ledger.close()
    check_replicas_agree(model, world_size)
    if rank == 0:
        print(f"parameters identical on all {world_size} ranks", flush=True)


def end_of_epoch(epoch: int, steps: int, lr: float, model, tally: Tally, folder: RunFolder, device) -> dict:
    """The epoch's line over all ranks, in metrics.jsonl (rank 0) before its held-out figure; a new tally."""
    line = {"epoch": epoch, "steps": steps, **tally.summary(dist.get_world_size(), device), "lr": lr}
    tally.new_epoch()
    broadcast_buffers(model.module)  # one set of BatchNorm statistics, checkpointed and evaluated
    if dist.get_rank() == 0:
        folder.log({**line, f"heldout_{METRIC}": None})
    return line


def held_out(line: dict, recipe: Recipe, model, heldout, folder: RunFolder, device) -> None:
    """The held-out figure (recipe.score) into the epoch's line, after its checkpoint: a pass that fails (an
    endpoint lost) leaves the epoch saved and logged, its figure null (evaluate.py scores it), and a resume goes on."""
    figure = recipe.score(model.module, heldout, device) if heldout else float("nan")
    if (voice := epoch_voice()) is not None:  # every node's log shows its progress
        # ends in "<rate> samples/s" (scripts/gpu_smoke.sh reads it there) and its newline, in one write: a rank is
        # unbuffered (python -u) and the nodes share a log (srun), where print's two writes let lines run together
        print(f"{voice}epoch {line['epoch']}: loss {line['loss']:.4f}  train acc {line['train_accuracy']:.3f}  heldout "
              f"{METRIC} {figure:.3f}  lr {line['lr']:.3g}  data wait {100 * line['data_wait_fraction']:.0f}%  "
              f"{line['samples_per_s']:,.0f} samples/s\n", end="", flush=True)  # fmt: skip
    if dist.get_rank() == 0:
        folder.complete(line["epoch"], **{f"heldout_{METRIC}": figure if heldout else None})


def on_device(batch: dict, device: torch.device) -> dict:
    """The batch's tensors on `device` (pinned memory: copied while the step goes on); lists stay."""
    return {k: v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def stopped(folder: RunFolder, tally: Tally, where: str) -> None:
    if dist.get_rank() == 0:
        print(f"stopped after {tally.steps} steps {where}: train again with --run-dir {folder.path} to go on")


if __name__ == "__main__":
    # Ends the rank without the interpreter shutdown that races with gloo (rank_exit.py).
    run_then_exit(lambda: app(prog_name="./train.sh"))
