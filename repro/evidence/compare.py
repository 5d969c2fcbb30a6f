"""``repro compare``: the same repros side by side across environments, then how the environments differ."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.core.errors import UsageError
from repro.core.results import VariantResult
from repro.env.fingerprint import essentials
from repro.evidence import artifact, band, cliff_report, model
from repro.evidence.agreement import agree, reach
from repro.evidence.markdown import REPORT_LIMIT, code, ratio_with_ci, table, text
from repro.evidence.model import Artifact, Cliff, Doc
from repro.evidence.variants import per_call_us

COMPARE_KIND = "gpu-repro.compare"
COMPARE_SCHEMA_VERSION = "1.1"  # 1.1: "cliffs", the boundaries of `repro cliff` artifacts
# Kernels shown per compared variant: the heaviest one is what a cuBLAS/cuDNN heuristic picked;
# the JSON carries a few more for a reader who wants the runners-up.
KEY_KERNELS_MD = 1
KEY_KERNELS_JSON = 3
_VALUE_CHARS = 80  # per cell in the markdown diff; the JSON keeps values whole
_TITLE_CHARS = 100  # longer "X vs Y" titles give way to "N environments (A, B)"

# Fingerprint fields that change from run to run on one unchanged stack. Listing them would bury
# the differences that matter (versions, knobs, env vars) under noise, so they are left out.
VOLATILE_PREFIXES = (
    "collect_env",  # verbatim text; its facts are in the structured fields already
    "ceilings",  # measured peaks: they carry measurement noise by nature
    "gpu.state",  # clocks, temperature, power, processes at the moment of the probe
)
VOLATILE_LEAVES = frozenset(
    {
        "sm_clock_mhz",
        "mem_clock_mhz",
        "clocks_event_reasons",
        "temperature_c",
        "power_w",
        "compute_pids",
        "pid",
        "pids",
        "created_utc",
        "timestamp",
    }
)
_RUN_DIR_RE = re.compile(r"^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{4,}$")
_ABSENT = object()


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Environment:
    """One column group: the artifacts of one run (or one file) and the label they go by."""

    label: str
    source: Path
    artifacts: tuple[tuple[Path, Doc], ...]  # (path, typed document), sorted by repro id

    @property
    def first(self) -> Doc:
        """Its first artifact: it stands for the environment (all were taken in one stack)."""
        return self.artifacts[0][1]

    @property
    def fingerprint(self) -> Mapping[str, Any]:
        """The environment's fingerprint, taken from its first artifact."""
        return self.first.fingerprint

    def doc(self, repro_id: str) -> Artifact | None:
        """This environment's artifact for ``repro_id``, if it ran that repro."""
        return next((d for d in self.runs() if d.repro.id == repro_id), None)

    def runs(self) -> list[Artifact]:
        """Its repro runs (cliff searches left out)."""
        return [d for _, d in self.artifacts if isinstance(d, Artifact)]

    def cliffs(self) -> list[Cliff]:
        """Its ``repro cliff`` artifacts (compared as boundaries, not as verdicts)."""
        return [d for _, d in self.artifacts if isinstance(d, Cliff)]

    def run_ids(self) -> list[str]:
        """The run ids its artifacts came from (one, unless single files were given)."""
        return sorted({d.run.run_id for _, d in self.artifacts})


def _has_artifacts(folder: Path) -> bool:
    return any(not f.name.startswith(".") for f in folder.glob("*.json"))


def artifact_files(path: Path) -> list[Path]:
    """An artifact file, a run folder, or a folder of run folders (its newest run) to artifact files."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such file or folder; expected an artifact, a run folder or a lane folder")
    if path.is_file() or _has_artifacts(path):
        return artifact.expand([path])
    runs = [d for d in path.iterdir() if d.is_dir() and _has_artifacts(d)]
    if not runs:
        raise UsageError(
            f"{path}: holds no artifacts and no run folders; expected an artifact (.json), "
            "a run folder, or a folder of run folders"
        )
    # Run ids start with a UTC timestamp, so the greatest name is the newest run.
    named = [d for d in runs if _RUN_DIR_RE.match(d.name)] or runs
    return artifact.expand([max(named, key=lambda d: d.name)])


def base_label(docs: Sequence[Doc]) -> str:
    """The lane an artifact was made in (GPU_REPRO_LANE), else ``torch X / GPU Y / run-id``."""
    lane = docs[0].machine.lane
    if lane:
        return lane
    e = essentials(docs[0].fingerprint)
    run_id = max(d.run.run_id for d in docs)
    return f"torch {e['torch'] or '-'} / {e['gpu']} / {run_id}"


def load_environments(paths: Sequence[Path]) -> list[Environment]:
    """One environment per input path; labels are made unique (run id, then a counter)."""
    if not paths:
        raise UsageError("no input; expected artifact files, run folders or lane folders")
    loaded = []
    for p in paths:
        files = artifact_files(Path(p))
        pairs = sorted(((f, model.load(f)) for f in files), key=lambda fd: fd[1].repro.id)
        seen = [d.key if isinstance(d, Cliff) else d.repro.id for _, d in pairs]
        dup = next((r for r in seen if seen.count(r) > 1), None)
        if dup:
            raise UsageError(f"{p}: holds two artifacts for {dup!r}; expected one per repro in an environment")
        loaded.append((Path(p), tuple(pairs)))
    base = [base_label([d for _, d in pairs]) for _, pairs in loaded]
    # Two runs of one lane (say, before and after a driver update): the run id tells them apart.
    labels = [
        f"{lab} ({max(d.run.run_id for _, d in pairs)})" if base.count(lab) > 1 and "/" not in lab else lab
        for lab, (_, pairs) in zip(base, loaded, strict=True)
    ]
    # The same input given twice: number the repeats.
    labels = [f"{lab} #{labels[:i].count(lab) + 1}" if lab in labels[:i] else lab for i, lab in enumerate(labels)]
    return [Environment(label, src, pairs) for label, (src, pairs) in zip(labels, loaded, strict=True)]


# --------------------------------------------------------------------------- per repro


def compared_variants(doc: Artifact) -> tuple[list[VariantResult], bool]:
    """The variants the verdict's ratio compares, and whether the artifact said so.

    An artifact whose verdict names them (``verdict.variants``) is taken at its word; for one
    that does not, the first two measured variants stand in (numerator, denominator by the
    repros' convention).
    """
    by_name = {v.name: v for v in doc.variants}
    named = doc.verdict.variants
    if named and all(n in by_name for n in named):
        return [by_name[n] for n in named], True
    return [v for v in doc.variants if v.status == "ok"][:2], False


def key_kernels(doc: Artifact, n: int = KEY_KERNELS_JSON) -> list[dict[str, Any]]:
    """Per compared variant, its ``n`` heaviest kernels (name, us per call)."""
    variants, _ = compared_variants(doc)
    return [
        {
            "variant": v.name,
            "kernel_source": v.kernel_source,
            "kernels": [{"name": k.name, "us_per_call": round(per_call_us(k), 3)} for k in v.kernels[:n]],
        }
        for v in variants
    ]


def result(path: Path, doc: Artifact) -> dict[str, Any]:
    """The comparable facts of one artifact."""
    v = doc.verdict
    _, named = compared_variants(doc)
    return {
        "status": v.status,
        "value": v.value,
        "ci_low": v.ci_low,
        "ci_high": v.ci_high,
        "ci_level": v.ci_level,
        "validity": doc.validity.flag,
        "error": doc.error.kind if doc.error is not None else None,
        "smoke": doc.run.smoke,
        "device": doc.run.device,
        "run_id": doc.run.run_id,
        "artifact": str(path),
        "variants_named_by_verdict": named,
        "key_kernels": key_kernels(doc),
    }


def _differing_keys(dicts: Sequence[Mapping[str, Any] | None]) -> list[str]:
    present = [d for d in dicts if d is not None]
    keys = sorted({k for d in present for k in d})
    return [k for k in keys if len({json.dumps(d.get(k), sort_keys=True) for d in present}) > 1]


def env_keys(n: int) -> list[str]:
    """Short column names for ``n`` environments: A, B, C ... (env27, env28 ... past Z)."""
    return [chr(ord("A") + i) if i < 26 else f"env{i + 1}" for i in range(n)]


def repro_notes(rid: str, docs: Sequence[Artifact | None], labels: Sequence[str]) -> list[str]:
    """Reasons a side-by-side reading of ``rid`` could mislead: other params, other repro code, smoke runs.

    ``labels`` name the environments as the reader sees them (the short keys in markdown).
    """
    notes = []
    params = _differing_keys([d.repro.params if d else None for d in docs])
    for name in params:
        values = [
            f"{text(_value(d.repro.params.get(name, '(not set)')))} in {lab}"
            for lab, d in zip(labels, docs, strict=True)
            if d
        ]
        notes.append(f"`{rid}`: param `{text(name)}` differs between environments: {'; '.join(values)}")
    sources = {d.repro.source_sha256 for d in docs if d}
    if len(sources) > 1:
        notes.append(f"`{rid}`: the repro's source differs between environments (source_sha256)")
    smoke = [lab for lab, d in zip(labels, docs, strict=True) if d and d.run.smoke]
    if smoke and len(smoke) < sum(1 for d in docs if d):
        notes.append(f"`{rid}`: smoke run (shrunken sizes) in {', '.join(text(s) for s in smoke)} only")
    notes += _band_notes(rid, docs, labels)
    return notes


def _band_notes(rid: str, docs: Sequence[Artifact | None], labels: Sequence[str]) -> list[str]:
    """Each measured headline against the first, judged by the spread between GPUs of their model."""
    measured = []
    for lab, d in zip(labels, docs, strict=True):
        key = band.key_of(d, joining=False) if d else None
        if d and key is not None:
            measured.append((lab, d, key))
    if len(measured) < 2:
        return []
    (base_label, base, base_key), rest = measured[0], measured[1:]
    # The shipped band less the runs compared: committed runs are among its runs (band.without).
    found = band.lookup(base, band.without(band.load(), [d.run.run_id for _, d, _ in measured]))
    out = []
    for lab, d, key in rest:
        a, b = float(base.verdict.value or 0.0), float(d.verdict.value or 0.0)  # measured: key_of saw a value
        change = f"{text(lab)} reads {b:.4g} against {a:.4g} in {text(base_label)} ({(b / a - 1) * 100:+.1f}%)"
        if key != base_key:
            out.append(
                f"`{rid}`: {change}; other GPU models, params or headline comparisons, so no re-run band applies"
            )
            continue
        extent = ""
        if found:
            below, above = found.sides()
            extent = (
                f" (the band: -{below * 100:.1f}%/+{above * 100:.1f}% of {found.center:.4g} over {len(found.points)} "
                f"GPUs; two runs agree within ±{reach(found)[0] * 100:.1f}%)"
            )
        out.append(f"`{rid}`: {change}: {agree(a, b, found)}{extent}")
    return out


# --------------------------------------------------------------------------- fingerprints


def is_volatile(key: str) -> bool:
    """True for fingerprint fields that change between runs on one stack (see VOLATILE_*)."""
    if any(key == p or key.startswith(p + ".") for p in VOLATILE_PREFIXES):
        return True
    return bool(VOLATILE_LEAVES.intersection(key.split(".")))


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested objects to dotted keys; lists and scalars are leaves, empty objects vanish."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def fingerprint_diff(envs: Sequence[Environment]) -> list[dict[str, Any]]:
    """Fingerprint fields (dotted keys) whose values differ between environments, by section then name.

    ``values`` maps each environment's label to its value; an environment that lacks the
    field is left out of ``values``.
    """
    flat = [{k: v for k, v in flatten(e.fingerprint).items() if not is_volatile(k)} for e in envs]
    sections: dict[str, None] = {}
    for e in envs:
        sections.update(dict.fromkeys(e.fingerprint))
    rank = {name: i for i, name in enumerate(sections)}
    keys = sorted({k for f in flat for k in f}, key=lambda k: (rank.get(k.split(".")[0], len(rank)), k))
    rows = []
    for key in keys:
        seen = [f.get(key, _ABSENT) for f in flat]
        if len({"\0absent" if v is _ABSENT else json.dumps(v, sort_keys=True) for v in seen}) > 1:
            rows.append(
                {"field": key, "values": {e.label: v for e, v in zip(envs, seen, strict=True) if v is not _ABSENT}}
            )
    return rows


# --------------------------------------------------------------------------- the comparison


def build(envs: Sequence[Environment]) -> dict[str, Any]:
    """The comparison as one JSON-ready document (what ``--json`` prints and markdown renders)."""
    labels = [e.label for e in envs]
    keys = env_keys(len(envs))
    environments = []
    for key, e in zip(keys, envs, strict=True):
        ess = essentials(e.fingerprint)
        facts = e.first.machine
        environments.append(
            {
                "key": key,
                "label": e.label,
                "source": str(e.source),
                "run_ids": e.run_ids(),
                "lane": facts.lane,
                "base_image": facts.image,
                "base_image_digest": facts.image_digest,
                "gpu": ess["gpu"],
                "driver": ess["driver"],
                "torch": ess["torch"],
                "cuda": ess["cuda"],
                "repros": [d.repro.id for _, d in e.artifacts],
            }
        )
    ids: dict[str, None] = {}
    for e in envs:
        ids.update(dict.fromkeys(d.repro.id for d in e.runs()))
    repros, notes = [], []
    for rid in sorted(ids):
        docs = [e.doc(rid) for e in envs]
        first = next(d for d in docs if d is not None)
        paths = {e.label: p for e in envs for p, d in e.artifacts if isinstance(d, Artifact) and d.repro.id == rid}
        repros.append(
            {
                "id": rid,
                "title": first.repro.title,
                "metric": first.verdict.metric,
                "threshold": first.verdict.threshold,
                "results": {
                    lab: (result(paths[lab], d) if d is not None else None) for lab, d in zip(labels, docs, strict=True)
                },
            }
        )
        notes += repro_notes(rid, docs, keys)
    return {
        "kind": COMPARE_KIND,
        "schema_version": COMPARE_SCHEMA_VERSION,
        "environments": environments,
        "repros": repros,
        "cliffs": cliff_report.compare_rows([(e.label, e.cliffs()) for e in envs]),
        "fingerprint_diff": fingerprint_diff(envs),
        "ignored_fields": {"prefixes": list(VOLATILE_PREFIXES), "leaves": sorted(VOLATILE_LEAVES)},
        "notes": notes,
    }


# --------------------------------------------------------------------------- markdown


def _short_image(image: str | None) -> str:
    if not image:
        return "-"
    name, _, digest = image.partition("@")
    return text(f"{name}@{digest[:19]}" if digest else name, cell=True)


def _cell(doc_result: Mapping[str, Any] | None) -> str:
    if doc_result is None:
        return "not run"
    r = doc_result
    status = f"**{text(r['status'], cell=True)}**" + (f" ({text(r['error'], cell=True)})" if r["error"] else "")
    ratio = ratio_with_ci(r["value"], r["ci_low"], r["ci_high"], "95% CI")
    lines = [status, ratio]
    suspect = r["validity"] == "suspect"
    flags = [f for f, on in (("smoke", r["smoke"]), (f"validity: {text(r['validity'], cell=True)}", suspect)) if on]
    if flags:
        lines.append(f"_{', '.join(flags)}_")
    for kv in r["key_kernels"]:
        top = kv["kernels"][:KEY_KERNELS_MD]
        names = ", ".join(f"{code(k['name'], 70)} ({k['us_per_call']:.1f} us)" for k in top) or "no kernels captured"
        lines.append(f"{text(kv['variant'], cell=True)}: {names}")
    return "<br>".join(lines)


def _value(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        out = json.dumps(v)
    elif isinstance(v, list):
        out = ", ".join(str(x) for x in v) if v else "[]"
    else:
        out = str(v)
    return text(out if len(out) <= _VALUE_CHARS else out[: _VALUE_CHARS - 3] + "...", cell=True)


def _diff_table(rows: Sequence[Mapping[str, Any]], labels: Sequence[str], keys: Sequence[str]) -> str:
    body = [
        [code(r["field"])] + [_value(r["values"][lab]) if lab in r["values"] else "-" for lab in labels] for r in rows
    ]
    return table(body, ["field", *keys])


def markdown(doc: Mapping[str, Any], limit: int = REPORT_LIMIT) -> str:
    """GitHub-flavoured markdown for a comparison, kept under ``limit`` characters.

    Columns are headed by short keys (A, B, ...) that the environment table resolves: a label
    such as ``torch 2.11.0+cu130 / NVIDIA H200 / <run id>`` would make every table too wide to read.
    """
    envs = doc["environments"]
    labels = [e["label"] for e in envs]
    keys = [e.get("key") or k for e, k in zip(envs, env_keys(len(envs)), strict=True)]
    env_rows = [
        [
            f"**{k}**",
            text(e["label"], cell=True),
            text(e["gpu"], cell=True),
            text(e["driver"] or "-", cell=True),
            text(e["torch"] or "-", cell=True),
            text(e["cuda"] or "-", cell=True),
            _short_image(e["base_image"]),
            text(", ".join(e["run_ids"]), cell=True),
        ]
        for k, e in zip(keys, envs, strict=True)
    ]
    title = " vs ".join(labels)
    if len(title) > _TITLE_CHARS:
        title = f"{len(labels)} environments ({', '.join(keys)})"
    head = [
        f"# gpu-repro compare: {text(title)}",
        "",
        table(env_rows, ["env", "label", "GPU", "driver", "torch", "CUDA", "base image", "run"]),
        "",
    ]
    if doc["repros"] or not doc.get("cliffs"):
        head += [
            table(
                [
                    [code(r["id"]), f"{r['threshold']:g}"] + [_cell(r["results"][lab]) for lab in labels]
                    for r in doc["repros"]
                ],
                ["repro", "threshold", *keys],
            ),
            "",
        ]
    if doc.get("cliffs"):
        head += [cliff_report.compare_markdown(doc["cliffs"], labels, keys)]
    named = [res["variants_named_by_verdict"] for r in doc["repros"] for res in r["results"].values() if res]
    if all(named):
        head += ["_Kernels: the heaviest kernel of each variant the verdict compares, us per call._", ""]
    else:
        head += [
            "_Kernels: the heaviest kernel, us per call, of each variant the verdict compares where the artifact "
            "names them, else of its first two measured variants._",
            "",
        ]
    if doc["notes"]:
        head += ["Read with care:", "", *[f"- {n}" for n in doc["notes"]], ""]
    head += ["## Fingerprint fields that differ", ""]
    ignored = ", ".join(doc["ignored_fields"]["prefixes"])
    foot = (
        f"_Each environment's fingerprint is flattened to dotted keys and compared; volatile fields "
        f"({ignored}, clocks, temperatures, power, process ids) are left out. `-`: not recorded there._\n"
    )
    rows = list(doc["fingerprint_diff"])
    if not rows:
        return "\n".join(head) + "\n_No fingerprint field differs._\n\n" + foot
    dropped = 0
    while True:
        parts = [*head, _diff_table(rows, labels, keys), ""]
        if dropped:
            parts.append(f"_{dropped} more differing fields left out to fit GitHub's size limit; see --json._\n")
        out = "\n".join(parts) + "\n" + foot
        if len(out) <= limit or len(rows) <= 1:
            return out
        cut = max(1, len(rows) // 10)
        rows, dropped = rows[:-cut], dropped + cut


def compare(paths: Iterable[Path]) -> dict[str, Any]:
    """Load the inputs (two or more environments) and build the comparison document."""
    given = list(paths)
    envs = load_environments(given)  # a missing or empty input is named first
    if len(given) == 1:
        raise UsageError(f"compare needs two or more environments to set side by side; got only {given[0]}")
    return build(envs)
