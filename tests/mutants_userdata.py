"""Mutants of issue 18 (data as users hold it): decoding images as they are meant to be seen,
and prep's check of every file; a held-out set prepared apart, checked against the training set's classes;
and of issue 38 (sources map to fields): masks, float targets and files grouped into samples, and shards
of a held-out folder kept out of the training set; and of issue 42 (prep's errors and options as typed)."""

from __future__ import annotations

from mutants_framework import Mutant, one_render

MUTANTS = [
    Mutant(
        "exif-ignored",
        "an image's EXIF orientation is ignored: a phone's photo is trained sideways",
        function="to_rgb",
        edits=(("image = ImageOps.exif_transpose(image)", "image = image"),),
        backends=("memory",),  # decode.py is the same for every backend and sampler
        samplers=("global",),
        only_test="tests/test_decode.py",
    ),
    Mutant(
        "upright-jpeg-copied",
        "an upright RGB JPEG goes through the EXIF transpose and the RGB conversion anyway: two full-image "
        "copies that change nothing (6% of the decode's CPU at 224 px)",
        function="to_rgb",
        edits=(
            ("if image.getexif().get(ExifTags.Base.Orientation, 1) != 1:", "if True:"),
            ('return image if image.mode == "RGB" else image.convert("RGB")', 'return image.convert("RGB")'),
        ),
        backends=("memory",),  # decode.py is the same for every backend and sampler
        samplers=("global",),
        only_test="tests/test_decode.py",
    ),
    Mutant(
        "prep-unverified",
        "prep stores every file without decoding it: a truncated JPEG or a .txt among images is found at training",
        function="write_dataset",
        edits=(
            (
                "Verifier(where, default_processes(), kinds) if verify else contextlib.nullcontext() as verifier",
                "contextlib.nullcontext() as verifier",
            ),
        ),
        backends=("arrow",),  # prep is the same for every backend and sampler
        samplers=("global",),
        only_test="tests/test_prep_verification.py",
    ),
    Mutant(
        "field-unverified",
        "prep decodes each payload but not the samples' other fields: a mask that is no image is found at training",
        function="check_chunk",
        edits=(("        for name, data in fields:", "        for name, data in ():"),),
        backends=("arrow",),  # prep is the same for every backend and sampler
        samplers=("global",),
        only_test="tests/test_prep_verification.py",
    ),
    Mutant(
        "prep-stops-at-first-bad-sample",
        "prep refuses the data set at the first sample that does not decode: three broken files take three runs",
        function="Verifier.collect",
        edits=(
            (
                "        self.bad += len(failures)\n",
                "        self.bad += len(failures)\n"
                "        if failures:\n"
                "            raise Undecodable(self.where, failures[:1], 1)\n",
            ),
        ),
        backends=("arrow",),  # prep is the same for every backend and sampler
        samplers=("global",),
        only_test="tests/test_prep_verification.py",
    ),
    Mutant(
        "size-unit-ignored",
        "a byte-count option reads 64K as 64 bytes: --shard-bytes 64K cuts a shard per sample",
        function="parse_size",
        edits=(("    return int(float(number) * unit)", "    return int(float(number))"),),
        backends=("webdataset",),  # the byte-count options are the webdataset backend's
        samplers=("shard_buffer",),
        only_test="tests/test_sizes.py",
    ),
    Mutant(
        "hint-out-names-the-input",
        "the not-prepared hint's prep command writes into what --data named: `prep table train.parquet --out "
        "train.parquet`, refused (or a folder that exists) when typed as it is",
        function="then_train",
        edits=(("    out = prepared(source)", "    out = source"),),
        backends=("arrow",),  # manifest.py is the same for every backend
        samplers=("global",),
        only_test="tests/test_prep_verification.py",
    ),
    Mutant(
        "heldout-classes-counted",
        "the held-out set's class list is compared by its length alone: one with two classes swapped"
        " is scored with the wrong names, its accuracy a number without meaning",
        function="check_same_classes",
        edits=(("if classes == training:", "if len(classes) == len(training):"),),
        backends=("arrow",),  # manifest.py is the same for every backend and sampler
        samplers=("global",),
        only_test="tests/test_bad_data.py",
    ),
    Mutant(
        "mask-taken-for-image",
        "prep hf stores a mask column as an image: decoded to RGB and cropped like a photo, its class ids are lost",
        function="fields_of",
        edits=(('kinds[name] = "mask" if masked else "image"', 'kinds[name] = "image"'),),
        backends=("arrow",),  # sources/ is the same for every backend and sampler
        samplers=("global",),
        only_test="tests/test_prep_hf_fields.py",
    ),
    Mutant(
        "float-label-a-class",
        "a floating-point `label` column (a regression target) is taken for the class: every distinct value a class",
        function="can_be_class",
        edits=(
            (
                'in ("text", "number") and not numeric)',
                'in ("text", "number"))',
            ),
        ),
        backends=("arrow",),
        samplers=("global",),
        only_test="tests/test_prep_hf_fields.py",
    ),
    Mutant(
        "folder-key-at-first-dot",
        "prep folder groups files by the name before its first dot: cat.0.jpg, cat.1.jpg, ... become one sample",
        function="samples_of",
        edits=(
            (
                'cut = next((i for i, c in enumerate(name) if c == "." and (path.parent, name[:i]) in stems), len(name))',
                'cut = name.find(".") % (len(name) + 1)',
            ),
        ),
        backends=("arrow",),
        samplers=("global",),
        only_test="tests/test_prep.py",
    ),
    Mutant(
        "heldout-shards-trained",
        "the shards of SRC/heldout are read into the training index with the others (rglob): the held-out"
        " pairs are trained on and recall@1 measures memory",
        function="shard_paths",
        # Both guards: a shard under SRC/heldout is also one of the files linked there (file_id).
        edits=((" and p.relative_to(src).parts[0] != HELDOUT", ""), ("and file_id(p) not in held", "and True")),
        **one_render("webdataset"),  # wds_shards.py is the same for every sampler
        only_test="tests/test_wds_fields.py",
    ),
    Mutant(
        "prep-stops-at-first-empty-file",
        "prep folder names only the first empty or unreadable file: each of the others takes a run of its own",
        function="class_folders.folder",
        edits=(("{', '.join(unusable[:NAMED])}{more}", "{unusable[0]}"),),
        backends=("arrow",),  # prep is the same for every backend and sampler
        samplers=("global",),
        only_test="tests/test_prep_verification.py::test_every_empty_file_is_named_in_one_run",
    ),
]
