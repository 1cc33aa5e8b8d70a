"""Mutants of issue 19 (reliability): the run folder's lock, the rendezvous timeout, the layout
check of the nodes and what is restarted. Each is killed by the generated test named in
`only_test` (verified by hand: applied to a render, that test fails; restored, it passes)."""

from __future__ import annotations

from mutants_framework import Mutant, one_render

FORKED = "tests/test_launch.py::test_a_rank_forked_from_the_launcher_starts_as_a_new_interpreter_would"
# save() and newest_readable() at the function level; test_resume's run on a small disk (processes)
# sees these mistakes too, as a restart and a traceback, or a run that stops
CHECKPOINTS = "tests/test_recipe.py::test_an_unreadable_newest_checkpoint_is_passed_over_and_a_full_disk_is_one_error_naming_the_fix"
KILLED = "tests/test_launch.py::test_a_killed_rank_is_named_in_one_line_and_the_others_stop_without_a_traceback"
WORKER_KILLED = "tests/test_launch.py::test_a_killed_dataloader_worker_is_named_by_its_signal_and_fix_and_restarted"
KILLED_IN_THE_STEP = (
    "tests/test_launch.py::test_a_worker_killed_while_its_rank_steps_is_named_even_when_the_step_wraps_the_error"
)
# The workers' excepthook (errors.quiet_when_the_rank_dies): the loader installs it, and what it hides.
HOOKED = "tests/test_launch.py::test_the_loaders_workers_run_with_the_hook_that_is_quiet_when_their_rank_dies"
QUIET = "tests/test_launch.py::test_a_worker_says_nothing_when_its_rank_dies_while_it_hands_over_a_batch"
ORPHANED = "tests/test_launch.py::test_a_dataloader_worker_ends_with_its_rank_even_one_whose_rank_ended_as_it_started"
KEPT_ALIVE = (
    "tests/test_launch.py::test_the_work_of_each_collective_is_kept_after_it_and_let_go_by_a_collective_kept_s_later"
)
OBJECTS = (
    "tests/test_launch.py::test_the_object_collectives_give_every_rank_each_ranks_value_in_order_and_the_sources_own"
)
EVERY_COLLECTIVE = "tests/test_launch.py::test_every_collective_of_the_project_is_waited_for_and_kept_and_none_is_torchs_object_collective"
# The harness (launch, run folder, checkpoints) and train.py are the same for every backend.
LAUNCH_ONLY = one_render("memory")

MUTANTS = [
    # Ranks forked from the launcher (no CUDA): each must start as torchrun's new interpreter would.
    Mutant(
        "forked-rank-holds-the-lock",
        "a forked rank keeps the launcher's run-folder lock open: a killed launcher's run stays locked "
        "until its ranks and their workers are gone",
        function="as_new_interpreter",
        edits=(("        os.close(descriptor)\n", "        pass\n"),),
        **LAUNCH_ONLY,
        only_test=FORKED,
    ),
    Mutant(
        "forked-rank-in-launchers-group",
        "a forked rank stays in the launcher's process group: torchrun cannot stop it with its workers",
        function="as_new_interpreter",
        edits=(("    os.setsid()", "    pass"),),
        **LAUNCH_ONLY,
        only_test=FORKED,
    ),
    Mutant(
        "forked-rank-keeps-launchers-handlers",
        "a forked rank keeps the signal handlers of the launcher (torchrun's), not a new interpreter's",
        function="as_new_interpreter",
        edits=(("        signal.signal(number, handler)\n", "        pass\n"),),
        **LAUNCH_ONLY,
        only_test=FORKED,
    ),
    Mutant(
        "forked-rank-keeps-launchers-tmpdir",
        "a forked rank keeps the TMPDIR tempfile read in the launcher: its workers' sockets land outside "
        "the ranks' folder, which is removed after them",
        function="as_new_interpreter",
        edits=(("    tempfile.tempdir = None", "    pass"),),
        **LAUNCH_ONLY,
        only_test=FORKED,
    ),
    Mutant(
        "forked-ranks-share-numpy-state",
        "forked ranks draw from a copy of the launcher's numpy random state: every rank draws the same",
        function="as_new_interpreter",
        edits=(("    np.random.seed()", "    pass"),),
        **LAUNCH_ONLY,
        only_test=FORKED,
    ),
    Mutant(
        "forked-rank-held-before-its-group",
        "the launcher holds a forked rank before the rank leads its own process group: a Ctrl-C while "
        "the ranks start makes torchrun signal a group that does not exist yet, and the launcher fails "
        "with a traceback",
        function="fork_as_rank",
        edits=(("        os.read(grouped_read, 1)", "        pass"),),
        **LAUNCH_ONLY,
        only_test=FORKED,
    ),
    Mutant(
        "forked-rank-walks-launchers-heap",
        "the launcher's objects are not frozen for the fork: every garbage collection of a rank walks "
        "torch's few hundred thousand objects and copies their pages into the rank",
        function="fork_as_rank",
        edits=(("    gc.freeze()\n", ""),),
        **LAUNCH_ONLY,
        only_test=FORKED,
    ),
    Mutant(
        "signals-come-while-forking",
        "signals are not held while the launcher forks a rank: a Ctrl-C handled in os.fork's callbacks "
        "is dropped, the ranks train on and the launcher hangs on logging's lock",
        function="HeldSignals.__init__",
        edits=(
            (
                "            signal.signal(number, lambda number, frame: self.came.append(number))\n",
                "            pass\n",
            ),
        ),
        **LAUNCH_ONLY,
        only_test="tests/test_launch.py::test_a_signal_that_comes_while_the_launcher_forks_a_rank_stops_the_launcher_and_the_rank",
    ),
    Mutant(
        "compile-cache-in-users-tmpdir",
        "the launcher imports torch._dynamo for its forked ranks with its own TMPDIR: torch's compile "
        "cache folder is left in the user's TMPDIR after every run",
        function="fork_ranks",
        edits=(
            (
                "    launchers_tempdir, tempfile.tempdir = tempfile.tempdir, None\n",
                "    launchers_tempdir = tempfile.tempdir\n",
            ),
        ),
        **LAUNCH_ONLY,
        only_test="tests/test_shell_scripts.py::test_the_gpu_smoke_test_reports_the_device_and_both_rates",
    ),
    # Another torch: what the launcher uses of torchrun's private internals must be there, as in 2.13.
    Mutant(
        "torchrun-internal-gone-accepted",
        "the check of torchrun's private internals takes one that is gone for present: under another "
        "torch the launcher patches or forks through it and fails with a traceback, instead of warning "
        "and running torchrun alone",
        function="torchrun_internals_missing",
        edits=(("            found = False\n", "            found = True\n"),),
        **LAUNCH_ONLY,
        only_test="tests/test_launch.py::test_a_torchrun_internal_that_is_gone_or_changed_is_named",
    ),
    Mutant(
        "lock-ignored",
        "a second train.sh on one run folder is not refused: two runs write one folder",
        function="lock",
        edits=(("            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)", "            pass"),),
        **LAUNCH_ONLY,
        only_test="tests/test_launch.py::test_a_lock_left_by_a_dead_process_is_taken_over_and_a_held_one_names_its_holder",
    ),
    Mutant(
        "rdzv-timeout-unset",
        "RDZV_TIMEOUT is not passed to the rendezvous: a node that never arrives is waited for 600 s",
        function="rendezvous_arguments",
        edits=((',join_timeout={layout.rdzv_timeout}"', '"'),),
        **LAUNCH_ONLY,
        # what torchrun makes of the arguments; with the mutant, the process test below it waits out
        # its own bound (RDZV_TIMEOUT + 20 s) before it fails
        only_test="tests/test_multinode.py::test_torchrun_waits_rdzv_timeout_for_the_nodes",
    ),
    Mutant(
        "preflight-of-one-node",
        "the data are checked for one node's ranks, not every node's: a run too big for them starts",
        function="start",
        edits=(
            ("preflight(module, layout.nnodes * layout.nproc_per_node,", "preflight(module, layout.nproc_per_node,"),
        ),
        **LAUNCH_ONLY,
        only_test="tests/test_multinode.py::test_the_data_is_checked_for_the_ranks_of_every_node_before_any_rank_starts",
    ),
    Mutant(
        "layout-unchecked",
        "nodes with different NPROC (or one NODE_RANK) train on a world size nobody asked for",
        function="train.main",
        edits=(("            check_layout()\n", ""),),
        **LAUNCH_ONLY,
        only_test="tests/test_multinode.py::test_two_nodes_with_one_node_rank_or_different_nproc_are_refused_on_every_node",
    ),
    Mutant(
        "tmpdir-length-unchecked",
        "a TMPDIR too long for the DataLoader workers' sockets is not refused: every worker fails and the ranks hang",
        function="start",
        edits=(("    too_long = temporary_too_long(Path(tempfile.gettempdir()))\n", "    too_long = None\n"),),
        **LAUNCH_ONLY,
        only_test="tests/test_bad_inputs.py::test_a_bad_input_ends_with_one_error_line_and_leaves_nothing_behind"
        "[train.sh: a TMPDIR too long for the workers' sockets]",
    ),
    Mutant(
        "bad-input-restarted",
        "a rank's bad input (a checkpoint of another model) is restarted like a crash",
        function="report_restarts",
        edits=(("                    self._remaining_restarts = 0", "                    pass"),),
        **LAUNCH_ONLY,
        only_test="tests/test_bad_inputs.py::test_a_bad_input_ends_with_one_error_line_and_leaves_nothing_behind"
        "[train.sh: a checkpoint of another model]",
    ),
    Mutant(
        "full-disk-restarted",
        "a checkpoint that cannot be written on a full disk is a crash: a traceback and a restart",
        function="save",
        edits=(("        if err.errno not in DISK_ERRORS:\n            raise\n", "        raise\n"),),
        **LAUNCH_ONLY,
        only_test=CHECKPOINTS,
    ),
    Mutant(
        "unreadable-checkpoint-stops",
        "an unreadable newest checkpoint stops the run instead of resuming from the one before",
        function="newest_readable",
        edits=(("            unreadable.append(str(err))\n            continue\n", "            raise\n"),),
        **LAUNCH_ONLY,
        only_test=CHECKPOINTS,
    ),
    # Issue 42: what a node says while it waits for the others, and while it trains.
    Mutant(
        "wait-line-names-no-node",
        "a node that waits for the others says how many are missing but not which NODE_RANK",
        function="waiting_line",
        edits=(("    which = f\" (NODE_RANK {', '.join(map(str, missing))} missing)\"\n", '    which = ""\n'),),
        **LAUNCH_ONLY,
        # the process test (test_multinode's never-arrives run) sees it too
        only_test="tests/test_arrivals.py",
    ),
    Mutant(
        "other-nodes-print-no-epoch-line",
        "on several nodes only rank 0 prints the epoch line: node 1's log shows nothing during a whole run",
        function="epoch_voice",
        edits=(('    if int(os.environ.get("GROUP_WORLD_SIZE", "1")) == 1:\n', "    if True:\n"),),
        **LAUNCH_ONLY,
        # the process tests (the SLURM job's and the killed rank's runs) see it too
        only_test="tests/test_multinode.py::test_on_several_nodes_the_first_rank_of_every_node_prints_the_epoch_line_after_its_node_rank",
    ),
    Mutant(
        "failed-start-leaves-empty-run-folder",
        "a run whose ranks fail before it begins (a bad payload the memory backend reads at start) leaves the "
        "empty run folder its launcher made: runs/ fills with folders of runs that never ran",
        function="unlock",
        edits=(("    if made:\n", "    if False:\n"),),
        **one_render("memory"),
        only_test="tests/test_map_style_refusals.py",
    ),
    # Issue 43: full disks outside the checkpoint's path (the ledger, prep's --out).
    Mutant(
        "full-ledger-disk-restarted",
        "a ledger line that a full disk refuses is a crash: a traceback and a restart, where a checkpoint's is one line",
        function="LedgerWriter.disk_errors_reported",
        edits=(
            (
                '        return disk_errors_reported(f"the ledger {self.directory}", LEDGER_FIX)\n',
                "        return contextlib.nullcontext()\n",
            ),
        ),
        **LAUNCH_ONLY,
        # the launch (test_bad_inputs' "train.sh: the ledger's disk full") sees it too, as two lines
        only_test="tests/test_ledger.py",
    ),
    Mutant(
        "full-ledger-leaves-half-line",
        "the part of a ledger line that fitted on a full disk stays in the file: a resume reads a garbled line",
        function="LedgerWriter.write",
        edits=(("                    os.ftruncate(self.file.fileno(), self.end)", "                    pass"),),
        **LAUNCH_ONLY,
        only_test="tests/test_ledger.py",
    ),
    Mutant(
        "full-prep-disk-traceback",
        "prep onto a full disk ends in a traceback, not one line naming --out and the fix",
        function="prepare",
        edits=(
            (
                '    with disk_errors_reported(out, "or pass an --out on a disk with room", WRITE_ERRORS):',
                "    with contextlib.nullcontext():",
            ),
        ),
        **one_render("arrow"),
        only_test="tests/test_bad_inputs.py::test_a_bad_input_ends_with_one_error_line_and_leaves_nothing_behind"
        "[prep: --out on a full disk]",
    ),
    Mutant(
        "prep-array-file-unclaimed",
        "prep's labels are a memory map of a sparse file: on a disk that fills, a store into it kills prep with "
        "SIGBUS (no message, the partial folder left) instead of an error where the file is made",
        function="array_file",
        edits=(
            ("            os.posix_fallocate(file.fileno(), 0, os.fstat(file.fileno()).st_size)", "            pass"),
        ),
        **one_render("arrow"),
        only_test="tests/test_prep.py::test_an_array_prep_fills_through_a_memory_map_claims_its_disk_where_it_is_made",
    ),
    # A killed DataLoader worker (issue 43): one line naming it, the signal and the fix; restarted when allowed.
    Mutant(
        "killed-worker-traceback",
        "a rank lets torch's error about its killed DataLoader worker through: a traceback, and the launcher "
        "names only the rank's exit code 1, not the worker, the signal or the fix",
        function="train.main",
        edits=(
            (
                "                report_ending(rank, ending)\n                raise SystemExit(1) from None\n",
                "                raise\n",
            ),
        ),
        **LAUNCH_ONLY,
        only_test=f"{KILLED}[worker]",
    ),
    Mutant(
        "killed-worker-signal-unread",
        "only the error raised last is read: torch's report of a killed worker that the step wrapped in its own "
        "error (raise ... from err, as a recipe's error handling may) ends the rank with a traceback",
        function="worker_killed",
        edits=(("    for seen in raised_from(err):", "    for seen in (err,):"),),
        **LAUNCH_ONLY,
        only_test=KILLED_IN_THE_STEP,
    ),
    Mutant(
        "killed-worker-handlers-report-unread",
        "torch's SIGCHLD handler's report, which names the signal and is raised alone where the rank runs "
        "outside its loader (its step), is not read: the rank ends with a traceback",
        function="worker_killed",
        edits=(("(words := reported_death(seen) or checked_death(seen))", "(words := checked_death(seen))"),),
        **LAUNCH_ONLY,
        only_test=KILLED_IN_THE_STEP,
    ),
    Mutant(
        "killed-worker-checked-death-unread",
        "torch's report after its own check reaped the worker ('exited unexpectedly', its SIGCHLD handler not yet "
        "run, as on busy cores) is not read: the rank ends with a traceback (seen in a CI run beside two suites)",
        function="worker_killed",
        edits=(("(words := reported_death(seen) or checked_death(seen))", "(words := reported_death(seen))"),),
        **LAUNCH_ONLY,
        only_test="tests/test_launch.py::test_a_worker_that_torchs_own_check_finds_dead_is_named_by_its_signal",
    ),
    Mutant(
        "killed-worker-first-worker-named",
        "torch's check's report is read from the loader's first worker, not from its list of the dead: a rank "
        "whose second worker was killed names the first (or nothing, the first alive)",
        function="checked_death",
        edits=(
            (
                '        for worker in frame.f_locals.get("failed_workers", ()):',
                '        for worker in getattr(frame.f_locals.get("self"), "_workers", ())[:1]:',
            ),
        ),
        **LAUNCH_ONLY,
        only_test="tests/test_launch.py::test_a_worker_that_torchs_own_check_finds_dead_is_named_by_its_signal",
    ),
    Mutant(
        "killed-worker-oom-fix-for-every-signal",
        "a worker killed by any signal is told the out-of-memory fix (fewer --num-workers, a smaller --batch-size), "
        "which only SIGKILL, the out-of-memory killer's, calls for",
        function="killed_words",
        edits=(("    if number == signal.SIGKILL:", "    if True:"),),
        **LAUNCH_ONLY,
        only_test="tests/test_launch.py::test_a_worker_that_torchs_own_check_finds_dead_is_named_by_its_signal",
    ),
    Mutant(
        "killed-worker-socket-error-unread",
        "a DataLoader worker killed while it hands over a batch (its socket's error comes before torch sees the "
        "death) is not recognised: the rank ends with a ConnectionResetError traceback",
        function="worker_killed",
        edits=(("    if raised_in_the_loader(err):", "    if False:"),),
        **LAUNCH_ONLY,
        only_test="tests/test_launch.py::test_a_socket_error_in_the_loader_is_a_killed_worker_only_when_a_child_was_killed",
    ),
    Mutant(
        "killed-worker-report-during-the-wait-raised",
        "torch's report of the worker's death, raised by its SIGCHLD handler while the socket error's killed child "
        "is looked for, escapes: the rank ends with a RuntimeError traceback (seen on busy cores)",
        function="worker_killed",
        edits=(("        except RuntimeError as report:", "        except ZeroDivisionError as report:"),),
        **LAUNCH_ONLY,
        only_test="tests/test_launch.py::test_torchs_report_of_the_death_raised_while_the_socket_error_is_read_is_the_killed_worker",
    ),
    Mutant(
        "stacks-not-asked-for",
        "the launcher and its ranks print nothing on STACKS_SIGNAL (they die of it): a run that hangs says "
        "nowhere where it waits",
        function="stacks_on_signal",
        edits=(("    faulthandler.register(STACKS_SIGNAL, all_threads=True)", "    return"),),
        **LAUNCH_ONLY,
        only_test=f"{KILLED}[rank]",
    ),
    Mutant(
        "rank-anew-without-stacks",
        "a rank that torchrun starts anew (CUDA) does not ask for its stacks: it dies of STACKS_SIGNAL",
        function="run_then_exit",
        edits=(("    stacks_on_signal()  # a rank that hangs says where", "    pass  # a rank that hangs says where"),),
        **LAUNCH_ONLY,
        only_test="tests/test_launch.py::test_a_rank_started_anew_prints_its_stacks_when_asked_and_goes_on",
    ),
    Mutant(
        "worker-outlives-its-rank",
        "a DataLoader worker does not ask to end with its rank: one whose rank died as it started polls for ever",
        function="quiet_when_the_rank_dies",
        edits=(("    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)\n", ""),),
        **LAUNCH_ONLY,
        only_test=f"{ORPHANED}[after the worker started]",
    ),
    Mutant(
        "worker-of-an-ended-rank-goes-on",
        "a DataLoader worker whose rank ended before it asked to end with it goes on: nothing will end it",
        function="quiet_when_the_rank_dies",
        edits=(("    if os.getppid() != rank.pid:", "    if False:"),),
        **LAUNCH_ONLY,
        only_test=f"{ORPHANED}[before the worker asked]",
    ),
    Mutant(
        "collective-work-left-to-gloo",
        "the work of a collective is not kept after it: gloo's worker thread destroys it, and a DataLoader "
        "worker forked meanwhile hangs forever on CPython before 3.11.10 (gh-112275)",
        function="waited",
        edits=(("    KEPT.append((now, work))\n", ""),),
        **LAUNCH_ONLY,
        only_test=KEPT_ALIVE,
    ),
    Mutant(
        "torchs-object-collective",
        "the checkpoint's gather of every rank's random states is torch's all_gather_object, whose tensors no "
        "rank can keep",
        function="gather_ranks",
        edits=(
            (
                '    return gather_objects({"rng": rng_state(), **kept})\n',
                '    ranks = [None] * dist.get_world_size()\n    dist.all_gather_object(ranks, {"rng": rng_state(), **kept})\n'
                "    return ranks\n",
            ),
        ),
        **LAUNCH_ONLY,
        only_test=EVERY_COLLECTIVE,
    ),
    Mutant(
        "decision-refused-on-its-source-alone",
        "decided_by raises the deciding rank's DataError on that rank alone: every other rank takes the "
        "error's message for the choice (a run folder or a checkpoint named by an error line)",
        function="decided_by",
        edits=(("    if not chosen:\n", "    if not chosen and dist.get_rank() == src:\n"),),
        **LAUNCH_ONLY,
        only_test=OBJECTS,
    ),
    Mutant(
        "rank-death-printed-by-its-worker",
        "the loader's DataLoader workers run without quiet_when_the_rank_dies: a rank killed while it takes a "
        "batch leaves its worker's resource_sharer traceback beside the launcher's one line",
        function="RankLoader.epoch",
        edits=(("            worker_init_fn=quiet_when_the_rank_dies,\n", ""),),
        **LAUNCH_ONLY,
        only_test=HOOKED,
    ),
    Mutant(
        "rank-death-hook-prints-it",
        "the workers' excepthook prints the resource_sharer's reset connection as any other error",
        function="unless_the_rank_died",
        edits=(("    if not (handing_over and", "    if True or not (handing_over and"),),
        **LAUNCH_ONLY,
        only_test=QUIET,
    ),
    Mutant(
        "rank-death-hook-hides-every-reset",
        "the workers' excepthook hides every ConnectionError that reaches it, not only the resource_sharer's "
        "handover to its rank: a worker thread's own failure goes unsaid",
        function="unless_the_rank_died",
        edits=(("    handing_over = tb is not None and", "    handing_over = True or"),),
        **LAUNCH_ONLY,
        only_test=QUIET,
    ),
    Mutant(
        "killed-worker-ends-restarts",
        "a rank's words of how it ended are read as a cause (bad data or options): a killed DataLoader worker "
        "ends the run at once, with the restarts allowed left unused",
        function="reported_causes",
        edits=(("line.startswith((CONSEQUENCE, ENDED))", "line.startswith(CONSEQUENCE)"),),
        **LAUNCH_ONLY,
        only_test=WORKER_KILLED,
    ),
    Mutant(
        "killed-worker-named-by-exit-code",
        "the launcher names a rank by its exit code though the rank said how it ended: 'rank 1 failed with "
        "exit code 1; its traceback is above', and there is no traceback",
        function="what_ended",
        edits=(("    if rank in endings:", "    if False:"),),
        **LAUNCH_ONLY,
        only_test=WORKER_KILLED,
    ),
    Mutant(
        "killed-worker-socket-error-passed-through",
        "train.main catches RuntimeError and EOFError but not OSError: a DataLoader worker killed while it hands "
        "over a batch (the loader's read fails with ConnectionResetError first) ends its rank with a traceback",
        function="train.main",
        edits=(
            (
                "        except (RuntimeError, OSError, EOFError) as err:",
                "        except (RuntimeError, EOFError) as err:",
            ),
        ),
        **LAUNCH_ONLY,
        only_test="tests/test_launch.py::"
        "test_a_rank_whose_loader_read_fails_with_a_socket_error_after_its_worker_was_killed_ends_in_one_line",
    ),
]
