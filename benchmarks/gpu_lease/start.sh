#!/bin/bash
# A GPU lease's first call (see README.md here): three background chains, process sessions of their own that
# outlive the call while the machine stays held -- the full compat run; the seed on both targets then
# pytest -m gpu; the libraries' own suites (suites.sh) -- then waits up to $1 seconds and packs /tmp/res
# into $OUT/res1.tgz.
cd "$(dirname "$0")/../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=/tmp/res; mkdir -p $R
{ date; nvidia-smi -L; nproc; python3 -c "import numpy, numba, numba.cuda; print(numpy.__version__, numba.__version__, numba.cuda.is_available())"; } > $R/env.txt 2>&1
setsid nohup bash -c "python3 benchmarks/compat.py --switch import --jobs 12 --timeout 200 --out $R/compat > $R/compat.log 2>&1; touch $R/compat.done" >/dev/null 2>&1 < /dev/null &
setsid nohup bash -c "{ echo '== seed, GPU'; python3 examples/seed_redefinition.py; echo '== seed, CPU target'; OVERDUB_TARGET=cpu python3 examples/seed_redefinition.py; } > $R/seed.txt 2>&1; timeout 420 python3 -m pytest -m gpu -q -p no:cacheprovider tests > $R/gpu.txt 2>&1; echo rc=\$? >> $R/gpu.txt; touch $R/gpu.done" >/dev/null 2>&1 < /dev/null &
setsid nohup bash -c "SUITES_ONLY=1 bash benchmarks/gpu_lease/suites.sh; touch $R/suites.done" >/dev/null 2>&1 < /dev/null &
end=$((SECONDS + ${1:-500})); while [ $SECONDS -lt $end ] && ! { [ -e $R/compat.done ] && [ -e $R/gpu.done ] && [ -e $R/suites.done ]; }; do sleep 5; done
tar czf $OUT/res1.tgz -C /tmp res; ls $R; cat $R/seed.txt; tail -5 $R/gpu.txt; cat $R/libraries.txt 2>/dev/null; tail -4 $R/compat.log
