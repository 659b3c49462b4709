# The two commands of the README. Each does its own set-up (scripts/setup.sh is idempotent and fast when nothing changed).
export MUJOCO_GL ?= egl
PY := .venv/bin/python

.PHONY: demo test setup bench
setup:
	@bash scripts/setup.sh

demo: setup
	$(PY) -m real2sim demo --out demo_out

test: setup
	$(PY) -m pytest -n 2 --dist loadfile -q -rs --durations=15

bench: setup
	$(PY) benchmarks/run_all.py
