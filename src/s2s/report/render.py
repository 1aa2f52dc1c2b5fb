"""One document model, two renderings: Markdown (figures linked) and self-contained HTML.

The HTML has inline CSS, figures as base64 PNG data URIs, no scripts, no external fonts or links,
so it opens the same offline, from an artifact store or an e-mail attachment. The sections format
their tables' numbers with :func:`fmt` (missing: "-"; an output not produced: :data:`NOT_RUN`).
"""

from __future__ import annotations

import base64
import html
import numbers
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import pandas as pd


# What a cell says for an output or a number we did not produce (with the reason, where known).
NOT_RUN = "not run"


def fmt(x: Any, nd: int = 2) -> str:
    """A number for a rendered table; '-' for a missing one. A whole number (an int, or a value
    of an integer column: numpy's, or pandas' Int64 with its NA) with thousands separators."""
    if x is None or x is pd.NA or (isinstance(x, numbers.Real) and x != x):
        return "-"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, numbers.Integral):
        return f"{int(x):,}"
    if isinstance(x, numbers.Real):
        return f"{float(x):.{nd}f}"
    return str(x)


def fmt_frame(df: pd.DataFrame, nd: dict[str, int]) -> pd.DataFrame:
    """`df` for a rendered table: each number by :func:`fmt`, with `nd` digits for its column
    (default 2); strings as they are. A count column that may miss a value must come as an
    integer dtype that holds the missing one (pandas' Int64): with None in a plain column pandas
    makes it float, and its counts would print with decimals."""
    out = df.copy().astype(object)
    for col in out.columns:
        out[col] = [fmt(v, nd.get(col, 2)) if not isinstance(v, str) else v for v in df[col]]
    return out


@dataclass(frozen=True)
class Table:
    """A table to show; ``frame`` holds display strings (or numbers shown as they are). One with a
    ``key`` is also written as ``tables/<key>.md`` and ``tables/<key>.csv`` (its ``numbers``,
    else its frame) and has the HTML id ``table-<key>``."""

    title: str
    frame: pd.DataFrame
    notes: tuple[str, ...] = ()
    key: str = ""
    lead: str = ""  # stated once above the table (e.g. the conditions every row shares)
    numbers: pd.DataFrame | None = None  # the CSV's raw numbers, where the frame formats them

    @property
    def csv_frame(self) -> pd.DataFrame:
        return self.frame if self.numbers is None else self.numbers


@dataclass(frozen=True)
class Image:
    """A PNG figure; ``rel`` is its path relative to the Markdown file."""

    title: str
    path: Path
    rel: str
    caption: str = ""


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]


# Cells of a Table besides strings and numbers.


@dataclass(frozen=True)
class Link:
    """A link to a section of the document (its anchor, :func:`slug` of its title)."""

    text: str
    anchor: str

    def __str__(self) -> str:  # Markdown
        return f"[{self.text}](#{self.anchor})"


@dataclass(frozen=True)
class Badge:
    """A word marked by its kind: a coloured badge in HTML (CSS class ``badge-<kind>``), the plain
    word in Markdown."""

    text: str
    kind: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Verbatim:
    """Text from the data or a model's output (a test sentence, a reference, a translation): shown
    as written in both renderings; in Markdown every character that could be read as markup is
    escaped (:func:`md_literal`), where a plain string's code spans are kept (:func:`md_text`)."""

    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Lines:
    """Several short items in one cell: one per line in HTML, joined by "; " in Markdown."""

    items: tuple[str, ...]

    def __str__(self) -> str:
        return "; ".join(self.items)


Block = Union[str, Table, Image, Bullets]


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)
    unshown: list[Table] = field(default_factory=list)  # written to tables/, not shown

    @property
    def anchor(self) -> str:
        return slug(self.title)


def slug(title: str) -> str:
    """GitHub's heading anchor: lowercase, punctuation dropped, spaces to hyphens; the HTML uses
    the same ids, so one link works in both renderings."""
    kept = "".join(c for c in title.lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


@dataclass
class Document:
    """The title, then the first `lead` sections (the answer at a glance), then the contents,
    then the rest."""

    title: str
    sections: list[Section] = field(default_factory=list)
    lead: int = 0

    def tables(self) -> dict[str, Table]:
        """The tables written to ``tables/`` by their key, in the document's order."""
        return {t.key: t for sec in self.sections for t in [*sec.blocks, *sec.unshown]
                if isinstance(t, Table) and t.key}


def _cell(v: object) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "-"
    return str(v)


# --- Markdown ------------------------------------------------------------------------------------


# Outside code spans, what Markdown would read as HTML: a `<` (an <unk> in prose would open a
# tag and vanish from the rendered page) and an `&` that starts an entity (&quot; would become ").
# That is for our own words, whose code spans and other markup are meant; text from the data or
# a model's output is a Verbatim cell, escaped whole (md_literal).
_CODE_SPAN = re.compile(r"(`[^`]*`)")
_ENTITY = re.compile(r"&(?=#?\w+;)")


def md_text(text: str) -> str:
    """`text` (our prose, a caption, a cell) as Markdown that renders it as written: `<` and an
    entity's `&` backslash-escaped outside code spans, which Markdown leaves as they are. Other
    markup (`*x*`, `[x](y)`, a backslash) is read as such: corpus text is :func:`md_literal`'s."""
    parts = _CODE_SPAN.split(text)
    return "".join(part if i % 2 else _ENTITY.sub(r"\\&", part).replace("<", "\\<")
                   for i, part in enumerate(parts))


# What corpus text (a Verbatim) must not be read as in Markdown: the backslash (escaped first, so
# an escape the text holds stays two characters), code spans, emphasis and strikethrough, links
# and images, HTML tags (their `<`) and entities, GitHub's $math$, and a table's cell separator.
_MD_LITERAL = re.compile(r"[`*_\[\]<&|~$]")


def md_literal(text: str) -> str:
    """`text` from the data or a model's output (inline: a table cell) as Markdown that renders
    it character for character: a backslash, then Markdown's punctuation, backslash-escaped.
    Unlike :func:`md_text`, nothing in it is markup, backticks included."""
    return _MD_LITERAL.sub(lambda m: "\\" + m.group(), text.replace("\\", "\\\\"))


def _md_escape(text: str) -> str:
    """A table cell: md_text, with `|` escaped and on one line."""
    return md_text(text).replace("|", "\\|").replace("\n", " ")


def _md_cell(v: object) -> str:
    """A table cell: a Verbatim's text by md_literal, anything else by _md_escape; one line."""
    if isinstance(v, Verbatim):
        return md_literal(v.text).replace("\n", " ")
    return _md_escape(_cell(v))


def md_table(df: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (no dependency on tabulate)."""
    head = "| " + " | ".join(_md_escape(str(c)) for c in df.columns) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    rows = ["| " + " | ".join(_md_cell(v) for v in row) + " |"
            for row in df.itertuples(index=False)]
    return "\n".join([head, rule, *rows])


def to_markdown(doc: Document, *, contents: bool = True) -> str:
    out = [f"# {doc.title}", ""]
    for i, sec in enumerate(doc.sections):
        if contents and i == doc.lead:
            out += ["**Contents:** " + " · ".join(f"[{s.title}](#{s.anchor})"
                                                  for s in doc.sections), ""]
        out += [f"## {sec.title}", ""]
        for b in sec.blocks:
            if isinstance(b, str):
                out += [md_text(b), ""]
            elif isinstance(b, Bullets):
                out += [f"- {md_text(item)}" for item in b.items] + [""]
            elif isinstance(b, Table):
                out += [f"**{md_text(b.title)}**", ""] + ([md_text(b.lead), ""] if b.lead else [])
                out += [md_table(b.frame), ""]
                out += [md_text(n) for n in b.notes] + ([""] if b.notes else [])
            elif isinstance(b, Image):
                out += [f"![{md_text(b.title)}]({b.rel})", ""]
                if b.caption:
                    out += [f"*{md_text(b.caption)}*", ""]
    return "\n".join(out).rstrip() + "\n"


# --- HTML ----------------------------------------------------------------------------------------

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 1em auto;
       max-width: 1200px; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; margin: .2em 0 .4em; }
h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; margin-top: 2em; }
section:first-of-type h2 { margin-top: .6em; }
table { border-collapse: collapse; margin: .6em 0 .4em; font-size: 13px; }
th, td { border: 1px solid #bbb; padding: 3px 7px; vertical-align: top; text-align: left; }
th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.notrun td { color: #777; background: #fafafa; }
caption { caption-side: top; text-align: left; font-weight: 600; padding-bottom: .3em; }
p.note { font-size: 12px; color: #555; margin: .2em 0; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: 13px; color: #444; }
code { font-size: 12px; background: #f4f4f4; padding: 0 3px; }
nav.toc { background: #f7f7f7; border: 1px solid #ddd; padding: .3em 1em; font-size: 13px; }
nav.toc ol { margin: .2em 0; columns: 3; } a.top { font-size: .7em; text-decoration: none;
color: #888; }
span.lead { font-size: 13px; font-weight: normal; }
table#table-summary { width: 100%; }
#table-summary td:nth-child(1) { width: 21%; } #table-summary td:nth-child(2) { width: 14%; }
#table-summary td:nth-child(3) { width: 17%; } #table-summary td:nth-child(4) { width: 34%; }
#table-summary td:nth-child(5) { width: 1%; }
span.badge { display: inline-block; padding: 1px 7px; border-radius: 9px; font-weight: 600; }
.badge-holds { background: #dafbe1; color: #116329; border: 1px solid #4ac26b; }
.badge-fails { background: #ffebe9; color: #a40e26; border: 1px solid #ff8182; }
.badge-unsure { background: #fff8c5; color: #7d4e00; border: 1px solid #d4a72c; }
.badge-unknown { background: #eaeef2; color: #57606a; border: 1px solid #afb8c1; }
"""


def _is_num(v: object) -> bool:
    if isinstance(v, (Link, Badge, Lines)):
        return False
    if isinstance(v, (int, float)):
        return True
    try:
        float(str(v).replace(",", ""))
        return True
    except ValueError:
        return False


def html_table(t: Table) -> str:
    e = html.escape
    # "table-": a table and a section may share a name (the data table, the Data section)
    anchor = f' id="table-{e(t.key)}"' if t.key else ""
    # the title, then what every row shares (stated once), then the rows
    lead = f'<br><span class="lead">{e(t.lead)}</span>' if t.lead else ""
    parts = [f"<table{anchor}>", f"<caption>{e(t.title)}{lead}</caption>", "<thead><tr>"]
    parts += [f"<th>{e(str(c))}</th>" for c in t.frame.columns]
    parts.append("</tr></thead><tbody>")
    for row in t.frame.itertuples(index=False):
        cls = ' class="notrun"' if any(str(v).startswith("not run") for v in row) else ""
        parts.append(f"<tr{cls}>{''.join(_html_cell(v) for v in row)}</tr>")
    parts.append("</tbody></table>")
    parts += [f'<p class="note">{e(n)}</p>' for n in t.notes]
    return "\n".join(parts)


def _html_cell(v: object) -> str:
    e = html.escape
    if isinstance(v, Link):
        return f'<td><a href="#{e(v.anchor)}">{e(v.text)}</a></td>'
    if isinstance(v, Badge):
        return f'<td><span class="badge badge-{e(v.kind)}">{e(v.text)}</span></td>'
    if isinstance(v, Lines):
        return '<td class="lines">' + "<br>".join(e(i) for i in v.items) + "</td>"
    if _is_num(v):
        return f'<td class="num">{e(_cell(v))}</td>'
    return f"<td>{e(_cell(v))}</td>"


def data_uri(png: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(png).read_bytes()).decode("ascii")


def to_html(doc: Document) -> str:
    e = html.escape
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{e(doc.title)}</title>", f"<style>{CSS}</style>", "</head>", '<body id="top">',
           f"<h1>{e(doc.title)}</h1>"]
    contents = ('<nav class="toc" id="contents"><b>Contents</b><ol>' + "".join(
        f'<li><a href="#{e(s.anchor)}">{e(s.title)}</a></li>' for s in doc.sections)
        + "</ol></nav>")
    for i, sec in enumerate(doc.sections):
        if i == doc.lead:
            out.append(contents)
        out.append(f'<section id="{e(sec.anchor)}"><h2>{e(sec.title)} '
                   f'<a class="top" href="#contents" title="back to the contents">↑</a></h2>')
        for b in sec.blocks:
            if isinstance(b, str):
                out.append(f"<p>{e(b)}</p>")
            elif isinstance(b, Bullets):
                out.append("<ul>" + "".join(f"<li>{e(i)}</li>" for i in b.items) + "</ul>")
            elif isinstance(b, Table):
                out.append(html_table(b))
            elif isinstance(b, Image):
                out.append(f'<figure><img alt="{e(b.title)}" src="{data_uri(b.path)}">'
                           f"<figcaption>{e(b.caption or b.title)}</figcaption></figure>")
        out.append("</section>")
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"
