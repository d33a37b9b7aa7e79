"""entry_computation_layout of libtpu's optimised programs: which dim is minor, against a lane-use rule"""
import re, sys, glob, collections
def lane(n): return n / (128 * -(-n // 128))
ARR = re.compile(r"(\w+)\[([0-9,]*)\]\{([0-9,]*)(?::[^}]*)?\}")
def rule(dims):
    # the minor dim: the one with the best lane use; ties -> the later dim (row-major default)
    best = max(range(len(dims)), key=lambda i: (lane(dims[i]), i))
    return best
if __name__ == "__main__":
    stats = collections.Counter(); bad = []
    for f in sorted(glob.glob(sys.argv[1])):
        head = open(f).read(20000)
        m = re.search(r"entry_computation_layout=\{(.*?)\}, num_partitions|entry_computation_layout=\{(.*?)\}\n", head, re.S)
        s = head[head.index("entry_computation_layout={"):head.index("num_partitions")]
        for dt, dims, m2m in ARR.findall(s):
            d = [int(x) for x in dims.split(",") if x]
            if len(d) < 2: continue
            mm = [int(x) for x in m2m.split(",")]
            obs = mm[0]; pred = rule(d)
            key = "ok" if obs == pred else "bad"
            stats[key] += 1
            if obs != pred: bad.append((f.split("/")[-1], dt, d, mm))
            else: stats["ok_nondefault" if obs != len(d) - 1 else "ok_default"] += 1
    print(stats)
    for b in bad[:40]: print(b)
