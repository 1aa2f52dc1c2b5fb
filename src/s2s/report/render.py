"""One document model, two renderings: Markdown (figures linked) and self-contained HTML.

The HTML has inline CSS, figures as base64 PNG data URIs, no scripts, no external fonts or links,
so it opens the same offline, from an artifact store or an e-mail attachment.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

import pandas as pd


@dataclass(frozen=True)
class Table:
    """A table to show; ``frame`` holds display strings (or numbers shown as they are)."""

    title: str
    frame: pd.DataFrame
    notes: tuple[str, ...] = ()
    anchor: str = ""
    lead: str = ""  # stated once above the table (e.g. the conditions every row shares)


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


Block = Union[str, Table, Image, Bullets]


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)

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
    title: str
    sections: list[Section] = field(default_factory=list)


def _cell(v: object) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "-"
    return str(v)


# --- Markdown ------------------------------------------------------------------------------------


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def md_table(df: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (no dependency on tabulate)."""
    head = "| " + " | ".join(_md_escape(str(c)) for c in df.columns) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    rows = ["| " + " | ".join(_md_escape(_cell(v)) for v in row) + " |"
            for row in df.itertuples(index=False)]
    return "\n".join([head, rule, *rows])


def to_markdown(doc: Document, *, contents: bool = True) -> str:
    out = [f"# {doc.title}", ""]
    if contents:
        out += ["**Contents:** " + " · ".join(f"[{s.title}](#{s.anchor})" for s in doc.sections),
                ""]
    for sec in doc.sections:
        out += [f"## {sec.title}", ""]
        for b in sec.blocks:
            if isinstance(b, str):
                out += [b, ""]
            elif isinstance(b, Bullets):
                out += [f"- {item}" for item in b.items] + [""]
            elif isinstance(b, Table):
                out += [f"**{b.title}**", ""] + ([b.lead, ""] if b.lead else [])
                out += [md_table(b.frame), ""]
                out += [f"{n}" for n in b.notes] + ([""] if b.notes else [])
            elif isinstance(b, Image):
                out += [f"![{b.title}]({b.rel})", ""]
                if b.caption:
                    out += [f"*{b.caption}*", ""]
    return "\n".join(out).rstrip() + "\n"


# --- HTML ----------------------------------------------------------------------------------------

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2em auto;
       max-width: 1200px; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; margin-top: 2em; }
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
nav.toc { background: #f7f7f7; border: 1px solid #ddd; padding: .4em 1em; columns: 2; }
nav.toc ol { margin: .3em 0; } a.top { font-size: .7em; text-decoration: none; color: #888; }
span.lead { font-size: 13px; font-weight: normal; }
"""


def _is_num(v: object) -> bool:
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
    anchor = f' id="table-{e(t.anchor)}"' if t.anchor else ""
    # the title, then what every row shares (stated once), then the rows
    lead = f'<br><span class="lead">{e(t.lead)}</span>' if t.lead else ""
    parts = [f"<table{anchor}>", f"<caption>{e(t.title)}{lead}</caption>", "<thead><tr>"]
    parts += [f"<th>{e(str(c))}</th>" for c in t.frame.columns]
    parts.append("</tr></thead><tbody>")
    for row in t.frame.itertuples(index=False):
        cls = ' class="notrun"' if any(str(v).startswith("not run") for v in row) else ""
        cells = "".join(f'<td class="num">{e(_cell(v))}</td>' if _is_num(v)
                        else f"<td>{e(_cell(v))}</td>" for v in row)
        parts.append(f"<tr{cls}>{cells}</tr>")
    parts.append("</tbody></table>")
    parts += [f'<p class="note">{e(n)}</p>' for n in t.notes]
    return "\n".join(parts)


def data_uri(png: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(png).read_bytes()).decode("ascii")


def to_html(doc: Document) -> str:
    e = html.escape
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{e(doc.title)}</title>", f"<style>{CSS}</style>", "</head>", '<body id="top">',
           f"<h1>{e(doc.title)}</h1>",
           '<nav class="toc"><b>Contents</b><ol>' + "".join(
               f'<li><a href="#{e(s.anchor)}">{e(s.title)}</a></li>' for s in doc.sections)
           + "</ol></nav>"]
    for sec in doc.sections:
        out.append(f'<section id="{e(sec.anchor)}"><h2>{e(sec.title)} '
                   f'<a class="top" href="#top" title="back to the contents">↑</a></h2>')
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
