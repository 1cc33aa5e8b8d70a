"""Mistakes of the object-storage path (webdataset, s3://): each is caught by tests/test_s3.py."""

from __future__ import annotations

from mutants_framework import Mutant, one_render

S3 = {**one_render("webdataset"), "only_test": "tests/test_s3.py"}

MUTANTS = [
    Mutant(
        "s3-manifest-before-index",
        "prep into a bucket uploads manifest.json with the labels, before the sample index and the held-out set: "
        "an interrupted prep leaves a prefix that a run accepts",
        function="prepare_in_bucket",
        edits=(
            (
                "            for name in (LABELS, SOURCES, SAMPLE_INDEX):",
                "            for name in (MANIFEST, LABELS, SOURCES, SAMPLE_INDEX):",
            ),
        ),
        **S3,
    ),
    Mutant(
        "s3-prefix-overwritten",
        "prep into a prefix that already holds a data set overwrites it instead of refusing",
        function="prepare_in_bucket",
        edits=(("    if has_dataset(url, Reading().retry_seconds):", "    if False:"),),
        **S3,
    ),
    Mutant(
        "s3-default-retry-budget",
        "the S3 client keeps botocore's default of 3 attempts: a burst of 503 SlowDown ends the run",
        function="client",
        edits=(
            (
                'retries={"total_max_attempts": int(attempts)},  # the mode: the profile\'s, else standard',
                "retries={},",
            ),
        ),
        **{
            **S3,
            "only_test": "tests/test_s3.py::test_a_burst_of_slow_down_answers_is_ridden_out_and_the_epoch_is_the_plan",
        },
    ),
    Mutant(
        "s3-credentials-unnamed",
        "refused S3 credentials (403 InvalidAccessKeyId / SignatureDoesNotMatch) reported as a generic failure "
        "that says to run again",
        function="failure",
        edits=(
            (
                'if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403") or status in (401, 403):',
                "if False:",
            ),
        ),
        **{
            **S3,
            "only_test": "tests/test_s3.py::test_a_missing_bucket_prefix_or_credentials_are_one_line_naming_the_fix",
        },
    ),
    Mutant(
        "s3-shards-kept-locally",
        "prep into a bucket keeps every uploaded shard on local disk: a data set larger than the disk cannot be "
        "prepared",
        function="UploadedShards.append",
        edits=(('        (self.root / entry["path"]).unlink()\n', ""),),
        **S3,
    ),
    Mutant(
        "s3-remote-manifest-unhashed",
        "the run folder records no manifest sha256 for data in a bucket, so a resume on changed data is not refused",
        function="read_dataset_manifest",
        edits=(
            (
                "    return checked_manifest(manifest, url, FORMAT), hashlib.sha256(raw).hexdigest()",
                "    return checked_manifest(manifest, url, FORMAT), None",
            ),
        ),
        # the opened bucket's manifest_sha256; the run from the bucket (the next test) shows it in config.json
        **{
            **S3,
            "only_test": "tests/test_s3.py::test_the_sha256_a_run_folder_records_is_that_of_the_manifest_in_the_bucket",
        },
    ),
    Mutant(
        "full-tmpdir-traceback",
        "prep --out s3:// with a full TMPDIR (where each shard is written before its upload) ends in a traceback, "
        "not one line naming TMPDIR and the fix",
        function="prepare_in_bucket",
        edits=(("spill_fix, WRITE_ERRORS),", "spill_fix, set()),"),),
        **{
            **S3,
            "only_test": "tests/test_s3.py::test_prep_into_a_bucket_uploads_each_data_set_before_its_manifest_and_the_training_manifest_last",
        },
    ),
]
