"""`key=value` lists, as clouds write labels and variables into one string.

Annotations (`capacity.cluster-autoscaler.kubernetes.io/labels: a=1,b=2`) and instance
metadata (GKE's `AUTOSCALER_ENV_VARS: os=linux;os_distribution=cos`) hold several pairs in
one value; each provider names its own source and form in the error, so the kit only says
which entry is wrong.
"""

from __future__ import annotations


class KeyValueError(ValueError):
    """An entry of a `key=value` list with no `=` or no key: `entry` is that entry."""

    def __init__(self, entry: str) -> None:
        super().__init__(f"entry {entry!r}: expected key=value")
        self.entry = entry


def parse_key_values(raw: str, separator: str = ",") -> dict[str, str]:
    """`k=v<separator>k2=v2` as a dict, keys and values stripped of blanks, empty entries
    skipped, a later key winning; raises `KeyValueError` on an entry without `=` or key."""
    out: dict[str, str] = {}
    for item in raw.split(separator):
        entry = item.strip()
        if not entry:
            continue
        key, eq, value = entry.partition("=")
        if not eq or not key.strip():
            raise KeyValueError(entry)
        out[key.strip()] = value.strip()
    return out
