import pickle, numpy as np
from hloshard.solver.branch import _Rows
p, red = pickle.load(open('/work/notes/proof36/v_red.pkl','rb'))
u = _Rows(red)
b, vals, duals, cidx, crhs = pickle.load(open('/tmp/v_rootcuts.pkl','rb'))
sizes=np.array([len(c) for c in red.costs]); xoff=np.concatenate([[0],np.cumsum(sizes)[:-1]])
ncut=len(crhs); nmem=len(u.rhs)
mem=-duals[len(duals)-ncut-nmem:len(duals)-ncut]; cut=-duals[len(duals)-ncut:]
print("bound", b, "mem priced", {int(k): round(float(mem[k]),4) for k in np.nonzero(mem>1e-9)[0]}, "cut duals", np.round(cut,4).tolist(), "cut rhs", crhs)
x=[vals[xoff[i]:xoff[i]+sizes[i]] for i in range(red.num_nodes)]
frac=[(i, round(1-float(x[i].max()),3)) for i in range(red.num_nodes) if 1-x[i].max()>1e-3]
print("fractional nodes", len(frac), frac)
for k in [3,34]:
    print("row",k,"rhs",u.rhs[k],"load", sum(float(x[i]@u.D[i][:,k]) for i,d in enumerate(u.D) if d is not None))
    for i,d in enumerate(u.D):
        if d is None or not d[:,k].any(): continue
        vs=sorted(set(d[:,k].tolist())); mass={v: round(float(x[i][d[:,k]==v].sum()),3) for v in vs}
        if max(mass.values())<0.999: print("  node",i,mass)
