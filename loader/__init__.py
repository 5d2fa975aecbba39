"""The loader: prepare the corpus tree, summarize, write sidecars, load the database."""
