"""The scale bench's figures and bar as the plain-text table ``make bench-10m`` prints."""

from __future__ import annotations

from bench.dispatch.data import CLOCK
from bench.dispatch.render import disk_line, render_week
from bench.dispatch.scale_results import ScaleResults, ScaleVerdict


def render_scale(results: ScaleResults) -> str:
    """The figures and the bar as a plain-text table."""
    p = results.parameters
    lines = [
        f"scale benchmark: N={results.at_n.data.duties:,} duties "
        f"({results.at_n.data.dispatchable:,} dispatchable), chunk {p['chunk_size']:,}, "
        f"{p['workers']} dispatcher connection(s), invocations of {p['invocation_ms'] / 1000:g} s "
        f"(reserve {p['reserve_ms'] / 1000:g} s), {p['mix']} mix, clock {CLOCK.isoformat()}",
        f"PostgreSQL {results.server['version']} ({results.server['where']}), {p['cpus']} CPUs, "
        f"dispatcher code {', '.join(results.code_versions)}",
        disk_line(results.disk),
        "",
        f"{'measurement':<34} {'seconds':>9} {'srv CPU':>8} {'tasks':>11} {'advanced':>10} "
        f"{'pages':>6} {'trips':>7} {'RSS MiB':>8} {'links':>5}",
    ]
    for label, at in (("N", results.at_n), ("N/10", results.at_tenth)):
        lines.append(f"{label} = {at.data.duties:,} duties, generated in {at.data.seconds:.1f} s")
        for name, chain in (("first scheduled run", at.first), ("no-op, tables vacuumed", at.noop)):
            cpu = chain.server_cpu_seconds
            lines.append(
                f"  {name:<32} {chain.seconds:>9.2f} {'n/a' if cpu is None else f'{cpu:.2f}':>8} "
                f"{chain.tasks_created:>11,} {chain.duties_advanced:>10,} {chain.pages:>6,} "
                f"{chain.round_trips:>7,} {chain.rss_peak_mib:>8.1f} {len(chain.links):>5}"
            )
            if len(chain.links) > 1:
                lines += [
                    f"    link {i + 1}: {link.seconds:8.2f} s, {link.pages:,} pages, "
                    f"{link.tasks_created:,} tasks, resume_after "
                    f"{link.report.get('resume_after')!r}, stopped by "
                    f"{link.report.get('stopped_by')!r}"
                    for i, link in enumerate(chain.links)
                ]
    for label, at in (("N", results.at_n), ("N/10", results.at_tenth)):
        if at.week is not None:
            lines += ["", f"{label} = {at.data.duties:,} duties:", *render_week(at.week)]
    lines += ["", f"{'bar':<40} {'value':>40}  {'limit':<30} verdict"]
    lines += [f"{v.name:<40} {v.shown:>40}  {v.bar:<30} {_word(v)}" for v in results.verdicts]
    return "\n".join(lines)


def _word(verdict: ScaleVerdict) -> str:
    if not verdict.judged:
        return "met" if verdict.passed else "missed"
    return "PASS" if verdict.passed else "FAIL"
