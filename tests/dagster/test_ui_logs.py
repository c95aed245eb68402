"""What the real `corpus ui` prints while it is left alone: nothing per sensor tick, no warning.

The daemon's four sensors tick every 5 to 10 s, and each tick is recorded on the instance (the
UI's sensor pages show them); none of it reaches the terminal. A fresh data root is used, whose
first start is the one that used to warn (the run-retry daemon finding no cursor).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from dagster_support import copy_example
from support.dagster import running_ui
from support.sensors import ticks_after
from support.waiting import wait_for

from corpus_assets.instance.home import ensure_home
from corpus_assets.sensors.cleanup import CANCEL_SENSOR, FAILURE_SENSOR
from corpus_assets.sensors.config import corpus_config_sensor
from corpus_assets.sensors.dead_runs import SENSOR as DEAD_RUNS_SENSOR

SENSORS = (corpus_config_sensor.name, DEAD_RUNS_SENSOR, FAILURE_SENSOR, CANCEL_SENSOR)
HEADER = 2
"""`corpus ui`'s own lines: where the instance and the root are, and the UI's address."""


@pytest.mark.timeout(300)
def test_an_idle_corpus_ui_prints_no_tick_lines_and_no_warning(tmp_path: Path) -> None:
    root = tmp_path / "data"
    home = ensure_home(root / "dagster")
    example = copy_example(tmp_path / "configs")
    env = {**os.environ, "DAGSTER_HOME": str(home), "CORPUS_ROOT": str(root)}
    with running_ui(tmp_path, root, home, env, example) as ui, ui.instance() as instance:
        idle_from = time.time()
        # a tick of every sensor while nothing happens: each has had its chance to print
        wait_for(
            lambda: all(ticks_after(instance, s, idle_from) for s in SENSORS),
            120,
            "a tick of every sensor",
            every=1.0,
        )
        ticks = {s: len(ticks_after(instance, s, idle_from)) for s in SENSORS}
        lines = ui.log.read_text(encoding="utf-8").splitlines()
    assert all(n >= 1 for n in ticks.values()), ticks
    assert [line for line in lines if not line.startswith("[corpus] ")] == [], lines
    assert len(lines) == HEADER, lines
    assert lines[1].startswith("[corpus] UI on http://127.0.0.1:")
