"""`s2s plots`: DVC's plots as a page that draws offline. Its template loads nothing from a
network (vega, vega-lite and vega-embed inline, from vl-convert-python), a page made from it
with DVC's own renderer draws its plots in headless chromium, and the learning curves of
dvc.yaml are on a log axis."""

import json
import re
from pathlib import Path

import pytest

from conftest import chromium
from s2s import config, pipeline
from s2s.report import offline_plots

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def template() -> str:
    pytest.importorskip("vl_convert", reason="vl-convert-python not installed")
    return offline_plots.template_text()


def test_the_template_loads_no_script_from_a_network(template):
    assert not re.search(r"<script[^>]*\bsrc\s*=", template)
    assert not re.search(r"""\bimport\s*(?:[^'"]*from\s*)?['"]https?:""", template)
    assert not re.search(r"""<link[^>]*href\s*=\s*['"]?https?:""", template)
    assert "cdn.jsdelivr" not in template
    # DVC fills {plot_divs} and {refresh_tag}; without {scripts} its CDN tags go nowhere
    assert template.count("{plot_divs}") == 1 and "{scripts}" not in template
    assert len(template) > 500_000  # vega, vega-lite and vega-embed, inline


@pytest.mark.service("chromium")
def test_a_page_made_from_it_draws_a_log_scale_learning_curve_offline(template, tmp_path):
    from dvc_render import VegaRenderer
    from dvc_render.html import HTML

    points = [{"epoch": e, "dev_ppl": p, "rev": "workspace", "filename": f}
              for f, curve in (("forward.csv", (850.0, 40.0, 18.0)),
                               ("reversed_1.csv", (900.0, 35.0, 14.0)))
              for e, p in zip((0.5, 1.0, 1.5), curve)]
    renderer = VegaRenderer(points, "dev_perplexity", template=str(ROOT /
                            offline_plots.LOG_Y_TEMPLATE), x="epoch", y="dev_ppl",
                            title="Dev perplexity")
    spec = renderer.get_filled_template()
    assert spec["encoding"]["y"]["scale"] == {"type": "log"}
    page = tmp_path / "index.html"
    page.write_text(HTML(template).with_element(renderer.generate_html()).embed(),
                    encoding="utf-8")
    res = chromium(tmp_path, "--virtual-time-budget=10000", "--dump-dom", page.as_uri(),
                   timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    svg = re.search(r'<svg[^>]*class="marks".*?</svg>', res.stdout, re.S)
    assert svg is not None, "vega drew nothing"
    # the log axis: ticks at 10, 100 (and the title), both curves drawn
    assert ">100<" in svg.group(0) and ">10<" in svg.group(0)
    assert 'aria-roledescription="line mark"' in svg.group(0)
    assert svg.group(0).count('aria-roledescription="point"') == len(points)  # every epoch


@pytest.mark.parametrize("profile", ["default", "quick"])
def test_the_learning_curves_are_on_a_log_axis_and_figure3_on_a_linear_one(profile):
    plots = {name: body for entry in pipeline.plots(config.load(ROOT / "profiles" /
                                                                 f"{profile}.yaml"))
             for name, body in entry.items()}
    assert plots["dev_perplexity"]["template"] == offline_plots.LOG_Y_TEMPLATE
    assert plots["train_perplexity"]["template"] == offline_plots.LOG_Y_TEMPLATE
    assert plots["figure3_length"]["template"] == "simple"
    spec = json.loads((ROOT / offline_plots.LOG_Y_TEMPLATE).read_text())
    assert spec["encoding"]["y"]["scale"] == {"type": "log"}


def test_s2s_plots_outside_a_project_is_refused_and_makes_no_dvc_folder(tmp_path):
    """It wrote its template to ./.dvc/tmp wherever it ran: the folder was then a DVC project
    to every later s2s command in it or below (their project lock taken there)."""
    from conftest import BIN, run

    bare = tmp_path / "bare"
    bare.mkdir()
    proc = run([str(BIN / "s2s"), "plots"], bare, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"{bare}: not in a DVC project (no .dvc/ here or above)" in proc.stderr
    assert list(bare.iterdir()) == []
    (tmp_path / ".dvc").mkdir()  # in a project's subfolder: the template goes to the project's
    assert offline_plots.template_path(tmp_path).parent == tmp_path / ".dvc" / "tmp"
