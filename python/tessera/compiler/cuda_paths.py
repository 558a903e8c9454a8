"""Where the CUDA tools Tessera uses are installed: ``ptxas`` and ``libdevice.10.bc``.

Both come with a CUDA toolkit or with NVIDIA's pip wheels (which PyTorch's CUDA builds may pull
in). The first found wins, in this order:

1. the knob: ``TESSERA_PTXAS`` / ``TESSERA_LIBDEVICE`` (docs/config.md);
2. ptxas only: ``PATH``;
3. CUDA toolkits: ``$CUDA_HOME``, ``$CUDA_PATH``, ``/usr/local/cuda``
   (``bin/ptxas``, ``nvvm/libdevice/libdevice.10.bc``);
4. NVIDIA's wheels in any folder of ``sys.path`` (site-packages), same sub-layout under
   ``nvidia/cu13/`` (CUDA 13: ``nvidia-cuda-nvcc`` has ptxas, ``nvidia-nvvm`` libdevice) and
   ``nvidia/cuda_nvcc/`` (CUDA 12: ``nvidia-cuda-nvcc-cu12`` has both).

Example::

    for root in cuda_roots():
        print(root)          # e.g. /usr/local/cuda, .../site-packages/nvidia/cu13
    print(ptxas_missing_message())
"""
from __future__ import annotations

import os
import sys
from typing import List

# Where the CUDA toolkit installs itself by default.
DEFAULT_TOOLKIT = "/usr/local/cuda"
# libdevice's place under a CUDA root.
LIBDEVICE = os.path.join("nvvm", "libdevice", "libdevice.10.bc")
# Folders under site-packages/nvidia/ that hold a toolkit's bin/ and nvvm/, newest CUDA first.
WHEEL_LAYOUTS = ("cu13", "cuda_nvcc")

# A missing libdevice is reported by codegen (cpp/codegen/libdevice.cpp), with the same advice.
_HOW_TO_GET_PTXAS = ("install the CUDA toolkit, or `pip install nvidia-cuda-nvcc` (CUDA 13) or "
                     "`pip install nvidia-cuda-nvcc-cu12` (CUDA 12), or set TESSERA_PTXAS to "
                     "its path")


def toolkit_roots() -> List[str]:
    """CUDA toolkit folders that may exist: $CUDA_HOME, $CUDA_PATH, /usr/local/cuda."""
    # CUDA_HOME / CUDA_PATH are the CUDA toolkit's own conventions, not Tessera knobs.
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), DEFAULT_TOOLKIT]
    return [home for home in homes if home]


def wheel_roots() -> List[str]:
    """Toolkit-shaped folders of NVIDIA's wheels found on sys.path (existing ones only)."""
    roots: List[str] = []
    for entry in sys.path:
        for layout in WHEEL_LAYOUTS:
            root = os.path.join(entry or os.curdir, "nvidia", layout)
            if os.path.isdir(root) and root not in roots:
                roots.append(root)
    return roots


def cuda_roots() -> List[str]:
    """Every folder searched for bin/ptxas and nvvm/libdevice/, in search order."""
    return toolkit_roots() + wheel_roots()


def ptxas_missing_message() -> str:
    """Says that ptxas was not found, where Tessera looked and how to get it."""
    layouts = ",".join(WHEEL_LAYOUTS)
    return ("ptxas was not found (looked at TESSERA_PTXAS, PATH, $CUDA_HOME, $CUDA_PATH, "
            f"/usr/local/cuda and NVIDIA's pip wheels in site-packages/nvidia/{{{layouts}}}); "
            + _HOW_TO_GET_PTXAS)
