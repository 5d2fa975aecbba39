"""Test doubles that speak real protocols (the clients under test are the real ones)."""

from .openai_server import FakeOpenAI, Recorded, summary_for

__all__ = ["FakeOpenAI", "Recorded", "summary_for"]
