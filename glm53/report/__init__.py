"""Reports of run folders: charts and tables drawn from what the commands wrote. Read in this order:

    escape.py         untrusted text (completions, prompts, corpus text) as Markdown code that nothing renders
                      live: every report writes such text through it
    charts.py         the PNG charts and Markdown tables every report draws with; matplotlib loads when a chart
                      is drawn
    folder_report.py  `glm53 report RUN_DIR`: any run folder's curves, summary and examples, as REPORT.md
    run_report.py     the main job's (`glm53 run`) charts and REPORT.md
    humaneval_report.py  HumanEval's figures: the main job's receipt and REPORT.md (beside the Codex rows), and a
                      sweep job's metrics
    run_suite_report.py  the main job's REPORT.md on a suite with several evaluation splits (the broad suite)
    commands.py       `glm53 report`'s flags
"""
