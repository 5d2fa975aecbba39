"""Helpers shared by the bench/ scripts: percentiles, Markdown tables, JSON output, French queries."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: Real French questions over the loaded books (Bastiat's Sophismes, Tocqueville's Démocratie).
FRENCH_QUERIES: tuple[str, ...] = (
    "la pétition des marchands de chandelles contre la concurrence du soleil",
    "ce qu'on voit et ce qu'on ne voit pas",
    "le protectionnisme nuit-il au consommateur ?",
    "la spoliation légale par les tarifs douaniers",
    "abondance et disette : quel est l'intérêt du producteur ?",
    "le libre-échange et la liberté du commerce",
    "les droits protecteurs élèvent-ils les salaires des ouvriers ?",
    "la balance du commerce et l'exportation de numéraire",
    "la souveraineté du peuple en Amérique",
    "la tyrannie de la majorité",
    "le rôle des associations dans la vie politique américaine",
    "la commune en Nouvelle-Angleterre",
    "la liberté de la presse aux États-Unis",
    "le jury comme institution politique",
    "l'égalité des conditions et ses effets sur la société",
    "les trois races qui habitent le territoire des États-Unis",
    "la condition des Indiens et des Noirs",
    "le pouvoir judiciaire et le contrôle des lois",
    "la centralisation administrative et gouvernementale",
    "pourquoi l'esclavage recule vers le sud",
)


def percentiles(samples_s: Sequence[float]) -> dict[str, float]:
    """p50/p95/mean/max in milliseconds of durations given in seconds."""
    ms = np.asarray(samples_s, dtype=float) * 1000.0
    if ms.size == 0:
        return {
            "n": 0,
            "p50_ms": float("nan"),
            "p95_ms": float("nan"),
            "mean_ms": float("nan"),
            "max_ms": float("nan"),
        }
    return {
        "n": int(ms.size),
        "p50_ms": float(np.percentile(ms, 50)),
        "p95_ms": float(np.percentile(ms, 95)),
        "mean_ms": float(ms.mean()),
        "max_ms": float(ms.max()),
    }


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:,.2f}" if abs(v) < 100 else f"{v:,.0f}"
        if isinstance(v, int):
            return f"{v:,}"
        return str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def machine() -> dict[str, Any]:
    """Context to keep next to the numbers: timings depend on it."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "loadavg_at_start": load,
        "platform": platform.platform(),
    }


def load_note(start: dict[str, Any]) -> str:
    """One line for the report: CPU count and load average at start and now (other work on
    the machine skews every number here)."""
    now = os.getloadavg() if hasattr(os, "getloadavg") else None
    fmt = lambda la: "n/a" if la is None else "/".join(f"{x:.2f}" for x in la)  # noqa: E731
    return f"{start['cpus']} CPUs; load average (1/5/15 min) at start {fmt(start['loadavg_at_start'])}, at end {fmt(now)}"


def write_json(path: str | None, data: dict[str, Any]) -> None:
    if path:
        data.setdefault("machine", {})["loadavg_at_end"] = (
            os.getloadavg() if hasattr(os, "getloadavg") else None
        )
        Path(path).write_text(
            json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8"
        )
        print(f"\nwrote {path}")
