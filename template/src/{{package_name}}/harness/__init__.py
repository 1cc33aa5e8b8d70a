"""The training harness: launch, DDP start-up and exit, checkpoints, the run folder, the ledger.

Nothing here needs changing for a new experiment: the recipe (recipe.py, model.py) and the loop
(train.py) sit one level up.
"""
