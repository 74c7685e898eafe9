"""Linearizability checking: models, the WGL search, per-key composition and explanations."""

from checkers.linearizable.check import check
from checkers.linearizable.models import MODELS, make_model

__all__ = ["MODELS", "check", "make_model"]
