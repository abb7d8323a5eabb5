#!/bin/bash
# A GPU lease's second call, right after start.sh's (see README.md here): waits up to $1 seconds for its chains,
# then the timed runs alone -- one realistic call of each library, parts 5 and 7 on the host, the CPU target's
# library call -- packing /tmp/res into $OUT after each.
cd "$(dirname "$0")/../.."
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=/tmp/res
end=$((SECONDS + ${1:-200})); while [ $SECONDS -lt $end ] && ! { [ -e $R/compat.done ] && [ -e $R/gpu.done ] && [ -e $R/suites.done ]; }; do sleep 5; done
ls $R; tar czf $OUT/res2.tgz -C /tmp res
timeout 170 python3 benchmarks/libraries.py --repeat 3 --out $R/lib > $R/libcalls.txt 2>&1
tar czf $OUT/res3.tgz -C /tmp res
timeout 200 python3 benchmarks/run.py --quick --parts 5,7 --out $R/p57 > $R/p57.txt 2>&1
timeout 60 python3 benchmarks/libraries.py --repeat 3 --cpu --out $R/libcpu > $R/libcpu.txt 2>&1
tar czf $OUT/res4.tgz -C /tmp res
cat $R/libraries.txt; tail -5 $R/gpu.txt; tail -30 $R/libcalls.txt; grep -A40 "## Targets" $R/p57.txt | head -40; tail -8 $R/libcpu.txt
