"""``repro images lock``: each lane's base tag resolved to the registry's digest and recorded."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from repro.evidence import artifact
from repro.lanes.images.engine import Log, one_line, stderr_log, transport_errors
from repro.lanes.images.lock import DIGEST_RE, Lane, Lock, write_lock


@dataclass
class LockOutcome:
    """What ``repro images lock`` did per lane."""

    updated: dict[str, str] = field(default_factory=dict)
    unchanged: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def resolve_digests(lock: Lock, lanes: Sequence[Lane], *, docker_client: Any, log: Log = stderr_log) -> LockOutcome:
    """Ask the registry for each lane's base digest and record it; a failure keeps the old entry.

    Only a ``sha256:`` digest the registry actually returned is ever written.
    """
    outcome = LockOutcome()
    updates: dict[str, dict[str, Any]] = {}
    for lane in lanes:
        try:
            digest = docker_client.images.get_registry_data(lane.base).id
        except transport_errors() as exc:
            outcome.failed[lane.name] = one_line(exc)
            log(f"{lane.name}: could not resolve {lane.base}: {outcome.failed[lane.name]}; kept the old entry")
            continue
        if not isinstance(digest, str) or not DIGEST_RE.match(digest):
            outcome.failed[lane.name] = f"the registry answered {digest!r}, not a sha256 digest"
            log(f"{lane.name}: {outcome.failed[lane.name]}; kept the old entry")
            continue
        if digest == lane.digest:
            outcome.unchanged.append(lane.name)
            log(f"{lane.name}: {lane.base} still {digest}")
            continue
        updates[lane.name] = {"digest": digest, "resolved_utc": artifact.utc_now()}
        outcome.updated[lane.name] = digest
        log(f"{lane.name}: {lane.base} -> {digest}" + (f" (was {lane.digest})" if lane.digest else ""))
    if updates:
        write_lock(lock, updates)
    return outcome
