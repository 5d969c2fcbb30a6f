"""Readable kernel names: drop what every name shares (namespaces, the parameter list, scalar
template arguments) and keep what tells two kernels apart (the functors and their nesting).

``short_names`` shortens a set of names together: a name takes its shortest form only when no
other name in the set shortens to the same text, so two rows never read alike.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
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
# Template arguments nest a few levels in real kernel names (4 in the committed artifacts); a name
# nested deeper than this keeps its template arguments whole instead of costing a recursion per level.
MAX_NESTING = 32
_PARENS = re.compile(r"[()]")
_BRACKETS = re.compile(r"[<>()]")
_BRACKETS_OR_COMMA = re.compile(r"[<>(),]")
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
    """Drop every balanced ``(...)`` that follows a name or ``>``: parameter lists, at any depth.

    Whether a ``(`` follows a name is read from the last character kept, so ``f(a)(b)`` drops both.
    An unbalanced ``(`` after a name drops the rest of ``s``.
    """
    out: list[str] = []
    last = ""  # the last character kept
    i = 0
    while (j := s.find("(", i)) >= 0:
        if j > i:
            out.append(s[i:j])
            last = s[j - 1]
        if last and (last.isalnum() or last in ">_"):
            depth = 0
            for m in _PARENS.finditer(s, j):
                depth += 1 if m.group() == "(" else -1
                if depth == 0:
                    i = m.end()
                    break
            else:
                return "".join(out)
        else:
            out.append("(")
            last = "("
            i = j + 1
    out.append(s[i:])
    return "".join(out)


def _nesting(s: str) -> int:
    """How deeply ``<`` and ``(`` nest in ``s`` (a closer with nothing open is passed over, as the
    parse in ``_drop_scalars_in`` passes it over)."""
    deepest = depth = 0
    for m in _BRACKETS.finditer(s):
        if m.group() in "<(":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth = max(depth - 1, 0)
    return deepest


def _drop_scalars(s: str) -> str | None:
    """``f<T<1>, Functor<float, 2>, float>`` -> ``f<T, Functor>``; None when ``s`` does not parse or
    nests deeper than MAX_NESTING."""
    # Only a name with more openers than MAX_NESTING can nest deeper: most need no count of depth.
    if s.count("<") + s.count("(") > MAX_NESTING and _nesting(s) > MAX_NESTING:
        return None
    return _drop_scalars_in(s)


def _drop_scalars_in(s: str) -> str | None:
    """``_drop_scalars`` in one pass over ``s``: where each bracket closes and which commas sit directly
    inside it are found once, so a nested argument is never scanned again."""
    closes: dict[int, int] = {}
    commas: dict[int, list[int]] = {}
    open_at: list[int] = []
    for m in _BRACKETS_OR_COMMA.finditer(s):
        ch, at = m.group(), m.start()
        if ch in "<(":
            open_at.append(at)
            commas[at] = []
        elif ch in ">)":
            if open_at:
                closes[open_at.pop()] = at
        elif open_at:
            commas[open_at[-1]].append(at)
    return _drop_in(s, 0, len(s), closes, commas)


def _drop_in(s: str, a: int, b: int, closes: dict[int, int], commas: dict[int, list[int]]) -> str | None:
    """``s[a:b]`` as ``head<args>`` with its scalar arguments dropped; None unless its first bracket is a
    ``<`` that closes at its last character."""
    lt = s.find("<", a, b)
    if lt < 0:
        return s[a:b] if s.find(">", a, b) < 0 else None
    if s.find(">", a, lt) >= 0 or closes.get(lt) != b - 1 or s[b - 1] != ">":
        return None
    kept = []
    start = lt + 1
    for end in [*commas[lt], b - 1]:
        x, y = start, end
        while x < y and s[x].isspace():
            x += 1
        while y > x and s[y - 1].isspace():
            y -= 1
        start = end + 1
        if _SCALAR.match(s[x:y]):
            continue
        sub = _drop_in(s, x, y, closes, commas)
        if sub is None:
            return None
        kept.append(sub)
    head = s[a:lt]
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


@functools.lru_cache(maxsize=1 << 16)
def _forms(name: str) -> tuple[str, str | None]:
    """A name stripped, and stripped without scalar template arguments (None when that does not parse).

    Cached: a report shortens the names of its kernel diff (``short_names``) after re-cutting the
    finding with every kernel name of the artifact (``recut``), and parsing a name is most of the cost.
    """
    stripped = strip(name)
    return stripped, _drop_scalars(stripped)


def recut(text: str, names: Iterable[str], limits: Iterable[int] = (60, 80, 90)) -> str:
    """``text`` with kernel names an older harness cut mid-word re-cut at word boundaries.

    Findings recorded a name as ``short_kernel(name, limit)`` did then (a character cut, at one
    of ``limits``); each such form of one of ``names`` (the artifact's full kernel names) found in
    ``text`` is replaced by today's cut at the same limit. Text that holds none is returned as is.
    """
    if ELLIPSIS not in text:
        return text
    for name in dict.fromkeys(names):
        forms = [f for f in reversed(_forms(name)) if f]
        for limit in limits:
            for form in forms:
                old = _cut_chars(form, limit)
                if old != form and old in text:
                    text = text.replace(old, _cut(form, limit))
    return text


def short_names(names: Iterable[str], limit: int = 90) -> dict[str, str]:
    """Each name's shortest form that no other name in ``names`` shares, at most ``limit`` characters.

    Linear in the number of names: which names can take a form is counted once, up front.
    """
    names = list(dict.fromkeys(names))
    levels: dict[str, list[str]] = {}
    for n in names:
        stripped, compact = _forms(n)
        forms = []
        if compact:
            forms.append(_cut(compact, limit))
        forms.append(_cut(stripped, limit))
        levels[n] = forms
    # How many names have each form among theirs: a form is a name's own when only that name has it.
    holders = Counter(form for n in names for form in set(levels[n]))
    out = {n: next((f for f in levels[n] if holders[f] == 1), levels[n][-1]) for n in names}
    # Names that still read alike (the same text, cut) get a number, in order, all but the last of
    # them, which keeps the text as it is: "x #1", "x #2", "x".
    alike: dict[str, list[str]] = {}
    for n in names:
        alike.setdefault(out[n], []).append(n)
    for form, group in alike.items():
        for i, n in enumerate(group[:-1]):
            out[n] = f"{form} #{i + 1}"
    return out
