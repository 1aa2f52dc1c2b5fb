"""`s2s plots`: DVC's plots (``dvc plots show``) as a page that draws offline.

DVC's own page loads vega, vega-lite and vega-embed from a CDN, so without a network it is blank.
This writes an HTML template for ``dvc plots show --html-template`` that carries the three
libraries inline, from the ``vl-convert-python`` package (which ships them: no download), and
runs ``dvc plots show`` with it. The template is made once per vl-convert version, under
``.dvc/tmp/`` (not tracked).

DVC's plot divs call ``vegaEmbed`` while the page is parsed, and the bundle is an ES module that
runs after it: the page queues those calls until the bundle defines the real ``vegaEmbed``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# A dvc.yaml plot template of ours: DVC's `simple` line plot with a log y axis and the points
# marked (a learning curve whose perplexity falls over decades, sampled a few times an epoch).
LOG_Y_TEMPLATE = "src/s2s/report/vega/log_y.json"
# vega-lite major version of DVC's plot templates ("$schema": .../vega-lite/v5.json)
VEGA_LITE = "5"

PAGE = """<!DOCTYPE html>
<html>
<head>
    <meta charset="utf-8">
    {refresh_tag}
    <title>DVC plots</title>
    <script>
        // DVC's plot divs call vegaEmbed as the page is parsed; the bundle below (a module)
        // runs after that: queue the calls until it defines vegaEmbed.
        window.vegaEmbed = function (el, spec) {
            (window.s2sQueued = window.s2sQueued || []).push([el, spec]);
        };
    </script>
    <style>
        table {
            border-spacing: 15px;
        }
    </style>
</head>
<body>
    {plot_divs}
    <script type="module">
__BUNDLE__
    </script>
</body>
</html>
"""
# Run after the libraries, inside the bundle: the real vegaEmbed, then the queued calls.
SNIPPET = ("const queued = window.s2sQueued || []; window.vegaEmbed = vegaEmbed; "
           "for (const [el, spec] of queued) { vegaEmbed(el, spec); }")


def template_text() -> str:
    """The offline page template: DVC's placeholders, the libraries inline, no URL to load."""
    try:
        import vl_convert
    except ImportError:
        raise RuntimeError("s2s plots needs the vl-convert-python package, which ships vega, "
                           "vega-lite and vega-embed: pip install vl-convert-python") from None
    version = max((v for v in vl_convert.get_vegalite_versions()
                   if v.split(".")[0] == VEGA_LITE), key=lambda v: tuple(map(int, v.split("."))))
    bundle = vl_convert.javascript_bundle(SNIPPET, vl_version=version)
    return PAGE.replace("__BUNDLE__", bundle.replace("</script", "<\\/script"))


def template_path(project: Path) -> Path:
    """The template under `project`'s .dvc/tmp, written if this vl-convert version has none."""
    import vl_convert

    from s2s.io import atomic_write_text

    path = Path(project) / ".dvc" / "tmp" / (
        f"s2s-plots-offline-vl-convert-{getattr(vl_convert, '__version__', 'x')}.html")
    if not path.is_file():
        atomic_write_text(path, template_text())
    return path


def show(dvc_args: list[str], project: Path = Path(".")) -> int:
    """``dvc plots show --html-template <offline template> DVC_ARGS`` in `project`, a DVC
    project or a folder inside one (as DVC finds it). Outside any it is refused before anything
    is written: a ``.dvc/tmp/`` made there for the template made the folder a project to every
    later command run in it or below."""
    from s2s.projectlock import find_root

    if any(a == "--html-template" or a.startswith("--html-template=") for a in dvc_args):
        raise ValueError("s2s plots gives dvc plots show its own --html-template")
    root = find_root(Path(project))
    if root is None:
        raise ValueError(f"{Path(project).resolve()}: not in a DVC project (no .dvc/ here or "
                         f"above): run s2s plots in the project whose plots to show")
    template = template_path(root)
    dvc = Path(sys.executable).with_name("dvc")
    cmd = [str(dvc) if dvc.is_file() else "dvc", "plots", "show", "--html-template",
           str(template.resolve()), *dvc_args]
    return subprocess.run(cmd, cwd=project).returncode
