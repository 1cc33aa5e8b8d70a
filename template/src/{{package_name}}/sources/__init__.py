"""prep's sources: what `prep` reads (synthetic images, class folders, tables, Hugging Face data
sets, WebDataset shards) and turns into samples in storage order, checked on the way
(verify.py). Never on the training path: training reads the prepared data through data/.

Add a source here: a module with a function that returns a source.Source, and a command for
it in prep.py.
"""
