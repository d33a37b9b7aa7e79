"""My own collective-bytes counter over compiled.as_text() (independent of hloshard).
Ring bytes per device: AG (n-1)/n*result, RS (n-1)/n*operand, AR 2(n-1)/n*size, A2A (n-1)/n*size, CP size.
While bodies multiplied by known_trip_count."""
import re
DT = {"f32":4,"f16":2,"bf16":2,"s32":4,"u32":4,"s8":1,"u8":1,"pred":1,"f64":8,"s64":8,"u64":8}
def shape_bytes(s):
    tot = 0
    for dt, dims in re.findall(r"\b(f32|f16|bf16|s32|u32|s8|u8|pred|f64|s64|u64)\[([0-9,]*)\]", s):
        n = 1
        for d in dims.split(","):
            if d: n *= int(d)
        tot += n * DT[dt]
    return tot
def group_size(line, ndev):
    m = re.search(r"replica_groups=\{(\{[^=]*?\})\}", line)
    if m:
        g = re.findall(r"\{([0-9,]+)\}", m.group(1))
        if g: return len(g[0].split(","))
    m = re.search(r"replica_groups=\[([0-9,]+)\]<=", line)
    if m: return int(m.group(1).split(",")[-1])
    m = re.search(r"replica_groups=mesh\[([^\]]*)\](?:, device_ids=\(.*?\))?\s*\{([^}]*)\}", line)
    if m:
        sizes = dict((k.strip("'\" "), int(v)) for k, v in re.findall(r"'?([\w]+)'?=(\d+)", m.group(1)))
        n = 1
        for x in m.group(2).split(","):
            x = x.strip()
            if not x: continue
            sm = re.match(r"'?(\w+)'?:\((\d+)\)(\d+)", x)
            if sm: n *= int(sm.group(3)); continue
            n *= sizes[x.strip("'\" ")]
        return n
    if "replica_groups={}" in line: return ndev
    return None
def count(text, ndev=8):
    comps = {}; cur = None; order = []
    for line in text.splitlines():
        m = re.match(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$", line)
        if m:
            cur = m.group(2); comps[cur] = []; order.append(cur)
            if m.group(1): entry = cur
            continue
        if cur: comps[cur].append(line)
    mult = {c: 0 for c in comps}
    mult[entry] = 1
    # propagate multiplicity: while body x trip count; other calls x1
    changed = True; it = 0
    def callees(line):
        out = []
        for key in ("body", "condition", "to_apply", "calls", "true_computation", "false_computation"):
            for m in re.finditer(key + r"=%?([\w.\-]+)", line): out.append((key, m.group(1)))
        m = re.search(r"branch_computations=\{([^}]*)\}", line)
        if m: out += [("branch", x.strip().lstrip("%")) for x in m.group(1).split(",")]
        return out
    for _ in range(10):
        new = {c: 0 for c in comps}; new[entry] = 1
        for c in comps:
            if mult[c] == 0: continue
            for line in comps[c]:
                trip = 1
                m = re.search(r'"known_trip_count":\{"n":"(\d+)"', line)
                if m: trip = int(m.group(1))
                for key, callee in callees(line):
                    if callee in new:
                        new[callee] += mult[c] * (trip if key == "body" else 1)
        if new == mult: break
        mult = new
    res = {"all-reduce":0.0,"all-gather":0.0,"reduce-scatter":0.0,"all-to-all":0.0,"collective-permute":0.0}
    ncoll = 0
    for c, lines in comps.items():
        if mult.get(c, 0) == 0: continue
        for line in lines:
            m = re.search(r"=\s*(.*?)\s+(all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute)(-start)?\(", line)
            if not m: continue
            kind = m.group(2); rshape = m.group(1)
            n = group_size(line, ndev)
            if kind == "collective-permute":
                b = shape_bytes(rshape) if not m.group(3) else shape_bytes(rshape) / 2
                res[kind] += b * mult[c]; ncoll += 1; continue
            if n is None: raise ValueError("unparsed replica groups: " + line[:300])
            if n <= 1: continue
            if m.group(3) and kind == "all-gather":
                # start result tuple (operand, result): take the largest
                b = shape_bytes(rshape) - shape_bytes(rshape.split(")")[0].split(",")[0])
            else:
                b = shape_bytes(rshape)
            if kind == "all-reduce": b = 2 * (n - 1) / n * b
            elif kind == "all-gather": b = (n - 1) / n * b
            elif kind == "reduce-scatter": b = (n - 1) * b   # result is operand/n
            elif kind == "all-to-all": b = (n - 1) / n * b
            res[kind] += b * mult[c]; ncoll += 1
    res["total"] = sum(v for k, v in res.items())
    res["count"] = ncoll
    return res
def mem(compiled):
    m = compiled.memory_analysis()
    return {"arg": m.argument_size_in_bytes, "out": m.output_size_in_bytes, "temp": m.temp_size_in_bytes,
            "alias": m.alias_size_in_bytes,
            "peak": m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes - m.alias_size_in_bytes}
