"""Debian packages that a test server needs, installed with apt-get when missing."""

from __future__ import annotations

import os
import subprocess


def apt_install(packages: tuple[str, ...]) -> str | None:
    """Install `packages` (an `apt-get update` first only if the install fails); None on
    success, else why it failed."""
    if os.geteuid() != 0:
        return f"{' '.join(packages)} not installed, and installing needs root"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", *packages]
    done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, timeout=600)
        done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        return f"apt-get install {' '.join(packages)} failed: {done.stderr.strip()[-300:]}"
    return None
