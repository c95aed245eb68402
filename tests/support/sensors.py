"""What the daemon's sensors did: their finished ticks, read from the instance."""

from __future__ import annotations

import dagster as dg


def ticks_after(instance: dg.DagsterInstance, sensor: str, after: float) -> list[str]:
    """What `sensor`'s finished ticks that started after `after` (a UNIX time) said: each tick's
    skip reason, or the run keys it requested."""
    from dagster._core.scheduler.instigation import InstigatorType, TickStatus

    out = []
    for state in instance.all_instigator_state(instigator_type=InstigatorType.SENSOR):
        if state.name == sensor:
            for tick in instance.get_ticks(state.instigator_origin_id, state.selector_id):
                if tick.timestamp > after and tick.status != TickStatus.STARTED:
                    requested = f"requested runs with keys {sorted(tick.run_keys)}"
                    out.append(tick.skip_reason or requested)
    return out
