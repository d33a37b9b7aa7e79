"""Run `hloshard solve ARGS` in process; a thread samples, every 0.1 s, VmRSS and the main thread's stack
(hloshard frames).  At exit it prints to stderr: PEAK (RSS MB and the stack at the highest sample), and
INCL (inclusive seconds per hloshard function, the 40 largest), and writes the raw samples to $PROF_OUT
(json lines: t, rss, stack) when set."""
import sys, threading, time, os, json, collections
def rss():
    for l in open('/proc/self/status'):
        if l.startswith('VmRSS'): return int(l.split()[1])//1024
main = threading.get_ident(); samples = []; stop = False
DT = 0.1
def watch():
    t0 = time.monotonic()
    while not stop:
        fr = sys._current_frames().get(main)
        names = []
        while fr is not None:
            co = fr.f_code
            if 'hloshard' in co.co_filename:
                names.append(f"{os.path.basename(os.path.dirname(co.co_filename))}/{os.path.basename(co.co_filename)}:{co.co_name}")
            fr = fr.f_back
        samples.append((round(time.monotonic() - t0, 2), rss(), names[::-1]))
        time.sleep(DT)
th = threading.Thread(target=watch, daemon=True); th.start()
from hloshard.entry import main as hmain
sys.argv = ['hloshard', 'solve'] + sys.argv[1:]
try:
    hmain()
except SystemExit:
    pass
finally:
    stop = True
    time.sleep(0.15)
    if samples:
        t, r, st = max(samples, key=lambda s: s[1])
        print(f"PEAK {r} MB at {t} s: {' > '.join(st[-8:])}", file=sys.stderr)
        incl = collections.Counter()
        for i, (t, r, st) in enumerate(samples):
            dt = samples[i + 1][0] - t if i + 1 < len(samples) else DT
            for name in set(st):
                incl[name] += dt
        for name, s in incl.most_common(45):
            print(f"INCL {s:7.2f} {name}", file=sys.stderr)
        out = os.environ.get('PROF_OUT')
        if out:
            with open(out, 'w') as f:
                for s in samples:
                    f.write(json.dumps(s) + '\n')
