"""What the UI shows after a failure: a cleaned partition reads Failed, unrun checks show nothing.

Dagster 1.13 computes a partition's status from its latest `ASSET_MATERIALIZATION` and
`ASSET_MATERIALIZATION_PLANNED` events: a planned event with no materialization after it, in a
run that ended FAILURE, makes the partition *Failed* (a CANCELED run makes it neither failed nor
in progress: *Missing*). So a cleanup deletes the partition's materializations and keeps the
planned events: the partition shows Failed, and "materialize failed" finds it, while its files are
gone. `DagsterInstance.wipe_asset_partitions` would delete all of them, and the open-source SQL
event log storages (SQLite, PostgreSQL) raise NotImplementedError for it anyway; we delete from
the cross-run asset index (on SQLite the run's own log keeps the events, so run pages still show
what happened), then reset the asset's summary row and its cached partition status.

Asset checks: Dagster writes a PLANNED check row for every check of a run when the run starts and
resolves a row still PLANNED when the run ended FAILURE as "Execution failed". The asset's Checks
tab and the graph show each check's latest row across all partitions, so one failed build made
every check of the asset look failed. `forget_unrun_checks` deletes a finished run's rows that
never got a result (the run's log keeps its planned events): each check then shows its latest
real evaluation. A cleanup also forgets the partition's check results: the files they judged are
gone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import dagster as dg


def forget_partition(instance: dg.DagsterInstance, asset_key: dg.AssetKey, partition: str) -> int:
    """Remove `asset_key`'s materializations, observations and check results for `partition`,
    keeping what says it was planned (and failed); return how many rows went (-1: unknown)."""
    try:
        instance.wipe_asset_partitions(asset_key, [partition])
        return -1
    except NotImplementedError:
        pass
    storage = _sql_storage(instance)
    if storage is None:
        raise NotImplementedError(
            f"{type(instance.event_log_storage).__name__} cannot wipe partitions; wipe "
            f"{asset_key.to_user_string()} partition {partition} in the UI instead"
        )
    return _delete_from_index(storage, asset_key, partition)


def forget_unrun_checks(instance: dg.DagsterInstance, run_id: str) -> int:
    """Delete the check rows of finished run `run_id` that never got a result; how many went."""
    from corpus_assets.instance.dagster_internals import AssetCheckExecutionRecordStatus
    from corpus_assets.instance.dagster_internals import AssetCheckExecutionsTable as checks

    planned = AssetCheckExecutionRecordStatus.PLANNED.value
    run = instance.get_run_by_id(run_id)
    storage = _sql_storage(instance)
    if run is None or not run.is_finished or storage is None:
        return 0
    with storage.index_connection() as conn:
        done = conn.execute(
            checks.delete().where(
                (checks.c.run_id == run_id) & (checks.c.execution_status == planned)
            )
        )
    return int(done.rowcount or 0)


def _sql_storage(instance: dg.DagsterInstance) -> Any:
    from corpus_assets.instance.dagster_internals import SqlEventLogStorage

    storage = instance.event_log_storage
    return storage if isinstance(storage, SqlEventLogStorage) else None


def _delete_from_index(storage: Any, asset_key: dg.AssetKey, partition: str) -> int:
    from dagster import DagsterEventType

    from corpus_assets.instance.dagster_internals import (
        AssetCheckExecutionsTable,
        AssetEventTagsTable,
        AssetKeyTable,
        SqlEventLogStorageTable,
    )

    events, checks = SqlEventLogStorageTable, AssetCheckExecutionsTable
    key = asset_key.to_string()
    ours = (
        (events.c.asset_key == key)
        & (events.c.partition == partition)
        & events.c.dagster_event_type.in_(
            # observations too: the report's, on the shards page, describe the files now gone
            [DagsterEventType.ASSET_MATERIALIZATION.value, DagsterEventType.ASSET_OBSERVATION.value]
        )
    )
    with storage.index_connection() as conn:
        ids = [
            row[0]
            for row in conn.execute(events.select().with_only_columns(events.c.id).where(ours))
        ]
        if ids:
            conn.execute(
                AssetEventTagsTable.delete().where(AssetEventTagsTable.c.event_id.in_(ids))
            )
            conn.execute(events.delete().where(events.c.id.in_(ids)))
        gone = conn.execute(
            checks.delete().where((checks.c.asset_key == key) & (checks.c.partition == partition))
        )
        conn.execute(
            AssetKeyTable.update()
            .where(AssetKeyTable.c.asset_key == key)
            .values(**_latest_values(conn, events, key))
        )
    return len(ids) + int(gone.rowcount or 0)


def _latest_values(conn: Any, events: Any, key: str) -> dict[str, Any]:
    """The asset row's `last_materialization` as it would be had the deleted events never been."""
    from dagster import (
        DagsterEventType,
        EventLogEntry,
        EventLogRecord,
        deserialize_value,
        serialize_value,
    )

    latest = conn.execute(
        events.select()
        .with_only_columns(events.c.id, events.c.event, events.c.run_id)
        .where(
            (events.c.asset_key == key)
            & (events.c.dagster_event_type == DagsterEventType.ASSET_MATERIALIZATION.value)
        )
        .order_by(events.c.id.desc())
        .limit(1)
    ).fetchone()
    values: dict[str, Any] = {"cached_status_data": None}
    if latest is None:
        values.update(last_materialization=None, last_run_id=None)
    else:
        entry = deserialize_value(latest.event, EventLogEntry)
        record = EventLogRecord(storage_id=latest.id, event_log_entry=entry)
        values.update(last_materialization=serialize_value(record), last_run_id=latest.run_id)
    return values
