"""The matrix spec (schemas/matrix.schema.json) and its expansion into numbered cells."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.core.errors import UsageError
from repro.core.redact import REDACTED, is_secret

SCHEMA = "matrix.schema.json"
PLAN_FILE = "plan.json"  # in the matrix folder: what each cell runs, read by `repro matrix cell`
PLAN_VERSION = 1


SECRET_PREFIX = "GPU_REPRO_SECRET_"


def secret_var(lane: str, name: str) -> str:
    """The variable that carries lane ``lane``'s secret ``name`` to a cell (a Slurm job's environment holds
    every lane's: the lane's hash keeps two lanes' values of one name apart)."""
    return f"{SECRET_PREFIX}{hashlib.sha256(lane.encode()).hexdigest()[:8]}_{name}"


@dataclass(frozen=True)
class Lane:
    """One stack: an image (run by an engine or pyxis), or a native Python on the node."""

    name: str
    image: str | None = None
    digest: str | None = None
    python: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    engine_args: tuple[str, ...] = ()
    secret_env: frozenset[str] = frozenset()

    @property
    def secret_names(self) -> tuple[str, ...]:
        """Names in ``env`` whose values never go to disk: marked in ``secret_env``, caught by the redaction
        rules (repro.core.redact), or already ``<redacted>`` (a plan read back from its file)."""
        return tuple(sorted(k for k, v in self.env.items() if k in self.secret_env or v == REDACTED or is_secret(k, v)))

    def secret_values(self) -> dict[str, str]:
        """The secrets as the launcher passes them to a cell's process: ``{secret_var(lane, name): value}``."""
        return {secret_var(self.name, k): self.env[k] for k in self.secret_names if self.env[k] != REDACTED}

    @property
    def ref(self) -> str | None:
        """What an engine runs: ``image@digest`` when pinned, else the image as written; None when native."""
        if self.image is None:
            return None
        return f"{self.image}@{self.digest}" if self.digest else self.image


@dataclass(frozen=True)
class Gpus:
    """A GPU selector: which product (SKU) and how many per cell."""

    count: int = 1
    sku: str | None = None
    slurm_gres: str | None = None
    slurm_constraint: str | None = None

    @property
    def label(self) -> str:
        """Short text for tables: ``1x NVIDIA-H200``, ``no GPU``."""
        if self.count == 0:
            return "no GPU"
        return f"{self.count}x {self.sku or 'any'}"


@dataclass(frozen=True)
class Cell:
    """One run: a repro with its --sets, in one lane, on one GPU selector. ``index`` is stable."""

    index: int
    lane: Lane
    repro_id: str
    sets: Mapping[str, str]
    gpus: Gpus
    group: int  # which GPU selector (one Slurm array / k8s Job per lane and group)
    # The run folder the runner made for this launch (``cells/<id>/<attempt>``), handed to the cell as
    # ``--attempt``; None where the cell makes its own (a k8s pod, a dry run).
    attempt: str | None = None

    @property
    def id(self) -> str:
        """Folder and row name: ``003-native-5090-linear`` (``-g1`` appended for a second GPU selector)."""
        suffix = f"-g{self.group}" if self.group else ""
        return f"{self.index:03d}-{self.lane.name}-{self.repro_id}{suffix}"


@dataclass(frozen=True)
class Plan:
    """A checked spec and its cells, in index order."""

    name: str
    smoke: bool
    timeout_s: float
    collect_env: bool
    budget_s: float | None
    repro_paths: tuple[str, ...]
    cells: tuple[Cell, ...]
    slurm: Mapping[str, Any]
    k8s: Mapping[str, Any]
    spec: Mapping[str, Any]  # as read, for the plan file and the resume check
    source: str = ""

    @property
    def public_spec(self) -> dict[str, Any]:
        """The spec as it may be written down: every lane's secret env values ``<redacted>``."""
        doc: dict[str, Any] = json.loads(json.dumps(self.spec))
        lanes = {c.lane.name: c.lane for c in self.cells}
        for raw in doc.get("lanes") or []:
            lane = lanes.get(raw.get("name"))
            for name in lane.secret_names if lane is not None else ():
                raw["env"][name] = REDACTED
        return doc

    @property
    def digest(self) -> str:
        """A hash of the spec (secrets redacted): a resumed run must carry on the same matrix, not a different one."""
        return hashlib.sha256(json.dumps(self.public_spec, sort_keys=True).encode()).hexdigest()[:16]

    def cell(self, index: int) -> Cell:
        """The cell numbered ``index``; an unknown one is a UsageError naming the range."""
        for c in self.cells:
            if c.index == index:
                return c
        raise UsageError(f"cell {index}: not in the plan; expected 0..{len(self.cells) - 1}")


def _validator() -> Any:
    from repro.evidence.artifact import validator

    return validator(SCHEMA)


def _where(path: Sequence[Any]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".") or "(top level)"


def schema_errors(doc: Any) -> list[str]:
    """Every schema violation of a spec as ``field: message``, the most specific first."""
    errors = sorted(_validator().iter_errors(doc), key=lambda e: (-len(e.absolute_path), str(e.absolute_path)))
    return [f"{_where(list(e.absolute_path))}: {e.message}" for e in errors]


def _sets(raw: Mapping[str, Any]) -> dict[str, str]:
    # --set takes text; JSON numbers and booleans are written the way a shell user would type them.
    return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in raw.items()}


def _check_repros(plan_repros: Sequence[tuple[str, dict[str, str]]], paths: Sequence[str], smoke: bool) -> None:
    """Every repro id and --set checked against this machine's catalog, so a typo fails before submission."""
    from repro.core.spec import build_params
    from repro.run import catalog

    known = catalog.load([Path(p) for p in paths])
    for i, (rid, sets) in enumerate(plan_repros):
        if rid not in known:
            raise UsageError(f"repros[{i}]: unknown repro {rid!r}; known: {', '.join(sorted(known))}")
        build_params(rid, known[rid].Params, sets, smoke=smoke)


def build(spec: Any, source: str = "", check_catalog: bool = True) -> Plan:
    """Check ``spec`` (schema, then meaning) and expand it: GPU selector, then lane, then repro."""
    errors = schema_errors(spec)
    if errors:
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        raise UsageError(f"{source or 'matrix spec'}: {errors[0]}{more}")
    lanes: list[Lane] = []
    for i, raw in enumerate(spec["lanes"]):
        if raw.get("digest") and not raw.get("image"):
            raise UsageError(f"{source}: lanes[{i}].digest: a digest pins an image; expected 'image' beside it")
        if raw.get("image") and raw.get("python"):
            raise UsageError(f"{source}: lanes[{i}]: 'image' and 'python' both given; expected one (image or native)")
        if any(raw["name"] == lane.name for lane in lanes):
            raise UsageError(f"{source}: lanes[{i}].name: {raw['name']!r} appears twice; expected unique lane names")
        lanes.append(
            Lane(
                name=raw["name"],
                image=raw.get("image"),
                digest=raw.get("digest"),
                python=raw.get("python"),
                env=dict(raw.get("env") or {}),
                engine_args=tuple(raw.get("engine_args") or ()),
                secret_env=frozenset(raw.get("secret_env") or ()),
            )
        )
        unknown = sorted(set(raw.get("secret_env") or ()) - set(raw.get("env") or {}))
        if unknown:
            raise UsageError(f"{source}: lanes[{i}].secret_env: {', '.join(unknown)} not in env; expected names in env")
    repros = [(r, {}) if isinstance(r, str) else (r["id"], _sets(r.get("set") or {})) for r in spec["repros"]]
    smoke = bool(spec.get("smoke", False))
    paths = tuple(spec.get("repro_paths") or ())
    if check_catalog:
        _check_repros(repros, paths, smoke)
    selectors = [
        Gpus(
            count=int(g.get("count", 1)),
            sku=g.get("sku"),
            slurm_gres=g.get("slurm_gres"),
            slurm_constraint=g.get("slurm_constraint"),
        )
        for g in spec.get("gpus") or [{"count": 1}]
    ]
    cells: list[Cell] = []
    for group, gpus in enumerate(selectors):
        for lane in lanes:
            for rid, sets in repros:
                cells.append(Cell(len(cells), lane, rid, sets, gpus, group))
    return Plan(
        name=spec["name"],
        smoke=smoke,
        timeout_s=float(spec.get("timeout_s", 900)),
        collect_env=bool(spec.get("collect_env", True)),
        budget_s=float(spec["budget_s"]) if "budget_s" in spec else None,
        repro_paths=paths,
        cells=tuple(cells),
        slurm=dict(spec.get("slurm") or {}),
        k8s=dict(spec.get("k8s") or {}),
        spec=spec,
        source=source,
    )


def load(path: Path, check_catalog: bool = True) -> Plan:
    """Read a spec file (JSON) and build its plan; a missing or malformed file is a UsageError naming it."""
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it ({exc.strerror or exc}); expected a matrix spec (JSON)") from None
    except ValueError as exc:  # JSONDecodeError and undecodable bytes
        reason = str(exc).splitlines()[0][:200]
        raise UsageError(f"{path}: not valid JSON ({reason}); expected a matrix spec") from None
    return build(doc, str(path), check_catalog=check_catalog)


def default_python() -> str:
    """The Python a native lane runs when it names none: the one running ``repro matrix``."""
    return sys.executable


def to_doc(plan: Plan) -> dict[str, Any]:
    """The plan file's content: the spec (secrets redacted), its digest, and every cell as a cell task needs it."""
    return {
        "plan_version": PLAN_VERSION,
        "name": plan.name,
        "digest": plan.digest,
        "spec": plan.public_spec,  # secrets reach a cell through its environment, never this file
        "cells": [
            {
                "index": c.index,
                "id": c.id,
                "lane": c.lane.name,
                "image": c.lane.ref,
                "repro": c.repro_id,
                "set": dict(c.sets),
                "gpus": {"count": c.gpus.count, "sku": c.gpus.sku},
            }
            for c in plan.cells
        ],
    }


def rows(plan: Plan) -> list[list[Any]]:
    """One row per cell for ``repro matrix plan``."""
    return [
        [
            c.index,
            c.id,
            c.lane.name,
            c.lane.ref or f"native ({c.lane.python or 'this python'})",
            c.repro_id,
            " ".join(f"{k}={v}" for k, v in c.sets.items()) or "-",
            c.gpus.label,
        ]
        for c in plan.cells
    ]


ROW_HEADERS = ["#", "cell", "lane", "image", "repro", "--set", "gpus"]
