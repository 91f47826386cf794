"""What the store keeps of the ``beat_schedule`` the deployment follows: its record (which
version, written by whom, its entries' digests) and the items of it that make no entry."""

from __future__ import annotations

import json

from .base import StoreBase
from .errors import translated
from .moving import placed
from .records import ConfigMarker, text_or_none
from .shards import Layout


class ConfigCalls(StoreBase):
    """The ``beat_schedule`` record, and the quarantine records of its bad items."""

    @translated
    def config_marker(self) -> ConfigMarker | None:
        """Which ``beat_schedule`` the deployment follows, or None."""
        fields = ("version", "at", "by", "entries", "previous", "applied")
        values = self.client.hmget(self.keys.config, fields)
        return ConfigMarker.from_fields([text_or_none(v) for v in values])

    @translated
    def config_version(self) -> str | None:
        """The version the record names, even a record :meth:`config_marker` cannot read."""
        return text_or_none(self.client.hget(self.keys.config, "version"))

    @translated
    def claim_config(
        self,
        read: str,
        version: str,
        beat_id: str,
        entries: dict[str, str],
        previous: dict[str, str] | None,
    ) -> bool:
        """Record a new ``beat_schedule`` (not yet applied) unless the version is no longer
        ``read`` ('' for none); True when recorded."""
        before = "" if previous is None else json.dumps(previous, sort_keys=True)
        return self.scripts.claim_config(
            read, version, beat_id, json.dumps(entries, sort_keys=True), before
        )

    @translated
    def config_applied(self, version: str) -> bool:
        """Record that the entries of ``version`` are written; False if it was replaced."""
        return self.scripts.config_applied(version)

    @translated
    def quarantine_item(self, name: str, definition: str, error: str, by: str) -> bool:
        """Set aside a ``beat_schedule`` item that makes no entry, as a corrupt definition
        is set aside, but leaving alone what is stored under its name (an earlier
        definition keeps running). Writing an entry of that name, or removing the name,
        clears the record. True when recorded, False when the same item and error were."""
        return self._item_record(name, definition or "{}", error, by)

    @translated
    def release_item(self, name: str) -> bool:
        """Forget the record :meth:`quarantine_item` wrote (the item left ``beat_schedule``);
        True when there was one. Other quarantine records stay."""
        return self._item_record(name, "", "", "")

    def _item_record(self, name: str, definition: str, error: str, by: str) -> bool:
        def record(layout: Layout) -> bool:
            shard = self.shard_scripts[placed(self, [name], layout)[name]]
            return shard.quarantine_item(name, definition, error, by, layout.spelled)

        return self._with_layout(record)
