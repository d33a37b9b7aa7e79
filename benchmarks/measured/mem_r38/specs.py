import json, sys
d = json.load(open(sys.argv[1]))
out = []
for row in d:
    g = row["gspmd"]["mem_xla"]["total_bytes"]
    out.append(f"{row['name']}=samples/{row['name']}.pre.hlo:2x4:{g}")
print(" ".join(out))
