"""Measuring retrieval: evalsets, metrics, the eval harness and the sweep."""
