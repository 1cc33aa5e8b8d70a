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
                "        return checked_manifest(manifest, url, FORMAT), hashlib.sha256(raw).hexdigest()",
                "        return checked_manifest(manifest, url, FORMAT), None",
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
    Mutant(
        "s3-manifest-put-unconditional",
        "prep writes manifest.json into the bucket with a plain put: of two preps into one prefix at once both "
        "report success and the second silently replaces the first's data set",
        function="put_new",
        edits=(
            (
                '    condition = {"IfNoneMatch": "*"} if replacing is None else {"IfMatch": replacing}',
                "    condition = {}",
            ),
        ),
        **{
            **S3,
            "only_test": "tests/test_s3.py::test_of_two_preps_into_one_prefix_at_once_the_second_to_finish_fails_in_one_line",
        },
    ),
    Mutant(
        "s3-interrupted-heldout-manifest-blocks",
        "prep writes the held-out manifest only where none is: the one an interrupted prep left makes every later "
        "prep into that prefix fail as if another prep had come first",
        function="prepare_in_bucket",
        edits=(
            (
                "    found = [None] + [object_store.etag(locate(where, MANIFEST)) for _, where, _ in sets[1:]]",
                "    found = [None] * len(sets)",
            ),
        ),
        **{
            **S3,
            "only_test": "tests/test_s3.py::test_a_prep_killed_mid_upload_leaves_no_process_and_the_next_prep_removes_its_files",
        },
    ),
    Mutant(
        "prep-children-outlive-prep",
        "prep's checking processes do not end with prep: a prep killed with SIGKILL leaves them blocked on their "
        "task pipe forever",
        function="Verifier.__init__",
        edits=(("            initializer=end_with_launcher,\n", ""), ("            initargs=(os.getpid(),),\n", "")),
        **{
            **S3,
            "only_test": "tests/test_s3.py::test_a_prep_killed_mid_upload_leaves_no_process_and_the_next_prep_removes_its_files",
        },
    ),
    Mutant(
        "s3-dead-prep-scratch-kept",
        "the TMPDIR folder (a shard, the shuffle's spill) of an s3:// prep killed with SIGKILL stays for ever: the "
        "next prep does not remove it",
        function="prepare_in_bucket",
        edits=(("    remove_dead_scratch()\n", ""),),
        **{
            **S3,
            "only_test": "tests/test_s3.py::test_a_prep_killed_mid_upload_leaves_no_process_and_the_next_prep_removes_its_files",
        },
    ),
    Mutant(
        "s3-no-bucket-a-local-path",
        "--data s3:// without a bucket is read as the local path s3:/manifest.json and told to prepare the data again",
        function="webdataset_backend.locate",
        edits=(("        object_store.split(str(location))", "        pass"),),
        **{**S3, "only_test": "tests/test_s3.py::test_an_s3_location_without_a_bucket_is_one_line_not_a_local_path"},
    ),
    Mutant(
        "s3-web-server-told-to-prepare",
        "an endpoint that is no S3 API (a web server's 404 page) is reported as a prefix without a data set: prepare "
        "it there",
        function="failure",
        edits=(("        if not_s3(err):", "        if False:"),),
        **{
            **S3,
            "only_test": "tests/test_s3.py::test_an_endpoint_that_is_no_s3_api_is_named_so_not_told_to_prepare_the_data",
        },
    ),
    Mutant(
        "bucket-index-written-before-every-shard-was-checked",
        "prep webdataset s3://BUCKET/PREFIX writes the held-out set's index (its manifest included) as soon as its "
        "shards are read, before the training shards are: a damaged training shard leaves a half-indexed prefix",
        function="index_sets",
        edits=(
            (
                "            roots.append(tmp)\n",
                "            roots.append(tmp)\n            publish(tmp, sets[number][2])\n",
            ),
            ("            publish(tmp, where)\n", "            pass\n"),
        ),
        **{
            **S3,
            "only_test": "tests/test_s3.py::"
            "test_a_prefix_without_shards_or_with_a_damaged_one_is_one_line_and_nothing_is_written",
        },
    ),
    Mutant(
        "bucket-index-beside-the-shards-when-told-another",
        "prep webdataset s3://BUCKET/PREFIX --index-to ELSEWHERE writes the index beside the shards anyway (a "
        "read-only bucket refuses it; a writable one gets objects its owner did not ask for)",
        function="index_sets",
        edits=(
            (
                "        for tmp, (_, _, where) in zip(roots, sets, strict=True):",
                "        for tmp, (_, where, _) in zip(roots, sets, strict=True):",
            ),
        ),
        **{
            **S3,
            "only_test": "tests/test_s3.py::"
            "test_a_read_only_bucket_is_indexed_into_the_prefix_or_folder_named_and_nothing_goes_beside_the_shards",
        },
    ),
    Mutant(
        "bucket-index-shards-at-ignored",
        "an index written apart from its shards (--index-to) is read as if the shards lay beside it: every read fails",
        function="shards_location",
        edits=(("    where = manifest.get(SHARDS_AT)", "    where = None"),),
        **{
            **S3,
            "only_test": "tests/test_s3.py::"
            "test_a_read_only_bucket_is_indexed_into_the_prefix_or_folder_named_and_nothing_goes_beside_the_shards",
        },
    ),
]
