"""``dlperf history URL --html DIR``: the history as a static site that opens from ``file://``.

The site is one overview (``index.html``: every case of every machine class, one row each, sortable
and filterable) and one page per case and machine class (``cases/<key>.html``, its permalink:
the figure of each night with its runs' spread, the baseline and its tolerance band, change
points with their step, interval and what changed, the verdict of each night and why). Its
charts are Plotly's (https://plotly.com/javascript/), drawn in the browser from figures
(:mod:`.charts`) this module writes into each page as JSON; ``plotly.min.js`` is copied from the ``plotly`` package
into ``assets/``, with the site's own script and style, so that the site needs no server and no
network. The pages are Jinja2 templates (``templates/``) with autoescaping: a case id, a host
name or a verdict's line is text, never markup.

The site is written whole into a temporary folder beside ``DIR`` and moved into place: a reader
never sees half a site, and a build that fails leaves the one before as it was.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import importlib.util
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import __version__
from .charts import VERDICTS, extra_figure, fmt, link_target, pct, phases_figure, trend_figure, verdict_style
from .dashboard import SPARK_NIGHTS, CaseView, Night, Standing, StepState, utc

HERE = Path(__file__).resolve().parent
ASSETS = HERE / "assets"
TEMPLATES = HERE / "templates"
#: The file that marks a folder as a site this module wrote (and so one it may replace).
MARKER = "dlperf-site.json"

class SiteError(OSError):
    """A site that cannot be written; the message names the folder and the problem."""


def missing(what: str) -> str | None:
    """Why ``what`` cannot build a site here (Plotly's script or Jinja2 missing), or None when it can."""
    absent = [name for name in ("plotly", "jinja2") if importlib.util.find_spec(name) is None]
    if not absent:
        return None
    return f"{what} needs {' and '.join(absent)}: pip install 'pytest-dlperf[history]'"


def plotly_js() -> Path:
    """``plotly.min.js`` as the ``plotly`` package ships it (its Python half is not needed)."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise SiteError("the site needs plotly's plotly.min.js: pip install 'pytest-dlperf[history]'")
    path = Path(next(iter(spec.submodule_search_locations))) / "package_data" / "plotly.min.js"
    if not path.is_file():
        raise SiteError(f"the plotly package has no {path.name} at {path}; reinstall plotly")
    return path


# --------------------------------------------------------------------------- pages


@dataclasses.dataclass(frozen=True)
class SiteSummary:
    """What a build wrote."""

    folder: Path
    cases: int
    machines: int
    sessions: int
    seconds: float

    @property
    def index(self) -> Path:
        return self.folder / "index.html"


def sparkline(view: CaseView, width: int = 120, height: int = 26) -> dict[str, Any]:
    """The last :data:`~.dashboard.SPARK_NIGHTS` nights as SVG coordinates: the trend as a line, nights off
    it as grey dots."""
    nights = [n for n in view.nights[-SPARK_NIGHTS:] if n.value is not None]
    if not nights:
        return {"line": "", "dots": [], "last": None, "width": width, "height": height}
    values = [n.value for n in nights]
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    count = len(view.nights[-SPARK_NIGHTS:])
    index = {id(n): i for i, n in enumerate(view.nights[-SPARK_NIGHTS:])}

    def xy(night: Night) -> tuple[float, float]:
        x = 2 + (width - 4) * (index[id(night)] / max(1, count - 1))
        y = height - 3 - (height - 6) * ((night.value - low) / span if high > low else 0.5)
        return round(x, 1), round(y, 1)

    trend = [n for n in nights if n.standing is Standing.TREND]
    line = " ".join(f"{x},{y}" for x, y in map(xy, trend))
    dots = [xy(n) for n in nights if n.standing is not Standing.TREND]
    last = xy(trend[-1]) if trend else None
    return {"line": line, "dots": dots, "last": last, "width": width, "height": height}


def _settings(case: Mapping[str, Any]) -> str:
    settings = case.get("settings") or {}
    parts = [f"{k}={v}" for k, v in sorted(settings.items())]
    target = case.get("target")
    if target:
        parts.append(f"target {target.get('metric')} {target.get('value')}")
    return ", ".join(parts)


def _state_text(view: CaseView) -> str:
    step = view.open_step
    if view.state is StepState.NEWEST:
        return f"newest figures {pct(step.change)}"
    if view.state is StepState.OPEN:
        since = view.trend[step.index].session
        return f"open: {pct(step.change)} since {utc(since.created):%Y-%m-%d}"
    if view.state is StepState.CLOSED:
        return f"last step {pct(view.history.change_points[-1].step.change)} (better)"
    return "none"


def overview_row(view: CaseView) -> dict[str, Any]:
    latest = view.latest
    figure = view.latest_figure
    case = view.case
    change = latest.change
    step = view.open_step
    return {
        "view": view, "key": view.key, "href": f"cases/{view.key}.html", "model": str(case.get("model", "")),
        "precision": str(case.get("precision", "")), "batch": str(case.get("batch_size", "")),
        "gpus": str(case.get("gpus", "")), "settings": _settings(case),
        "nights": len(view.nights), "figure": fmt(latest.value), "figure_sort": "" if latest.value is None
        else repr(latest.value), "unit": view.unit,
        "earlier": None if latest.value is not None or figure is None else
        f"last figure {fmt(figure.value)} on {utc(figure.session.created):%Y-%m-%d}",
        "verdict": latest.row.verdict, "verdict_label": verdict_style(latest.row.verdict)[1],
        "standing": str(latest.standing), "message": latest.row.message or "",
        "change": pct(change), "change_sort": "" if change is None else repr(change),
        # A night off the trend decided nothing: its change is shown, not coloured as a finding.
        "change_class": "" if change is None else "off" if latest.standing is not Standing.TREND
        else ("worse" if view.measure.regression(change) else "better"),
        "spark": sparkline(view), "state": str(view.state), "state_text": _state_text(view),
        "state_sort": "" if step is None else repr(step.change if view.measure.higher_is_better else -step.change),
        "date": f"{utc(latest.session.created):%Y-%m-%d %H:%M}",
        "date_sort": utc(latest.session.created).isoformat(),
    }


def _versions(session) -> str:
    return ", ".join(f"{label} {value}" for label, value in (("torch", session.torch), ("CUDA", session.cuda),
                                                             ("driver", session.driver)) if value)


def nights_table(view: CaseView, page_dir: Path, has_links: bool) -> Any:
    """The rows of a case page's table of nights, newest first, as markup. Written here rather than in the
    template (a year of nights is a few hundred rows a page); every value goes through :func:`markupsafe.escape`
    (Jinja2's own)."""
    from markupsafe import Markup, escape

    out = []
    nights = view.nights
    for index in range(len(nights) - 1, -1, -1):
        night = nights[index]
        s = night.session
        runs = night.runs
        anchor = escape(f"night-{s.id}")
        standing = str(night.standing)
        figure = fmt(night.value) if night.raw is None or night.value is not None else repr(night.raw)
        versions = _versions(s)
        if index and versions == _versions(nights[index - 1].session):
            versions = ""  # said where they changed (and on the first night), not on every row
        verdict = night.row.verdict
        cells = [
            f'<td><a href="#{anchor}">{night.when:%Y-%m-%d %H:%M}</a></td>',
            f'<td title="{escape(s.id)}">{escape(s.id[:8])}</td>',
            f"<td>{escape(s.hostname or '')}</td>",
            f"<td>{escape(s.short_commit or '')}"
            + (f' <span class="sub">{escape(s.git_branch)}</span>' if s.git_branch else "")
            + (f'<div class="sub">{escape(versions)}</div>' if versions else "") + "</td>",
            f'<td class="num">{escape(figure)}'
            + (f' <span class="standing">{escape(standing)}</span>' if night.standing is not Standing.TREND else "")
            + "</td>",
            f'<td class="num">{"" if len(runs) <= 1 else f"{len(runs)}: {fmt(min(runs))} .. {fmt(max(runs))}"}</td>',
            f'<td class="num">{fmt(night.baseline)}</td>',
            f'<td class="num">{pct(night.change)}</td>',
            f'<td class="why"><span class="verdict v-{escape(verdict)}">{escape(verdict_style(verdict)[1])}</span>'
            + (f' <span class="standing">busy: {escape(night.row.busy)}</span>' if night.row.busy else "")
            + f" {escape(night.row.message or '')}</td>",
        ]
        if has_links:
            cells.append("<td>" + " ".join(f'<a href="{escape(link_target(link.target, link.is_url, page_dir))}">'
                                           f"{escape(link.label)}</a>" for link in night.links) + "</td>")
        out.append(f'<tr id="{anchor}" class="standing-{escape(standing.replace(" ", "-"))}" '
                   f'data-standing="{escape(standing)}" data-verdict="{escape(verdict)}">{"".join(cells)}</tr>')
    return Markup("\n".join(out))


def _change_rows(view: CaseView, page_dir: Path) -> list[dict[str, Any]]:
    history = view.history
    if history is None:
        return []
    trend = view.trend
    out = []
    for n, point in enumerate(history.change_points, 1):
        step = point.step
        after, before = trend[step.index], trend[step.index - 1]
        out.append({
            "number": n, "step": pct(step.change), "interval": f"[{pct(step.low)}, {pct(step.high)}]",
            "pvalue": f"{step.pvalue:.3g}", "before": fmt(step.before), "after": fmt(step.after),
            "worse": view.measure.regression(step.change), "first": f"{utc(after.session.created):%Y-%m-%d %H:%M}",
            "first_anchor": f"night-{after.session.id}", "previous": f"{utc(before.session.created):%Y-%m-%d %H:%M}",
            "previous_anchor": f"night-{before.session.id}", "index": step.index + 1,
            "changes": list(point.changes),
        })
    return out


class _Renderer:
    """The Jinja2 environment of the site's templates, autoescaping, strict about undefined names."""

    def __init__(self) -> None:
        import jinja2

        self.env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                                      undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        # Plotly's JSON inside <script type="application/json">: no NaN (JSON.parse refuses it), compact.
        self.env.policies["json.dumps_kwargs"] = {"allow_nan": False, "separators": (",", ":")}

    def render(self, name: str, **context: Any) -> str:
        return self.env.get_template(name).render(**context)


def _unique(values: Sequence[str], key=None) -> list[str]:
    return sorted({v for v in values if v != ""}, key=key)


def _gpu_key(value: str) -> tuple[int, str]:
    return (int(value), "") if value.isdigit() else (10**9, value)


def render_overview(renderer: _Renderer, views: Sequence[CaseView], meta: Mapping[str, Any]) -> str:
    rows = [overview_row(v) for v in views]
    filters = [
        ("machine", "machine class", _unique([v.machine for v in views])),
        ("model", "model", _unique([r["model"] for r in rows])),
        ("precision", "precision", _unique([r["precision"] for r in rows])),
        ("gpus", "GPUs", _unique([r["gpus"] for r in rows], key=_gpu_key)),
        ("verdict", "verdict", _unique([r["verdict"] for r in rows])),
    ]
    return renderer.render("overview.html.j2", root=".", rows=rows, filters=filters, meta=meta, verdicts=VERDICTS,
                           spark_nights=SPARK_NIGHTS)


def render_case(renderer: _Renderer, view: CaseView, meta: Mapping[str, Any], page_dir: Path) -> str:
    history = view.history
    trend = view.trend
    drift = None
    if history is not None and history.drifting:
        drift = history.trend.describe()
    newest = None
    if history is not None and history.newest_step is not None:
        newest = history.newest_step.describe()
    figures = {"trend": trend_figure(view, page_dir), "extra": extra_figure(view), "phases": phases_figure(view)}
    has_links = any(n.links for n in view.nights)
    latest = view.latest
    summary = {
        "nights": len(view.nights), "trend": len(trend), "first": f"{utc(view.nights[0].session.created):%Y-%m-%d}",
        "last": f"{utc(latest.session.created):%Y-%m-%d %H:%M}", "figure": fmt(latest.value),
        "verdict": latest.row.verdict, "verdict_label": verdict_style(latest.row.verdict)[1],
        "message": latest.row.message or "", "change": pct(latest.change), "state": str(view.state),
        "state_text": _state_text(view), "settings": _settings(view.case),
        "direction": "higher is better" if view.measure.higher_is_better else "lower is better",
    }
    return renderer.render(
        "case.html.j2", root="..", view=view, meta=meta, summary=summary, figures=figures, drift=drift, newest=newest,
        notes=view.notes, changes=_change_rows(view, page_dir), nights=nights_table(view, page_dir, has_links),
        verdicts=VERDICTS, has_links=has_links)


def check_target(folder: Path) -> None:
    """``folder`` may be written: new, empty, or a site this module wrote before (it has :data:`MARKER`)."""
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise SiteError(f"{folder}: is not a folder; give a folder for the site (it is created)")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / MARKER).is_file():
        raise SiteError(f"{folder}: is a folder with other files in it, not a site dlperf wrote ({MARKER} is "
                        f"missing); give a new or empty folder")
    parent = folder.resolve().parent
    if not parent.is_dir():
        raise SiteError(f"{folder}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise SiteError(f"{folder}: cannot write into {parent}")


def write_site(views: Sequence[CaseView], folder: str | os.PathLike, *, store: str, sessions: int,
               built: _dt.datetime | None = None) -> SiteSummary:
    """Write the site of ``views`` into ``folder``, whole or not at all; :class:`SiteError` in one line."""
    started = time.perf_counter()
    folder = Path(folder)
    check_target(folder)
    final = folder.resolve()
    built = built or _dt.datetime.now(_dt.timezone.utc)
    machines = sorted({v.machine for v in views})
    meta = {"store": store, "sessions": sessions, "cases": len(views), "machines": machines,
            "built": f"{built:%Y-%m-%d %H:%M} UTC", "version": __version__}
    renderer = _Renderer()
    temporary = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    try:
        temporary.chmod(0o755)  # mkdtemp's folder is private; a site is for a web server or a team to read
        (temporary / "assets").mkdir()
        (temporary / "cases").mkdir()
        shutil.copyfile(plotly_js(), temporary / "assets" / "plotly.min.js")
        for asset in ("dashboard.css", "overview.js", "case.js"):
            shutil.copyfile(ASSETS / asset, temporary / "assets" / asset)
        (temporary / "index.html").write_text(render_overview(renderer, views, meta), encoding="utf-8")
        for view in views:
            page = render_case(renderer, view, meta, final / "cases")
            (temporary / "cases" / f"{view.key}.html").write_text(page, encoding="utf-8")
        (temporary / MARKER).write_text(json.dumps({
            "kind": "dlperf-history-site", "version": __version__, "store": store, "built": built.isoformat(),
            "sessions": sessions, "cases": [{"id": v.case_id, "machine": v.machine, "page": f"cases/{v.key}.html"}
                                            for v in views]}, indent=1) + "\n", encoding="utf-8")
        _swap(temporary, final)
    except BaseException as exc:
        shutil.rmtree(temporary, ignore_errors=True)
        if isinstance(exc, OSError) and not isinstance(exc, SiteError):
            raise SiteError(f"{folder}: the site was not written: {exc.strerror or exc}") from None
        raise
    return SiteSummary(final, len(views), len(machines), sessions, time.perf_counter() - started)


def _swap(temporary: Path, final: Path) -> None:
    """Put the new site in place of the old one (if any) with renames, then remove the old one."""
    old = None
    if final.exists():
        old = final.parent / f".{final.name}.old-{uuid.uuid4().hex[:8]}"
        final.rename(old)
    try:
        temporary.rename(final)
    except OSError:
        if old is not None:
            old.rename(final)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
