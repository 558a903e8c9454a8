"""Environments for child Python processes that must import the same Tessera as this one.

A pip-installed Tessera (also an editable install) is imported by every Python of the same
environment; an in-tree build (``make build``, then ``PYTHONPATH=python``) only where the
checkout's ``python/`` folder is on the path. Tests that start a child process use
:func:`child_env`, so they test the same package whichever way it was installed.

Example::

    env = child_env(TESSERA_CACHE_DIR=str(tmp_path))
    subprocess.run([sys.executable, "script.py"], env=env, check=True)
"""
from __future__ import annotations

import os
import site
import sys
from typing import Dict, Optional, Sequence


def package_root() -> Optional[str]:
    """The sys.path folder this process imported ``tessera`` from, when a child needs it on its
    PYTHONPATH to import the same package; None when the child imports it anyway (an installed
    package in site-packages, or an editable install's import hook)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../tessera
    root = os.path.dirname(package)
    on_path = {os.path.abspath(entry or os.curdir) for entry in sys.path}
    site_dirs = set(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        site_dirs.add(site.getusersitepackages())
    site_dirs = {os.path.abspath(d) for d in site_dirs}
    return root if root in on_path and root not in site_dirs else None


def child_env(extra_paths: Sequence[str] = (), **variables: str) -> Dict[str, str]:
    """``os.environ`` plus ``variables``, with a PYTHONPATH that imports this process's
    Tessera first, then ``extra_paths`` (e.g. a test's helper modules), then the current one."""
    env = dict(os.environ)
    env.update(variables)
    root = package_root()
    parts = ([root] if root else []) + list(extra_paths)
    if env.get("PYTHONPATH"):
        parts.append(env["PYTHONPATH"])
    if parts:
        env["PYTHONPATH"] = os.pathsep.join(parts)
    return env
