"""One decoder for every file the pipeline reads into a typed record: the parameter file
(:mod:`s2s.config`) and the JSON artifacts (:mod:`s2s.artifacts`).

A record is a frozen dataclass; :func:`decode` checks a parsed value (YAML or JSON) against a
type hint, field by field, and raises the caller's error naming the file and the key path
(``params.yaml: 'train.lr' must be a number, got str 'x'``). What differs between a parameter
file and an artifact is said once, in :class:`Rules`: which error, whether an empty string or a
non-finite number is allowed, and what a mapping key must be. A field's range is its metadata
(:func:`rng`). This module imports nothing of the package, so that a model's config
(``s2s.arch``), the params schema and the artifacts share it without importing each other.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = ["MAX_SIZE", "Rules", "decode", "rng", "show"]

# The upper bound of a count or a size (a batch, a layer, a beam, a vocabulary): a C int. Python
# reads any integer; torch, numpy and the samplers overflow past 64 bits, some past 32.
MAX_SIZE = 2**31 - 1


def rng(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
        hi_open: bool = False) -> dict:
    """Field metadata: the value must be >= lo (> lo with ``lo_open``) and <= hi (< hi with
    ``hi_open``); None: no bound."""
    return {"min": lo, "max": hi, "lo_open": lo_open, "hi_open": hi_open}


@dataclass(frozen=True)
class Rules:
    """How one kind of file is read: the error raised, and what it may hold."""

    error: type[ValueError]
    empty_strings: bool = True  # a `str` may be "" (params: no: a name, a path, a method)
    finite: bool = False  # a `float` must be finite (params: .inf and .nan refused)
    key_rule: str = "strings"  # what the keys of a `dict[str, ...]` must be, in words


def decode(tp: Any, value: Any, source: str | Path, key: str, rules: Rules,
           meta: Any = None, *, skip: frozenset | set = frozenset()) -> Any:
    """`value` as type `tp` (a record, a union, a Literal, a tuple, a dict, a scalar, Path or
    Any); ``rules.error`` naming `source` and `key` where it is not one. `skip`: fields of a
    record the file does not hold (the caller fills them)."""
    err = rules.error
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if dataclasses.is_dataclass(tp):
        return _record(tp, value, source, key, rules, skip)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return decode(inner[0], value, source, key, rules, meta)
        errors = []
        for alt in inner:  # the first alternative that fits (bool | Literal["auto"])
            try:
                return decode(alt, value, source, key, rules, meta)
            except err as e:
                errors.append((_overlap(alt, value), e))
        if all(dataclasses.is_dataclass(a) for a in inner):
            raise max(errors, key=lambda x: x[0])[1]  # the record the object looks most like
        allowed = [_describe(a) for a in inner] + (["null"] if type(None) in args else [])
        raise err(f"{source}: '{key or '<top>'}' must be {' or '.join(allowed)}, got "
                  f"{show(value)}")
    if origin is Literal:
        if not any(value == a and type(value) is type(a) for a in args):
            raise err(f"{source}: '{key}' must be one of [{', '.join(map(_choice, args))}], got "
                      f"{show(value)}")
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise err(f"{source}: '{key}' must be a list, got {show(value)}")
        if Ellipsis not in args and len(value) != len(args):
            raise err(f"{source}: '{key}' must be a list of {len(args)}, got {show(value)}")
        return tuple(decode(args[0], v, source, f"{key}[{i}]", rules, meta)
                     for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise err(f"{source}: '{key or '<top>'}' must be a mapping, got {show(value)}")
        out = {}
        for k, v in value.items():
            sub = join(key, k)
            if args[0] is int:  # beam widths: decimal strings in JSON, as keys must be strings
                if not (isinstance(k, int) and not isinstance(k, bool)) and not (
                        isinstance(k, str) and k.isdigit() and str(int(k)) == k):
                    raise err(f"{source}: '{sub}': the keys of '{key}' must be beam widths "
                              f"(decimal integers), got {k!r}")
                k = int(k)
            elif not isinstance(k, str):
                raise err(f"{source}: '{key}' has a key {show(k)}: keys must be {rules.key_rule}")
            out[k] = decode(args[1], v, source, sub, rules, meta)
        return out
    if tp is Any:
        if rules.finite:
            _check_finite(value, source, key, rules)
        return value
    if tp is Path:
        if not isinstance(value, str):
            raise err(f"{source}: '{key}' must be a path string, got {show(value)}")
        return Path(value)
    if tp is bool:
        if not isinstance(value, bool):
            raise err(f"{source}: '{key}' must be true or false, got {show(value)}")
        return value
    if tp is str:
        if not isinstance(value, str) or not (value or rules.empty_strings):
            what = "a string" if rules.empty_strings else "a non-empty string"
            raise err(f"{source}: '{key}' must be {what}, got {show(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise err(f"{source}: '{key}' must be an integer, got {show(value)}")
    elif tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise err(f"{source}: '{key}' must be a number, got {show(value)}")
        value = float(value)
        if rules.finite and not math.isfinite(value):
            raise err(f"{source}: '{key}' must be a finite number, got {value}")
    else:  # pragma: no cover - a schema error, not a user error
        raise TypeError(f"unsupported schema type {tp!r} at {key}")
    _check_range(value, source, key, meta or {}, err)
    return value


def _record(cls: type, value: Any, source, key: str, rules: Rules, skip) -> Any:
    err = rules.error
    if not isinstance(value, dict):
        raise err(f"{source}: '{key or '<top>'}' must be a mapping, got {show(value)}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in skip}
    unknown = sorted((k for k in value if k not in fields), key=str)
    if unknown:
        raise err(f"{source}: unknown key '{join(key, unknown[0])}' (expected one of: "
                  f"{', '.join(fields)})")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for name, f in fields.items():
        if name not in value:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise err(f"{source}: missing key '{join(key, name)}'")
            continue
        kwargs[name] = decode(hints[name], value[name], source, join(key, name), rules,
                              f.metadata)
    try:
        return cls(**kwargs)
    except err as e:  # the record's own check of its fields together (its __post_init__)
        raise err(f"{source}: '{key or '<top>'}': {e}") from None


def _check_finite(value: Any, source, key: str, rules: Rules) -> None:
    """No .inf or .nan anywhere under an untyped value (the overrides of `models.<name>`)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise rules.error(f"{source}: '{key}' must be a finite number, got {value}")
    if isinstance(value, dict):
        for k, v in value.items():
            _check_finite(v, source, join(key, str(k)), rules)
    if isinstance(value, list):
        for i, v in enumerate(value):
            _check_finite(v, source, f"{key}[{i}]", rules)


def _check_range(value: float, source, key: str, meta: dict, err) -> None:
    lo, hi = meta.get("min"), meta.get("max")
    if lo is not None:
        if meta.get("lo_open") and not value > lo:
            raise err(f"{source}: '{key}' must be > {lo}, got {value}")
        if not meta.get("lo_open") and not value >= lo:
            raise err(f"{source}: '{key}' must be >= {lo}, got {value}")
    if hi is not None and meta.get("hi_open") and not value < hi:
        raise err(f"{source}: '{key}' must be < {hi}, got {value}")
    if hi is not None and not meta.get("hi_open") and not value <= hi:
        raise err(f"{source}: '{key}' must be <= {hi}, got {value}")


def _overlap(tp: Any, value: Any) -> int:
    if not (dataclasses.is_dataclass(tp) and isinstance(value, dict)):
        return 0
    return len({f.name for f in dataclasses.fields(tp)} & set(value))


def _choice(a: Any) -> str:
    """A Literal's value as the file writes it: true, null, 'auto', 12."""
    if a is None:
        return "null"
    if isinstance(a, bool):
        return "true" if a else "false"
    return repr(a)


def _describe(tp: Any) -> str:
    if tp is type(None):
        return "null"
    if typing.get_origin(tp) is Literal:
        return " or ".join(_choice(a) for a in typing.get_args(tp))
    if typing.get_origin(tp) is tuple:
        return "a list"
    if dataclasses.is_dataclass(tp):
        return f"a mapping ({tp.__name__})"
    return {bool: "true or false", int: "an integer", float: "a number",
            str: "a string"}.get(tp, getattr(tp, "__name__", str(tp)))


def join(key: str, name: Any) -> str:
    """A key path: ``train`` + ``lr`` -> ``train.lr``."""
    return f"{key}.{name}" if key else str(name)


def show(value: Any) -> str:
    """A value in an error message: its type and (the start of) its repr."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float {value}"
    return f"{type(value).__name__} {repr(value)[:60]}"
