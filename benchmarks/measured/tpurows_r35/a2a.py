"""Every all-to-all of libtpu's optimised programs: is its split dim major-most in its layout?"""
import re, sys, glob, collections
R = re.compile(r"%[\w.\-]+ = (\w+)\[([0-9,]*)\]\{([0-9,]+)(?::[^}]*)?\} all-to-all\(.*?dimensions=\{(\d+)\}")
tot = collections.Counter(); bad = []
for f in glob.glob(sys.argv[1]):
    for m in R.finditer(open(f).read()):
        dt, dims, lay, d = m.groups()
        dims = [int(x) for x in dims.split(",")]; lay = [int(x) for x in lay.split(",")]; d = int(d)
        # major-most non-unit dim
        major = [x for x in reversed(lay) if dims[x] > 1]
        ok = major and major[0] == d
        tot[ok] += 1
        if not ok: bad.append((f.split("/")[-1], dt, dims, lay, d))
print(dict(tot)); [print(b) for b in bad[:20]]
