"""The variants of the template in one place: backends, samplers, which pairs fit, the defaults.

copier.yml asks the same questions; tests/test_variants.py checks that its choices, its
default and its validator agree with this module, so that the rendering fixture
(conftest.py), the mutants and noxfile.py all read the pairing rule from here.
"""

from __future__ import annotations

# Map-style backends read any sample by its position; the streaming one reads tar shards in order.
MAP_STYLE_BACKENDS = ("memory", "files", "arrow")
STREAMING_BACKENDS = ("webdataset",)
BACKENDS = MAP_STYLE_BACKENDS + STREAMING_BACKENDS

MAP_STYLE_SAMPLERS = ("global", "block", "sequential")
STREAMING_SAMPLERS = ("shard_buffer",)
SAMPLERS = MAP_STYLE_SAMPLERS + STREAMING_SAMPLERS
SHUFFLING_SAMPLERS = ("global", "block")  # the map-style samplers that shuffle


def samplers_of(backend: str) -> tuple[str, ...]:
    """The samplers that fit a backend, its default first (the pairing rule)."""
    return STREAMING_SAMPLERS if backend in STREAMING_BACKENDS else MAP_STYLE_SAMPLERS


def fits(backend: str, sampler: str) -> bool:
    return backend in BACKENDS and sampler in samplers_of(backend)


DEFAULT_BACKEND = "arrow"
DEFAULT_SAMPLER = {backend: samplers_of(backend)[0] for backend in BACKENDS}
DEFAULT = (DEFAULT_BACKEND, DEFAULT_SAMPLER[DEFAULT_BACKEND])

# Every pair that renders: map-style backends first, each backend's default sampler first.
COMBINATIONS = [(backend, sampler) for backend in BACKENDS for sampler in samplers_of(backend)]

# The task: a third axis, not multiplied into the combinations. Each task other than the default
# renders once, on the backend where it matters most (contrastive: image-text shards, the form of
# LAION and CC3M; segmentation: image + mask rows), and runs the tests that its task changes.
TASKS = ("classification", "contrastive", "segmentation")
DEFAULT_TASK = "classification"
TASK_RENDERS = {"contrastive": ("webdataset", "shard_buffer"), "segmentation": ("arrow", "global")}
# The pairs whose projects the template's tests run (their suites and mutants): every backend with
# its default sampler, and every sampler with the default backend. A map-style backend's loader
# reads the positions the plan gives it, whatever sampler made them: no file of a backend or of the
# loader uses the sampler answer, and the sampler's files use no backend answer. So each other pair
# (files or memory with block or sequential) is made of files that one of these projects holds and
# tests, byte for byte apart from the words that name the pair
# (test_generated_suites.test_a_pair_left_untested_holds_only_files_of_tested_pairs); its suite
# would test the same code again: 4 suites and 24 mutants, 174 of the 2,900 worker-seconds of one measured CI.
TESTED = [
    (backend, sampler)
    for backend, sampler in COMBINATIONS
    if backend == DEFAULT_BACKEND or sampler == DEFAULT_SAMPLER[backend]
]
UNTESTED = [pair for pair in COMBINATIONS if pair not in TESTED]

# Every project the template's tests run: each tested pair with the default task, then each other
# task's one render. (backend, sampler, task).
RENDERS = [(backend, sampler, DEFAULT_TASK) for backend, sampler in TESTED] + [
    (*TASK_RENDERS[task], task) for task in TASKS if task != DEFAULT_TASK
]
