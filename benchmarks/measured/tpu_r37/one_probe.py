import sys, json, os
sys.argv = [sys.argv[0], sys.argv[1], "/tmp/one_probe.json", sys.argv[2]]
src = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "a2a_probe.py")).read()
src = src.replace("rows = analyse(c.as_text())", "rows = analyse(c.as_text()); open('/work/notes/tpu37/one_probe.txt','w').write(c.as_text())")
exec(compile(src, "a2a_probe", "exec"))
