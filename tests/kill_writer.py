"""Run a writer script in a child process and kill -9 it mid-write (the sidecar crash tests)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def kill_mid_write(script: str, root: Path, delay: float) -> None:
    """Start ``python -c script root``, wait for its "ready" line, sleep ``delay`` s, SIGKILL it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(REPO)) if p)}
    proc = subprocess.Popen([sys.executable, "-c", script, str(root)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.stdout.close()
        proc.stderr.close()
