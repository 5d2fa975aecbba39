"""The local embedder's batch of queries (loader.embedding.LocalEmbedder.queries): the question and
its phrasings embedded in parallel, one OpenMP thread per worker, give the very vectors each
gives alone; the caller's own OpenMP thread count is left as it was."""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_info

from loader.embedding import LocalEmbedder

TEXTS = ["Pourquoi la protection ne crée-t-elle pas de travail ?",
         "régime protecteur travail national tarif déplacement consommateur",
         "La protection ne crée point de travail ; elle le déplace. Ce que gagne l'industrie protégée, "
         "le consommateur le perd, et la nation avec lui."]


def openmp_threads() -> list[int]:
    return [i["num_threads"] for i in threadpool_info() if i["internal_api"] == "openmp"]


def test_a_batch_of_queries_gives_each_querys_own_vector() -> None:
    e = LocalEmbedder()
    alone = np.stack([e.query(t) for t in TEXTS])
    before = openmp_threads()
    for n in (1, 2, 3):
        together = e.queries(TEXTS[:n])
        assert together.shape == (n, e.dimension) and together.dtype == np.float32
        assert np.array_equal(together, alone[:n])
    assert openmp_threads() == before  # only the pool's workers run one OpenMP thread
