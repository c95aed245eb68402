"""Forget one partition's materializations, so the UI shows it missing after a cleanup.

`DagsterInstance.wipe_asset_partitions` is the API for this, but the open-source SQL event log
storages (SQLite, PostgreSQL) raise NotImplementedError for it. For those we delete the
partition's materialization, planned and failed events from the cross-run asset index (on
SQLite the run's own log keeps them, so run pages still show what happened), then reset the
asset's summary row and its cached partition status so both are recomputed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import dagster as dg


def forget_partition(instance: dg.DagsterInstance, asset_key: dg.AssetKey, partition: str) -> int:
    """Remove `asset_key`'s records for `partition`; return how many events went (-1: unknown)."""
    try:
        instance.wipe_asset_partitions(asset_key, [partition])
        return -1
    except NotImplementedError:
        pass
    from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage

    storage = instance.event_log_storage
    if not isinstance(storage, SqlEventLogStorage):
        raise NotImplementedError(
            f"{type(storage).__name__} cannot wipe partitions; wipe {asset_key.to_user_string()} "
            f"partition {partition} in the UI instead"
        )
    return _delete_from_index(storage, asset_key, partition)


def _delete_from_index(storage: Any, asset_key: dg.AssetKey, partition: str) -> int:
    from dagster._core.events import DagsterEventType
    from dagster._core.storage.event_log.schema import (
        AssetEventTagsTable,
        AssetKeyTable,
        SqlEventLogStorageTable,
    )

    events = SqlEventLogStorageTable
    kinds = [
        DagsterEventType.ASSET_MATERIALIZATION.value,
        DagsterEventType.ASSET_MATERIALIZATION_PLANNED.value,
        DagsterEventType.ASSET_FAILED_TO_MATERIALIZE.value,
    ]
    key = asset_key.to_string()
    ours = (
        (events.c.asset_key == key)
        & (events.c.partition == partition)
        & events.c.dagster_event_type.in_(kinds)
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
        conn.execute(
            AssetKeyTable.update()
            .where(AssetKeyTable.c.asset_key == key)
            .values(**_latest_values(conn, events, key))
        )
    return len(ids)


def _latest_values(conn: Any, events: Any, key: str) -> dict[str, Any]:
    """The asset row's `last_materialization` as it would be had the deleted events never been."""
    from dagster import EventLogRecord, deserialize_value, serialize_value
    from dagster._core.events import DagsterEventType
    from dagster._core.events.log import EventLogEntry

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
