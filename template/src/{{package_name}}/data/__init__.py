"""The data pipeline: sources and prep, the manifest, the storage backend, the epoch plan and
sampler, the loader and decoding; the checks that judge an order (guarantees, shuffle metrics).

Every random draw of an epoch's order is keyed in sampling.py and progress.worker_seed_generator.
"""
