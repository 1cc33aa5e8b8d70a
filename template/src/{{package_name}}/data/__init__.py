"""The read path: the manifest, the storage backend, the epoch plan and sampler, the loader and
decoding. Training reads the prepared data through it; it imports nothing from prep's sources
(sources/) or the order's checks (checks/).

A researcher edits decode.py for a new modality (one function from a payload's bytes to a
tensor). The rest keeps the contract (every sample once per epoch, the same order on any
resume) and is not edited for an experiment; a new storage format is a <name>_backend.py
beside the others. Every random stream (the epoch order, worker seeds, augmentation) is
listed, with its key, in streams.py.
"""
