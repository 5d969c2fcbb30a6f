"""Whether a decided verdict answers the seed's claim where it ran: a claim about one GPU
architecture is not tested on another, and a repro whose subject is a stand-in for the seed's
(its model, its pipeline) tests the stand-in, not the claim. Either makes the status inconclusive."""

from __future__ import annotations

from collections.abc import Sequence

from repro.core.results import DECIDED, Verdict

ARCH_REASON = "not on this architecture"
STAND_IN_REASON = "not the seed's subject"
# Joins the reasons in ``claim.reason``; the report's claim cell shortens each part on its own.
JOIN = "; and "


def not_tested_here(
    v: Verdict,
    claim_arch: Sequence[str],
    cc: str | None,
    gpu: str | None = None,
    stand_in: str = "",
) -> Verdict:
    """``v`` made ``inconclusive`` when its decided status does not answer the seed's claim here.

    ``claim_arch``: the compute capabilities the claim is about; on another (``cc``), the claim was
    not tested (a ratio on an H200 says nothing about a cliff seen only on sm_120). ``stand_in``:
    what runs in place of the seed's subject, when the repro never runs the subject itself (the
    claim is then untested on every GPU). The finding keeps what was measured, on this GPU, after
    the reasons; ``not_run`` names the headline with their short forms.
    """
    if v.status not in DECIDED:
        return v
    reasons, short = [], []
    if claim_arch and cc and cc not in claim_arch:
        want = ", ".join(f"sm_{a.replace('.', '')}" for a in claim_arch)
        reasons.append(f"{ARCH_REASON}: the claim is about {want}; {gpu or 'this GPU'} is sm_{cc.replace('.', '')}")
        short.append(ARCH_REASON)
    if stand_in:
        reasons.append(f"{STAND_IN_REASON}: {stand_in}")
        short.append(STAND_IN_REASON)
    if not reasons:
        return v
    reason = JOIN.join(reasons)
    measured_words = v.finding
    for lead_words in ("Reproduced: ", "Not reproduced (inconclusive): ", "Not reproduced: "):
        if measured_words.startswith(lead_words):
            measured_words = measured_words[len(lead_words) :]
            break
    finding = f"Inconclusive, the seed's claim was not tested ({reason}); instead, on this GPU: {measured_words}"
    headline = v.headline or v.metric
    label = next((str(r.get("label")) for r in v.breakdown if r.get("headline")), headline)
    not_run = (*v.not_run, {"comparison": headline, "label": label, "reason": "; ".join(short)})
    fields = {k: getattr(v, k) for k in Verdict.__dataclass_fields__}
    claim = {"tested": False, "reason": reason}
    return Verdict(**{**fields, "status": "inconclusive", "finding": finding, "claim": claim, "not_run": not_run})


__all__ = ["ARCH_REASON", "JOIN", "STAND_IN_REASON", "not_tested_here"]
