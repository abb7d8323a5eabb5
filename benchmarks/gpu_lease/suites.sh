#!/bin/bash
# The libraries' own GPU suites (sources under .gpu/<library>/tests: README.md here) under numba-cuda, switched
# to overdub on the GPU, switched on the CPU target, each timed, into /tmp/res/libraries.txt; then, unless
# SUITES_ONLY is set, one realistic call of each (benchmarks/libraries.py)
cd "$(dirname "$0")/../.."
[ -d /tmp/site/numpy ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=/tmp/res; mkdir -p $R; L=$R/libraries.txt; ROOT=$PWD
suite() {  # suite NAME DIR PACKAGE -- pytest args
  local name=$1 dir=$2 pkg=$3; shift 4
  for mode in ${MODES:-numba-cuda switched-gpu switched-cpu}; do
    s=$SECONDS
    case $mode in
      numba-cuda) (cd $dir && timeout 300 python3 -m pytest -q -p no:cacheprovider "$@" 2>&1 | tail -4) ;;
      switched-gpu) (cd $dir && timeout 300 python3 -m overdub.switch --package $pkg --path tests -m pytest -q -p no:cacheprovider --assert=plain "$@" 2>&1 | tail -4) ;;
      switched-cpu) (cd $dir && OVERDUB_TARGET=cpu timeout 300 python3 -m overdub.switch --package $pkg --path tests -m pytest -q -p no:cacheprovider --assert=plain "$@" 2>&1 | tail -4) ;;
    esac
    echo "== $name $mode: $((SECONDS - s)) s"
  done
}
{
suite stumpy .gpu/stumpy stumpy -- $(cd .gpu/stumpy && ls tests/test_gpu_*.py)
suite sgkit .gpu/sgkit sgkit -- -m gpu tests/test_distance.py
MODES="numba-cuda switched-gpu" suite warprnnt .gpu/warprnnt warprnnt_numba -- tests
MODES=switched-cpu suite warprnnt .gpu/warprnnt warprnnt_numba -- tests/numba/rnnt_loss/utils/test_reduce.py tests/numba/rnnt_loss/utils/test_rnnt_helper.py
} > $L 2>&1
[ -n "$SUITES_ONLY" ] || timeout 240 python3 benchmarks/libraries.py --out $R/lib > $R/libcalls.txt 2>&1
