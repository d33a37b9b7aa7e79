import json,glob,sys
for f in sorted(glob.glob('plans/*/*/*.solve.cost.json')):
    a=json.load(open(f)); m=json.load(open(f.replace('.solve.cost.json','.main.cost.json')))
    try: gs=json.load(open(f.replace('.solve.cost.json','.GSPMD.cost.json'))).get('optimal_seconds')
    except Exception: gs=None
    b,mm=a.get('optimal_seconds') or 0, m.get('optimal_seconds') or 0
    p=f.split('/')
    print(f"{p[1]} {p[2]:8} {p[3].split('.')[0]:30} br {b*1e6:10.3f} main {mm*1e6:10.3f} br/main {b/mm if mm else 0:.4f} br/gspmd {b/gs if gs else 0:.3f} main/gspmd {mm/gs if gs else 0:.3f} bytes {a.get('bytes_accessed',0)/1e6:.3f} vs {m.get('bytes_accessed',0)/1e6:.3f} {a.get('error') or ''}")
