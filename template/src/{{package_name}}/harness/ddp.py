"""The DDP side of training: joining the process group, checking the nodes' layout, and the
collectives the loop needs (sums over the ranks, one set of buffers, the replicas' agreement)."""

from __future__ import annotations

import os
import socket

import torch
import torch.distributed as dist

from .collectives import gather_objects, waited
from .errors import DataError
from .run_folder import NODE_RANK_VARIABLE


def init_distributed() -> tuple[int, int, torch.device]:
    """Join the torchrun process group: nccl with one GPU per rank, else gloo on CPU."""
    if "RANK" not in os.environ:  # plain `python -m`: a group of one
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="29555")
    if torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    return dist.get_rank(), dist.get_world_size(), device


def epoch_voice() -> str | None:
    """How this rank's epoch line begins, None where it prints none. One node: rank 0 prints it. Several:
    the first rank of every node, after `node N: ` (N its NODE_RANK), so that each node's log (its SLURM
    output) shows the run going on; rank 0, which torchrun may put on any node, is not always node 0's."""
    if int(os.environ.get("GROUP_WORLD_SIZE", "1")) == 1:
        return "" if dist.get_rank() == 0 else None
    if os.environ.get("LOCAL_RANK") != "0":
        return None
    return f"node {os.environ.get(NODE_RANK_VARIABLE, '0')}: "


def check_layout() -> None:
    """Every node was started with its own NODE_RANK and the same NPROC; DataError on every rank.

    Checked by the ranks once torchrun's rendezvous has gathered them, from what each node's
    launcher was given: the rendezvous itself numbers the nodes and accepts any number of ranks
    per node, so two nodes with one NODE_RANK, or with different NPROC, would otherwise train, on
    a world size the check of the data before the launch did not see. One all_gather, so every
    rank sees the same and every node ends with the same line.
    """
    mine = (
        int(os.environ.get("GROUP_RANK", "0")),
        os.environ.get(NODE_RANK_VARIABLE, "0"),
        int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
        socket.gethostname(),
    )
    everyone = gather_objects(mine)
    nodes = {group: (node_rank, nproc, host) for group, node_rank, nproc, host in everyone}
    by_rank: dict[str, list[str]] = {}
    for node_rank, _, host in nodes.values():
        by_rank.setdefault(node_rank, []).append(host)
    for node_rank, hosts in by_rank.items():
        if len(hosts) > 1:
            raise DataError(
                f"{len(hosts)} nodes were started with NODE_RANK={node_rank} (on {', '.join(sorted(hosts))}): "
                "give every node its own NODE_RANK, 0 .. NNODES-1"
            )
    if len({nproc for _, nproc, _ in nodes.values()}) > 1:
        given = ", ".join(
            f"node {node_rank} ({host}) NPROC={nproc}" for node_rank, nproc, host in sorted(nodes.values())
        )
        raise DataError(f"the nodes were started with different NPROC ({given}): start every node with the same NPROC")


def all_sum(values: list[float], device: torch.device) -> list[float]:
    """`values` summed over the ranks (a collective), or as they are in one process without torch.distributed
    (evaluate.py, a test): a recipe's held-out score is written once for both."""
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    if dist.is_initialized():
        waited(dist.all_reduce(tensor, async_op=True))
    return tensor.tolist()


@torch.no_grad()
def check_replicas_agree(model: torch.nn.Module, world_size: int) -> None:
    """Every rank must end with the same parameters, because DDP averaged every gradient. A
    forward pass that bypasses the DDP wrapper (`model.module(x)`) trains each rank on its own
    data alone, and is caught here instead of producing a silently worse model."""
    values = torch.cat([p.detach().flatten().double().cpu() for p in model.parameters()])
    weights = torch.rand(len(values), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    fingerprint = torch.stack([values.sum(), (values * values).sum(), (values * weights).sum()])
    fingerprints = [torch.zeros(3, dtype=torch.float64) for _ in range(world_size)]
    waited(dist.all_gather(fingerprints, fingerprint, async_op=True))
    if not all(torch.isfinite(f).all() for f in fingerprints):  # NaN never equals NaN: not a DDP fault
        raise DataError(
            "the parameters are not finite (NaN or inf) at the end of the run: training diverged; lower --lr "
            "(or add --warmup-steps or --clip-grad-norm), and check the data's values"
        )
    if any(not torch.equal(f, fingerprints[0]) for f in fingerprints):
        raise RuntimeError(
            "ranks ended with different parameters: gradients were not synchronised "
            "(does the forward pass go through the DistributedDataParallel wrapper?)"
        )


@torch.no_grad()
def broadcast_buffers(model: torch.nn.Module) -> None:
    """Rank 0's buffers (BatchNorm's running statistics) on every rank. DDP broadcasts them at
    the start of each forward, but each rank then updates them with its own batch: after the
    last step they differ by that batch. Evaluated and saved, they must be one set."""
    for buffer in model.buffers():
        waited(dist.broadcast(buffer, src=0, async_op=True))
