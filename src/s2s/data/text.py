"""Reading corpus files, normalising text, Moses tokenisation.

Test and dev sets in SGML are read the way sacreBLEU reads them (its fake-SGML regex), so our
references are byte-identical to ``sacrebleu -t wmt14/full -l en-fr --echo ref``.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

from s2s.io import iter_lines

_SEG = re.compile(r"<seg.*?>(.*)</seg>.*?")
# Every Unicode space, the C0 whitespace controls \t \n \v \f \r \x1c-\x1f and U+0085 among
# them (str's \s), as sacreBLEU's re.sub(r"\s+", " ", ...) of the test sets sees them.
_WS = re.compile(r"\s+")
# C0 control characters that are not whitespace, DEL, zero-width space and BOM never carry meaning
# in these corpora. The whitespace ones (\v \f \x1c-\x1f) separate words: _WS makes them a space
# (dropping them merged "left\fright" into one word). C1 controls (U+0080-U+009F) are kept, as
# sacreBLEU keeps them in the references, but for U+0085 (NEL), whitespace to _WS: a space.
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x7f\u200b\ufeff]")


class CorpusError(ValueError):
    """A corpus file that cannot be used as it is; the message names the file and line."""


# Lines end at LF only, so text of old Mac line ends (CR only) is read as one line holding
# all its sentences, a carriage return between each: normalize would make them spaces, and a dev
# set become one sentence. A CR left inside a line (the CR of a CR LF line end is not, nor are
# more CRs at the line's end) is refused where a line holds two or more (several sentences), or
# where every line holds one (a file of two sentences), or two lines or more hold one and they
# are more than this share of the file's lines; else a stray CR inside a sentence (web-crawled
# text) stays, as a space, and is counted.
MAX_CR_LINE_SHARE = 0.01
_CR_ENDS = ("lines end at LF only, so text of old Mac line ends (CR only) reads as one line of "
            "all its sentences")


def read_corpus(path: Path, fmt: str, counts: dict[str, int] | None = None, *,
                lang: str | None = None) -> list[str]:
    """The sentences of a corpus file in format plain | moses_escaped | sgm, as raw text (not
    normalised): its lines (:func:`s2s.io.read_lines` with a leading byte-order mark and the CR
    of Windows line ends removed, other whitespace kept), parsed as `fmt` says. A
    moses_escaped file is unescaped and Moses-detokenised in `lang` (which it needs), so that
    prepare's tokeniser sees it as it sees raw text.

    With `counts`, what reading cleaned is added to it: ``bom_files`` and ``crlf_lines`` (of
    :func:`s2s.io.read_lines`), ``control_char_lines`` (sentences returned that hold control
    characters that :func:`normalize` drops: C0 controls but whitespace, NUL among them, DEL,
    U+200B, U+FEFF; C1 controls are kept, as sacreBLEU keeps them, and not counted, but U+0085,
    made a space) and ``cr_inside_lines`` (lines holding a carriage return that is not their
    line end, which :func:`normalize` makes a space). A file
    that is not UTF-8 is a CorpusError naming the file and line, and so is text of old Mac line
    ends (CR only; LF alone ends a line, so its sentences read as one line): a line holding two
    CRs or more inside it, every line holding one, or two lines or more holding one that are
    more than :data:`MAX_CR_LINE_SHARE` (1 in 100) of the file's.
    :func:`iter_corpus` gives the same sentences a block at a time.
    """
    return [s for block in iter_corpus(path, fmt, counts, lang=lang) for s in block]


def iter_corpus(path: Path, fmt: str, counts: dict[str, int] | None = None, *,
                lang: str | None = None) -> Iterator[list[str]]:
    """:func:`read_corpus`'s sentences in blocks, read as they are asked for (a corpus of any
    size in bounded memory); `counts` is complete once the last block has been given. A line of
    old Mac line ends (two CRs or more inside it) is refused as its block is read; a file where
    too many lines hold one CR, once the last block is read (the share is known then)."""
    if fmt == "moses_escaped" and lang is None:
        raise ValueError(f"{path}: a moses_escaped corpus is read with its language (lang=)")
    if counts is not None:
        counts.setdefault("bom_files", 0)  # the keys in read_corpus's order, for the metrics
        counts.setdefault("crlf_lines", 0)
        counts["control_char_lines"] = counts.get("control_char_lines", 0)
        counts["cr_inside_lines"] = counts.get("cr_inside_lines", 0)
    n = 0
    cr_lines, first_cr = 0, 0  # lines holding a CR inside them, the first one's number
    for lines in iter_lines(path, rstrip=False, strip_bom=True, strip_cr=True,
                            error=CorpusError, counts=counts):
        if "\r" in "".join(lines):  # rare: one scan of the block at C speed otherwise
            inner = [(i, ln.rstrip("\r").count("\r")) for i, ln in enumerate(lines, n + 1)]
            with_cr = [(i, k) for i, k in inner if k]
            for i, k in with_cr:
                if k > 1:
                    if fmt == "sgm":  # the one format whose reading refuses a line: an
                        _parse(path, fmt, lines[: i - n - 1], first=n + 1)  # earlier fault first
                    raise CorpusError(
                        f"{path}:{i}: {k:,} carriage returns (CR) inside the line: {_CR_ENDS}; "
                        f"convert its line ends to LF (tr '\\r' '\\n' < file > file.lf) and "
                        f"run again")
            if with_cr and not cr_lines:
                first_cr = with_cr[0][0]
            cr_lines += len(with_cr)
        out = _parse(path, fmt, lines, first=n + 1, lang=lang)
        n += len(lines)
        if counts is not None:
            counts["control_char_lines"] += sum(_CONTROL.search(ln) is not None for ln in out)
        yield out
    if cr_lines and (cr_lines == n or (cr_lines > 1 and cr_lines > MAX_CR_LINE_SHARE * n)):
        raise CorpusError(
            f"{path}:{first_cr}: a carriage return (CR) inside the line ({cr_lines:,} of the "
            f"file's {n:,} lines hold one): {_CR_ENDS}; if its lines end in CR, convert them "
            "to LF (tr '\\r' '\\n' < file > file.lf); if the CRs are stray characters inside "
            "sentences, make them spaces (tr '\\r' ' '), which keeps a parallel corpus aligned")
    if counts is not None:
        counts["cr_inside_lines"] += cr_lines


def _parse(path: Path, fmt: str, lines: list[str], *, first: int = 1,
           lang: str | None = None) -> list[str]:
    """The sentences of `lines`, the file's lines from line `first` on."""
    if fmt == "sgm":
        segs = []
        for n, ln in enumerate(lines, first):
            if ln.startswith("<seg "):
                if "</seg>" not in ln:
                    raise CorpusError(f"{path}:{n}: <seg> without </seg>")
                segs.append(_SEG.sub(r"\1", ln))
        return segs
    if fmt == "moses_escaped":
        # Moses escapes &, ', ", <, >, [, ], |; undo it (in one pass: html.unescape, so an
        # escaped "&amp;lt;" stays "&lt;"), then detokenise: prepare tokenises every corpus again,
        # and Moses does not leave its own output as it is (fr "l' homme" would become
        # "l ' homme", en "haven 't" "haven ' t", where raw test text gives "l'" and "'t").
        return [detokenize(html.unescape(ln), lang, unescape=False) for ln in lines]
    if fmt == "plain":
        return lines
    raise ValueError(f"unknown corpus format '{fmt}'")


def normalize(line: str) -> str:
    """NFC, control characters dropped (C0 but whitespace, DEL, U+200B, U+FEFF; C1 kept), every
    Unicode space (U+00A0, \v, \f, \x1c-\x1f and the C1 U+0085 included) made one ASCII space.

    This is sacreBLEU's whitespace normalisation of the test sets plus NFC, so dev, test and
    training text are normalised the same way. The dropped characters go first, so that a
    combining mark they separated from its base letter is composed with it ("cafe\u200b\u0301"
    gives "caf\u00e9"): the result is NFC (none of the mirror's corpora has such a sequence, so
    their prepared text is unchanged).
    """
    line = _CONTROL.sub("", line)
    line = unicodedata.normalize("NFC", line)
    return _WS.sub(" ", line).strip()


@lru_cache(maxsize=4)
def _moses(lang: str):
    from sacremoses import MosesTokenizer  # imported lazily: slow to import

    return MosesTokenizer(lang=lang)


def tokenize(line: str, lang: str) -> str:
    """Moses tokenisation, without XML escaping (hypotheses and references stay raw text), its
    tokens joined by one space: sacremoses can leave a space at the end (English "said 'no.'"
    gives "said ' no . ' "), which the prepared files would keep and which would make a pair
    the duplicates' removal takes for another."""
    return " ".join(_moses(lang).tokenize(line, escape=False, return_str=True,
                                          aggressive_dash_splits=False).split())


def tokenize_many(lines: list[str], lang: str) -> list[str]:
    return [tokenize(ln, lang) for ln in lines]


@lru_cache(maxsize=4)
def _detok(lang: str):
    from sacremoses import MosesDetokenizer

    return MosesDetokenizer(lang=lang)


def detokenize(line: str, lang: str, *, unescape: bool = True) -> str:
    """Moses detokenisation; with `unescape`, Moses' XML escapes (&amp; &apos; ...) undone too."""
    return _detok(lang).detokenize(line.split(), unescape=unescape)
