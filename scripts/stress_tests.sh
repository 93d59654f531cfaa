#!/usr/bin/env bash
# Run tests again and again beside a CPU burner, to find tests that fail only under load; print the counts.
#   bash scripts/stress_tests.sh                  the verifier's tests 20 times beside a 2-thread burner
#   bash scripts/stress_tests.sh -n 12 -- tests/verify/test_verifier.py tests/verify/test_python_level.py
#                                                 other tests (pytest's arguments after --), 12 times
#   bash scripts/stress_tests.sh --fresh-clone    also the whole suite twice on a fresh clone of HEAD (no burner:
#                                                 the suite loads both cores itself; about 6 min a run on 2 cores)
#   bash scripts/stress_tests.sh --burners 0      no burner
# Runs with the python on PATH (activate the venv first) and this checkout's code (PYTHONPATH). The burners are
# this script's own processes and are ended by their pids on every exit. Exit status 1 if any run failed.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=20
burners=2
fresh=0
tests=(tests/verify)
while (($#)); do
  case "$1" in
    -n) runs=$2; shift 2 ;;
    --burners) burners=$2; shift 2 ;;
    --fresh-clone) fresh=1; shift ;;
    --) shift; tests=("$@"); break ;;
    *) echo "scripts/stress_tests.sh: unknown option $1 (use -n N, --burners N, --fresh-clone, -- TESTS...)" >&2
       exit 2 ;;
  esac
done
if ! [[ $runs =~ ^[1-9][0-9]*$ && $burners =~ ^[0-9]+$ ]]; then
  echo "scripts/stress_tests.sh: -n needs a whole number >= 1 and --burners one >= 0" \
       "(got -n $runs --burners $burners)" >&2
  exit 2
fi

burner_pids=()
clone=""
cleanup() {
  for pid in "${burner_pids[@]}"; do kill "$pid" 2>/dev/null; done
  [[ -n $clone ]] && rm -rf "$clone"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
for _ in $(seq 1 "$burners"); do
  python -c "while True: pass" &
  burner_pids+=($!)
done

echo "stress: $runs runs of pytest -q -p no:randomly ${tests[*]} beside $burners CPU burner(s); $(nproc) cores;" \
     "$(lscpu | sed -n 's/^Model name: *//p'); load $(cut -d' ' -f1-3 /proc/loadavg)"
passed=0
failed=0
for i in $(seq 1 "$runs"); do
  log=$(PYTHONPATH=$PWD python -m pytest -q -p no:randomly -p no:cacheprovider "${tests[@]}" 2>&1)
  status=$?
  summary=$(tail -n 1 <<<"$log")
  if ((status == 0)); then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    grep -E '^(FAILED|ERROR) ' <<<"$log" | sed "s/^/  run $i: /"
  fi
  echo "run $i/$runs: $summary (load $(cut -d' ' -f1 /proc/loadavg))"
done
echo "stress: $passed passed, $failed failed of $runs runs"
total_failed=$failed

for pid in "${burner_pids[@]}"; do kill "$pid" 2>/dev/null; done
burner_pids=()
if ((fresh)); then
  clone=$(mktemp -d /tmp/glm53-stress-clone-XXXXXX)
  git clone -q . "$clone/repo" && git -C "$clone/repo" checkout -q "$(git rev-parse HEAD)"
  echo "fresh clone of $(git rev-parse --short HEAD) in $clone/repo (uncommitted changes are not in it)"
  clean=0
  for i in 1 2; do
    log=$(cd "$clone/repo" && PYTHONPATH=$PWD python -m pytest -q -p no:randomly -p no:cacheprovider 2>&1)
    status=$?
    if ((status == 0)); then clean=$((clean + 1)); else total_failed=$((total_failed + 1)); fi
    grep -E '^(FAILED|ERROR) ' <<<"$log" | sed "s/^/  suite run $i: /"
    echo "suite run $i/2 on the fresh clone: $(tail -n 1 <<<"$log")"
  done
  echo "fresh clone: $clean of 2 whole-suite runs passed"
fi
((total_failed == 0))
