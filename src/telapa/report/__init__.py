"""Reports of continual runs (``telapa report``, ``telapa inspect``): the paper's tables
and figures from a set of run directories, as one self-contained HTML page, Markdown, CSV,
PNG and SVG; and a run's policy archives as summary tables.

    load.py         complete run directories (missing or incomplete ones named or skipped)
    tables.py       table values plus how to show them; Markdown (best in bold) and CSV
    scores.py       main metrics table and revisit table
    aggregates.py   rliable's aggregates of the revisit scores (IQM, profile, P(X > Y))
    compute.py      compute and memory table, TeLAPA's runtime breakdown
    claims.py       the paper's Table 1 claims checked on the runs (paired sign-flip or
                    Welch tests, Holm) and the comparisons behind them
    docsync.py      a Markdown document's table and figure blocks filled from a report
    curves.py       learning curves (mean and 95% CI over seeds), performance profile
    figures.py      a figure rendered to PNG and SVG
    document.py     sections of tables and figures as HTML and Markdown
    build.py        the whole report, written atomically
    inspection.py   one run's archives and transfers

Submodules are imported where used: `build` pulls in matplotlib and the archive analysis.
"""
