"""flintlock's runtime: lifecycle, hooks, operators, tasks, state and test harnesses.

core never imports plugins/, operators/ or sinks/: it reaches them by name through the
plugin manager (ARCHITECTURE.md section 2).
"""
