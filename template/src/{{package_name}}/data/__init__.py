"""The data pipeline: sources and prep, the manifest, the storage backend, the epoch plan and
sampler, the loader and decoding; the checks that judge an order (guarantees, shuffle metrics).

Every random stream (the epoch order, worker seeds, augmentation) is listed, with its key, in streams.py.
"""
