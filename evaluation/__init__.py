"""Measuring retrieval: evalsets, metrics, the eval harness, PIAF and the sweep."""
