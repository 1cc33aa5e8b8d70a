"""How a rank's process ends: at once, without Python's interpreter shutdown.

When a rank returns from its last collective, torch's gloo worker threads may not yet have
let go of that collective's work. A core dump of a rank that died with "terminate called
without an active exception" (SIGABRT, about once in 300 CPU launches on 2 busy cores)
shows how it ends: the main thread is already in Py_FinalizeEx when a `pt_gloo_runloop`
thread destroys the last all_gather's work, whose tensors are Python objects; releasing them
needs the GIL, CPython (3.11, 3.12) ends a thread that asks for the GIL during shutdown with
pthread_exit, and unwinding that C++ thread calls std::terminate.

`dist.destroy_process_group()` would join those threads first, but in torch 2.13 a
DistributedDataParallel model keeps a reference to its process group after the model is gone,
so the threads outlive it. A rank therefore flushes its output and ends with os._exit: no
Python runs after its last line of work, and nothing races with threads it cannot join. Files
are closed by then (train.py closes the ledger in a `finally`); the kernel frees the rest.

The exception a run ended with is held until then too. Its traceback holds train()'s frame, and
that frame the DDP model, whose Reducer holds the last reference to the gloo process group once
train.py destroyed it: freeing the exception (which `except ... as` does at the end of its
clause) runs the group's destructor, which joins gloo's threads holding the GIL, while one of
them waits for the GIL to release the last collective's Python objects. A deadlock: both ranks of
a run whose loss went NaN hung there, about once in 40 runs on 2 busy cores (py-spy: the main
thread in ~ProcessGroupGloo under pybind11's dealloc at the except clause, a pt_gloo thread in
gil_scoped_acquire under ~AsyncWork).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import NoReturn

from .errors import stacks_on_signal

# The exception the run ended with, with its traceback's frames: held until os._exit (see above).
HELD: list[BaseException] = []


def exit_code(done: SystemExit) -> int:
    """The exit status Python itself would give for this SystemExit."""
    if done.code is None:
        return 0
    if isinstance(done.code, int):
        return done.code
    print(done.code, file=sys.stderr)
    return 1


def run_then_exit(main: Callable[[], object]) -> NoReturn:
    """Run `main` (a CLI entry point, which ends with SystemExit), then end the process at once."""
    stacks_on_signal()  # a rank that hangs says where, asked (errors.STACKS_SIGNAL)
    try:
        main()
        code = 0
    except SystemExit as done:
        HELD.append(done)
        code = exit_code(done)
    except BaseException as failed:  # a bug, or Ctrl-C: printed as Python would, then the same exit status
        HELD.append(failed)
        sys.excepthook(*sys.exc_info())
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
