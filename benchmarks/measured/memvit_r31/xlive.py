"""xlive.py DUMP I TAGGED.hlo [T]: XLA's temps live at its peak (or at schedule point T), with the hloshard instruction
(op_name tag) each came from."""
import sys, re
from hloshard.xla_memory import parse_buffer_assignment
d, i, tagged = sys.argv[1], sys.argv[2], sys.argv[3]
ba = open(f"{d}/{i}.buffer-assignment.txt").read(); lr = open(f"{d}/{i}.live-range.txt").read()
opt = open(f"{d}/{i}.optimized.txt").read()
op_of = {}
for m in re.finditer(r"^\s*(?:ROOT )?%?([\w.\-]+) = .*?op_name=\"(hloshard\.\d+)\"", opt, re.M):
    op_of[m.group(1)] = m.group(2)
tag_name = {}
for m in re.finditer(r"^\s*(?:ROOT )?%?([\w.\-]+) = .*?op_name=\"(hloshard\.\d+)\"", open(tagged).read(), re.M):
    tag_name[m.group(2)] = m.group(1)
allocs, values = parse_buffer_assignment(ba, lr)
temps = [v for v in values if allocs[v["alloc"]]["kind"] == "temp" and v["start"] is not None and not v["shape"].startswith("(")]
def at(t):
    slots = {}
    for v in temps:
        if v["start"] <= t <= v["end"]:
            slots.setdefault((v["alloc"], v["offset"]), v)
    return slots
if len(sys.argv) > 4:
    best_t = int(sys.argv[4])
else:
    best_t, best = None, -1
    for t in sorted({v["start"] for v in temps}):
        s = sum(v["size"] for v in at(t).values())
        if s > best: best_t, best = t, s
live = sorted(at(best_t).values(), key=lambda v: -v["size"])
seq = re.findall(r"^\s+(\d+):(\S+)", lr, re.M)
names = {int(a): b for a, b in seq}
print("XLA temp peak", sum(v["size"] for v in live), "at", best_t, names.get(best_t), tag_name.get(op_of.get(names.get(best_t), ""), ""))
for v in live:
    print(f"{v['size']:>10,} {v['name']:<28} {v['shape']:<26} [{v['start']},{v['end']}] {tag_name.get(op_of.get(v['name'],''),'?')}  ({names.get(v['start'])} .. {names.get(v['end'])})")
