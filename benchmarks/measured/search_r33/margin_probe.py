"""Diagnosis only (NOT a proof): the level tree on V with the float margin set to MARGIN_REL (argv[1]), to measure
how much of the tree the margin (1e-9 x V's cost scale 2e13: ~6e4 cost units) keeps open.
python margin_probe.py MARGIN_REL PASSES"""
import sys, runpy
import hloshard.solver.levels as levels
levels.MARGIN = float(sys.argv[1])
sys.argv = ['level_bb.py', 'V', 'lp:/tmp/v_lp.pkl', sys.argv[2]]
runpy.run_path(__file__.replace('margin_probe.py', 'level_bb.py'), run_name='__main__')
