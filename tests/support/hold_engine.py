"""Starts a real CPU engine, prints its tree's pids and IPC dir as JSON, then waits to be killed.

Used by the SIGKILL test: the test kills this process with SIGKILL and checks
that the engine tree it started is gone soon after.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from tuner.config import EngineConfig
from tuner.cpu_demo import DEMO_ENGINE_ARGS
from tuner.engine import Engine, EngineSpec


async def main(model: str, log: str) -> None:
    spec = EngineSpec(
        config=EngineConfig(model=model, engine=dict(DEMO_ENGINE_ARGS)), log_path=Path(log)
    )
    engine = Engine(spec)
    await engine.start()
    held = {"pids": sorted(engine.tree_pids()), "url": engine.url, "ipc_dir": str(engine.ipc_dir)}
    print(json.dumps(held), flush=True)
    await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
