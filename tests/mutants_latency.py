"""Mutants of the webdataset read path over a network (issue 21): several requests in flight,
samples handed on in plan order, the retry budget a time. Each was applied to a render by hand
and its test seen to fail."""

from mutants_framework import Mutant

WEBDATASET = {"backends": ("webdataset",), "samplers": ("shard_buffer",)}
IN_FLIGHT_TEST = "tests/test_http_faults.py::test_with_several_requests_in_flight_the_loader_delivers_exactly_the_epoch_plan"

MUTANTS = [
    Mutant(
        "completion-order",
        "samples are handed on in the order their requests complete, not in the plan's order",
        function="read_ahead",
        edits=(
            (
                "first, end, fetched = pending.popleft()",
                "first, end, fetched = min(pending, key=lambda p: not p[2].done()); pending.remove((first, end, fetched))",
            ),
        ),
        **WEBDATASET,
        only_test=IN_FLIGHT_TEST,
    ),
    Mutant(
        "in-flight-unbounded",
        "a worker keeps four times --requests-in-flight requests in flight (memory and server load past the bound)",
        function="read_ahead",
        edits=(
            ("ThreadPoolExecutor(max_workers=in_flight,", "ThreadPoolExecutor(max_workers=4 * in_flight,"),
            ("itertools.islice(requests, in_flight - len(pending))", "itertools.islice(requests, 4 * in_flight - len(pending))"),
        ),
        **WEBDATASET,
        only_test=IN_FLIGHT_TEST,
    ),
    Mutant(
        "in-flight-ignored",
        "a served data set is read one request at a time whatever --requests-in-flight says (one run per round trip)",
        function="shard_samples",
        edits=(("if is_url(location) and requests_in_flight > 1:", "if False:"),),
        **WEBDATASET,
        only_test=IN_FLIGHT_TEST,
    ),
    Mutant(
        "retry-budget-a-count",
        "the HTTP client gives up after 5 attempts (a fraction of a second to seconds of outage), not after --retry-seconds",
        function="HTTPStream.recover",
        edits=(("spent = now + wait - self.first_failure > self.retry_seconds", "spent = self.failures >= 5"),),
        **WEBDATASET,
        only_test="tests/test_http_faults.py::test_an_outage_within_the_retry_budget_is_ridden_out",
    ),
]
