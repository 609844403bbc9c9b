"""Reports of a replay a person reads: a self-contained HTML page."""

from sandbox.report.html import ReportLike, render_report, write_report, write_store_report

__all__ = ["ReportLike", "render_report", "write_report", "write_store_report"]
