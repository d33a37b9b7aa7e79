# run on the device machine (13 idle CPU cores, gVisor) with carry=["tmp/ishared", ".whl-tpu"];
# tmp/ishared = ../shared/iopddl + a copy of benchmarks/measured/scale_r23/pin.py (sched_setaffinity, then exec)
PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl-tpu/*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/site:$PWD/src:$PWD HLOSHARD_SHARED=$PWD/tmp/ishared PYTHONUNBUFFERED=1 || exit
P=tmp/ishared/pin.py; nproc; cat /proc/loadavg
for g in "0,1 V" "2,3 S,A" "4,5 K,B" "6,7 M" "8,9 N" "10,11 G"; do set -- $g; timeout 570 python3 $P $1 benchmarks/iopddl.py --instances $2 --json $OUT/iop_$(echo $2|tr -d ,).json > /tmp/iop_$(echo $2|tr -d ,).log 2>&1 & done; wait
cat /proc/loadavg; cd /tmp && tar czf $OUT/ioplogs.tgz iop_*.log; ls $OUT
