"""Benchmarks: jobscheduler against APScheduler 3.11 and against what the machine allows.

Each script runs on its own (``python bench/<name>.py [--smoke] [--reps N]``), prints a table
and writes JSON under ``bench/results/``; ``python bench/run_all.py`` runs them all. The
package is importable (``bench._jobs``) so internal jobs can name real functions.
"""
