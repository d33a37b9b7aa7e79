# rsswatch.sh LIMIT_KB LOG -- CMD...: run CMD, sample its RSS every 0.5 s, kill it past LIMIT_KB
lim=$1; log=$2; shift 2
"$@" > $log.out 2>&1 &
pid=$!
peak=0; t0=$(date +%s)
while kill -0 $pid 2>/dev/null; do
  r=$(awk '/VmRSS/{print $2}' /proc/$pid/status 2>/dev/null); r=${r:-0}
  [ "$r" -gt "$peak" ] && peak=$r && echo "$(( $(date +%s) - t0 )) s rss $r KB load $(cut -d' ' -f1 /proc/loadavg)" >> $log
  if [ "$r" -gt "$lim" ]; then echo "killed at $r KB after $(( $(date +%s) - t0 )) s" >> $log; kill $pid; fi
  sleep 0.5
done
wait $pid; echo "exit $? peak $peak KB after $(( $(date +%s) - t0 )) s" >> $log
