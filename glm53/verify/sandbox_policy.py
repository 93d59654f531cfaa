"""The sandbox's isolation level as a policy. The verifier reports a level (full, partial, none: partial when a
layer is missing, as the user drop is without root); a command whose results are the verifier's verdicts (`rl`,
`eval`, `run`, `sweep`) refuses, before writing anything, to run at a level below full unless given
--accept-partial-isolation, and its receipts record the report with `accepted_partial`."""

from __future__ import annotations

from ..runtime.settings import flag_name
from .verifier import isolation_report

ACCEPT_FLAG = flag_name("accept_partial_isolation")


def missing_layers(report: dict) -> list[str]:
    """The layers that are off, each with the first clause of its reason: "drop-user (not root)"."""
    missing = []
    for layer, state in report.items():
        if layer != "level" and not str(state).startswith("on"):
            reason = str(state).removeprefix("off").lstrip(": ").split(";")[0].strip()
            missing.append(f"{layer} ({reason})" if reason else layer)
    return missing


def sandbox_record(accepted_partial: bool, pool=None) -> dict:
    """The verifier's isolation report (starting a sandbox worker if none ran yet) with `accepted_partial`."""
    return {**isolation_report(pool), "accepted_partial": bool(accepted_partial)}


def require_isolation(accept_partial: bool, command: str, pool=None) -> dict:
    """The sandbox's record; a ValueError (one line, naming the missing layers and the flag) when its level is
    below full and `accept_partial` is false."""
    record = sandbox_record(accept_partial, pool)
    if record["level"] != "full" and not accept_partial:
        raise ValueError(f"the sandbox lacks {', '.join(missing_layers(record)) or 'an isolation layer'} (isolation "
                         f"level {record['level']}); give {ACCEPT_FLAG} to run {command} anyway (its receipt records "
                         "it), or run where every layer is available (as root on Linux)")
    return record
