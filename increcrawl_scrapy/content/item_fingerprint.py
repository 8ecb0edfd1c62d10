"""What an item's fingerprint is taken of when no content field is configured: the
item itself, as canonical JSON (sorted keys, one field a line), without the fields
the package adds (``change``, ``content_hash``...) and those named in
``INCRECRAWL_VOLATILE_FIELDS``. The volatile rules then apply to it as to a page's
text, and it is the text kept for ``diff`` (``INCRECRAWL_KEEP_CONTENT``)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from itemadapter import ItemAdapter

#: Fields the pipeline and the incremental spider add: never part of what changed.
ADDED_FIELDS = frozenset(
    {
        "change",
        "normalized_url",
        "content_hash",
        "fetched_at",
        "etag",
        "last_modified",
        "http_status",
        "fetcher",
        "final_url",
        "error",
        "error_kind",
        "site_failure",
        "alias_of",
        "changed_fields",
    }
)


def item_text(item: Any, skip: Iterable[str] = ()) -> str:
    """The item's canonical JSON, without the added and the *skip* fields."""
    left_out = ADDED_FIELDS | frozenset(skip)
    fields = {name: value for name, value in ItemAdapter(item).items() if name not in left_out}
    return json.dumps(plain(fields), indent=1, sort_keys=True, ensure_ascii=False, default=str)


def plain(value: Any) -> Any:
    """Nested items as dicts, sets sorted: the same item, the same JSON."""
    if ItemAdapter.is_item(value):
        value = ItemAdapter(value).asdict()
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, set | frozenset):
        return sorted((plain(item) for item in value), key=repr)
    return value
