"""Re-runs made from a run's own bundle: artifacts its maker attached (``attached/*.json``) after installing
the bundled harness somewhere fresh and running a section's ``repro run`` line. The report says which lines
were run that way, with what, and how each result sits against the run's own headline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from repro.core.verdict import ratio_places
from repro.evidence import band
from repro.evidence.markdown import code, ratio_with_ci, text, verdict_label
from repro.evidence.model import Artifact


def _torch_words(doc: Artifact) -> str:
    """Where the re-run's torch came from: a package folder outside its own venv is the machine's."""
    where = str(doc.machine.torch_install.get("location") or "")
    prefix = str(doc.machine.host.python_env.get("prefix") or "")
    if where and prefix and not where.startswith(prefix.rstrip("/") + "/"):
        return f"torch was the machine's ({code(where)}), not installed by the re-run"
    return f"torch from {code(where)}" if where else "torch's location not recorded"


def words(docs: Sequence[Artifact], reruns: Mapping[str, Any], bands: Sequence[band.Band]) -> str:
    """`` Run from this bundle on this machine: ...``; "" when no attached artifact re-ran one of ``docs``'
    repros. ``reruns``: attached file name -> its artifact (``model.of``'s), only artifacts of this run's
    repros count."""
    ran = {d.repro.id: d for d in docs}
    rows: list[tuple[str, Artifact, Artifact]] = []
    for name, doc in sorted(reruns.items()):
        if isinstance(doc, Artifact) and doc.repro.id in ran and doc.run.run_id != ran[doc.repro.id].run.run_id:
            rows.append((name, doc, ran[doc.repro.id]))
    if not rows:
        return ""
    said, digests, installs, torches = [], set(), set(), set()
    for name, again, first in rows:
        v, w = again.verdict, first.verdict
        places = ratio_places(w.value, w.ci_low, w.ci_high) if w.value and w.ci_low and w.ci_high else None
        got = ratio_with_ci(v.value, v.ci_low, v.ci_high, verdict_label(v), places=places)
        agreement = ""
        if isinstance(v.value, float) and isinstance(w.value, float) and w.ci_low is not None and w.ci_high:
            floor = (w.ci_high - w.ci_low) / 2 / w.value if w.value else 0.0
            agreement = f", {band.agree(w.value, v.value, band.lookup(first, bands), floor)}"
        said.append(f"{text(again.repro.id)} {got}{agreement} ({code('attached/' + name)})")
        theirs, ours = again.machine.harness.source_sha256, first.machine.harness.source_sha256
        digests.add(bool(theirs) and theirs == ours)
        installs.add(text(str(again.machine.host.python_env.get("harness_install") or "harness install not recorded")))
        torches.add(_torch_words(again))
    same = "the same harness digest as this run" if digests == {True} else "not all with this run's harness digest"
    how = "; ".join(sorted(installs | torches))  # each already inert text
    left = sorted(set(ran) - {a.repro.id for _, a, _ in rows})
    rest = f" Not run from the bundle: the lines of {', '.join(map(text, left))}." if left else ""
    return f" Run here from this bundle, in a fresh venv ({how}; {same}): {'; '.join(said)}.{rest}"
