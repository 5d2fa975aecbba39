"""The local embedder's batch of queries (loader.embedding.LocalEmbedder.queries): the question and
its phrasings, split into one batch per core and embedded in parallel, give the very vectors each
gives alone."""

from __future__ import annotations

import numpy as np

from loader.embedding import LocalEmbedder

TEXTS = [
    "Pourquoi la protection ne crée-t-elle pas de travail ?",
    "régime protecteur travail national tarif déplacement consommateur",
    "La protection ne crée point de travail ; elle le déplace. Ce que gagne l'industrie protégée, "
    "le consommateur le perd, et la nation avec lui.",
]


def test_a_batch_of_queries_gives_each_querys_own_vector() -> None:
    e = LocalEmbedder()
    alone = np.stack([e.query(t) for t in TEXTS])
    for n in (1, 2, 3):
        together = e.queries(TEXTS[:n])
        assert together.shape == (n, e.dimension) and together.dtype == np.float32
        assert np.array_equal(together, alone[:n])
