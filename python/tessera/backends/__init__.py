"""``triton.backends``: what code written for Triton imports from its backend package; only
``compiler.GPUTarget`` (Tessera has one backend, CUDA, built in)."""
