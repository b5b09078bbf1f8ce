"""flintlock's runtime: lifecycle, hooks, operators, tasks, state and test harnesses.

Grouped by concept (CONTRIBUTING.md, "Layout"): hooks/ (plugin machinery), api/ (what a
user program is written against), runtime/ (one subtask), exchange/ (between tasks),
state/, sources/, plan/ (job graph, execution plan), checkpoint/, spark/ (the Spark
glue), job/ (the job on the driver), datastream/ (the program on the driver); the shared
vocabulary (errors, events, task info) and the harnesses sit here at the top.

core never imports plugins/, operators/ or sinks/: it reaches them by name through the
plugin manager (ARCHITECTURE.md section 2). Plugins import ``flintlock.plugin_api``.
"""
