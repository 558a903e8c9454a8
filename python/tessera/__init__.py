"""Tessera: a Triton-style GPU kernel language with its own tile IR and compiler.

The public API is re-exported here; everything else is private implementation.
"""
