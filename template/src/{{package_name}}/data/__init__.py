"""The read path: the manifest, the storage backend, the epoch plan and sampler, the loader and
decoding. Training reads the prepared data through it; it imports nothing from prep (sources/)
or the order's checks (checks/).

A researcher edits decode.py for a new modality (one function from a payload's bytes to a
tensor); the rest holds the contract (every sample once per epoch, the same order on any
resume) and is not edited for an experiment. Every random stream (the epoch order, worker
seeds, augmentation) is listed, with its key, in streams.py.
"""
