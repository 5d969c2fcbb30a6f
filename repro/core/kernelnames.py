"""Readable kernel names: drop what every name shares (namespaces, the parameter list, scalar
template arguments) and keep what tells two kernels apart (the functors and their nesting).

``short_names`` shortens a set of names together: a name takes its shortest form only when no
other name in the set shortens to the same text, so two rows never read alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["recut", "short_names", "strip"]

_LAMBDA = re.compile(r"::\{lambda\([^)]*\)#\d+\}")
_CALL_OPERATOR = re.compile(r"::operator\(\)\([^()]*\)(?:\s*const)?")
_NAMESPACE = re.compile(r"\(anonymous namespace\)::|\b[A-Za-z_]\w*::(?!\{)")
_SCALAR = re.compile(
    r"^(?:const\s+)?(?:unsigned\s+)?(?:float|double|int|long|long long|short|char|bool|half|Half|BFloat16|"
    r"__half|__nv_bfloat16|u?int\d+_t|size_t|void)(?:\s*const)?\s*[*&]*\s*(?:const)?$"
    r"|^\(?-?[\d.]+[a-zA-Z]*\)?$|^\(\w+\)-?\d+$|^true$|^false$"
)
ELLIPSIS = "…"
# A return type that only switches a template on (``enable_if<!(false), void>::type kernel<...>``).
_SFINAE = re.compile(r"^(?:std::)?enable_if<[^<>]*>::type\s+")


def strip(name: str) -> str:
    """The name without ``void``, namespaces, lambdas and parameter lists (template arguments kept)."""
    s = " ".join(name.split())
    s = re.sub(r"^void\s+", "", s)
    s = _SFINAE.sub("", s)
    s = _LAMBDA.sub("", s)
    s = _CALL_OPERATOR.sub("", s)
    s = _strip_params(s.replace("(anonymous namespace)::", ""))
    s = _NAMESPACE.sub("", s)
    return re.sub(r"\s+>", ">", s).strip()


def _strip_params(s: str) -> str:
    """Drop every balanced ``(...)`` that follows a name or ``>``: parameter lists, at any depth."""
    out: list[str] = []
    i = 0
    while i < len(s):
        if s[i] == "(" and out and (out[-1][-1:].isalnum() or out[-1][-1:] in ">_"):
            depth, j = 0, i
            while j < len(s):
                depth += {"(": 1, ")": -1}.get(s[j], 0)
                if depth == 0:
                    break
                j += 1
            i = j + 1
            continue
        out.append(s[i])
        i += 1
    return "".join(out)


def _split_args(body: str) -> list[str] | None:
    """Top-level comma-separated template arguments, or None when the brackets do not balance."""
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in body:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
            if depth < 0:
                return None
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if depth:
        return None
    out.append("".join(cur).strip())
    return out


def _drop_scalars(s: str) -> str | None:
    """``f<T<1>, Functor<float, 2>, float>`` -> ``f<T, Functor>``; None when ``s`` does not parse."""
    m = re.fullmatch(r"([^<>]*)<(.*)>", s)
    if not m:
        return s if "<" not in s and ">" not in s else None
    head, body = m.group(1), m.group(2)
    args = _split_args(body)
    if args is None:
        return None
    kept = []
    for a in args:
        if _SCALAR.match(a):
            continue
        sub = _drop_scalars(a)
        if sub is None:
            return None
        kept.append(sub)
    return f"{head}<{', '.join(kept)}>" if kept else head


# A cut never falls inside a word: a run of letters and digits ("tilesize128x128", "Functor") is kept
# whole or left out whole; the separators between words ("_", "<", ", ", "::") are where a name is cut.
_WORD = re.compile(r"[A-Za-z0-9]+|[^A-Za-z0-9]")


def _cut(s: str, limit: int) -> str:
    """Middle ellipsis at word boundaries: the head (kernel family) and the tail (its variant) both stay.

    A single word longer than the room left falls back to a character cut (nothing else fits).
    """
    if len(s) <= limit:
        return s
    tokens = _WORD.findall(s)
    room = limit - len(ELLIPSIS)
    head_room = room * 3 // 5
    head: list[str] = []
    used = 0
    for t in tokens:
        if used + len(t) > head_room:
            break
        head.append(t)
        used += len(t)
    tail: list[str] = []
    for t in reversed(tokens[len(head) :]):
        if used + len(t) > room:
            break
        tail.insert(0, t)
        used += len(t)
    # Room the tail left goes back to the head, word by word.
    for t in tokens[len(head) : len(tokens) - len(tail)]:
        if used + len(t) > room:
            break
        head.append(t)
        used += len(t)
    left, right = "".join(head).rstrip(" _:,<"), "".join(tail).lstrip(" _:,>")
    if not left or not right:
        return _cut_chars(s, limit)
    return left + ELLIPSIS + right


def _cut_chars(s: str, limit: int) -> str:
    """The character cut (``tilesize1…lignc4``): the fallback, and how artifacts before 2026-12 cut names."""
    if len(s) <= limit:
        return s
    head = (limit - 1) * 3 // 5
    return s[:head] + ELLIPSIS + s[len(s) - (limit - 1 - head) :]


def recut(text: str, names: Iterable[str], limits: Iterable[int] = (60, 80, 90)) -> str:
    """``text`` with kernel names an older harness cut mid-word re-cut at word boundaries.

    Findings recorded a name as ``short_kernel(name, limit)`` did then (a character cut, at one
    of ``limits``); each such form of one of ``names`` (the artifact's full kernel names) found in
    ``text`` is replaced by today's cut at the same limit. Text that holds none is returned as is.
    """
    if ELLIPSIS not in text:
        return text
    for name in dict.fromkeys(names):
        forms = [f for f in (_drop_scalars(strip(name)), strip(name)) if f]
        for limit in limits:
            for form in forms:
                old = _cut_chars(form, limit)
                if old != form and old in text:
                    text = text.replace(old, _cut(form, limit))
    return text


def short_names(names: Iterable[str], limit: int = 90) -> dict[str, str]:
    """Each name's shortest form that no other name in ``names`` shares, at most ``limit`` characters."""
    names = list(dict.fromkeys(names))
    stripped = {n: strip(n) for n in names}
    levels: dict[str, list[str]] = {}
    for n in names:
        forms = []
        compact = _drop_scalars(stripped[n])
        if compact:
            forms.append(_cut(compact, limit))
        forms.append(_cut(stripped[n], limit))
        levels[n] = forms
    out: dict[str, str] = {}
    for n in names:
        for form in levels[n]:
            clash = [o for o in names if o != n and form in levels[o]]
            if not clash:
                out[n] = form
                break
        else:
            out[n] = levels[n][-1]
    # Names that still read alike (the same text, cut) get a number each.
    seen: dict[str, int] = {}
    for n in names:
        same = [o for o in names if out[o] == out[n]]
        if len(same) > 1:
            seen[out[n]] = seen.get(out[n], 0) + 1
            out[n] = f"{out[n]} #{same.index(n) + 1}"
    return out
