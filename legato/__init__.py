"""Legato: a Python-embedded kernel DSL and compiler for the Bertha LPU."""

__version__ = "0.1.0"
