#!/bin/sh
# mpi-train.sh - rumus-train --mpi (tools/train/dist.c) on 2 MPI ranks
# against one process on the same global batch:
#   1. a few steps of the MLP (batch 128, 64 rows a rank) give the same
#      weights within 3e-5 (tests/st-compare; measured on PoCL: 2.5e-7
#      after 20 steps, 3.5e-6 after 8 steps of batch 75, while summing
#      the ranks' gradients instead of averaging them is 1e-3 off: AdamW
#      hides the factor but for its eps) and the same test accuracy;
#   2. the same with a batch of 75 (shards of 37 and 38 rows) and with a
#      batch of 1 (one rank steps on a dummy row with weight 0);
#   3. a rank that fails during setup (rank 1 given a bad device), before
#      a step's gradient exchange, or after it, makes both ranks exit with
#      status 1 and a message, promptly (each run under a 60 s timeout;
#      300 s with AddressSanitizer).
# Skipped (77) only when rumus-train was built without MPI.  Needs
# Fashion-MNIST (as tests/check_train does) and mpirun.
set -u
train=./rumus-train
cmp=./tests/st-compare
if $train --help | grep -q 'built without MPI'; then
  echo "SKIP: rumus-train was built without MPI"
  exit 77
fi
command -v mpirun > /dev/null 2>&1 || { echo "FAIL: no mpirun on PATH"; exit 1; }

# Open MPI in a container, possibly as root: the shared-memory transport
# only (one node; no single-copy mechanism, which ptrace rules may
# forbid), no binding (PoCL's threads may use every core), no ssh needed.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_hwloc_base_binding_policy=none OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_plm_rsh_agent=false
unset RUMUS_TRAIN_FAULT_STEP
limit=60
if [ -n "${ASAN_OPTIONS:-}" ]; then
  # The AddressSanitizer build (scripts/dev.sh): LeakSanitizer needs whole
  # stacks to match tests/lsan.supp's Open MPI entries (see there), which
  # makes every malloc slow: longer limits, and the batch-128 comparison
  # alone besides the failures.
  ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0"
  export ASAN_OPTIONS
  limit=300
  asan=1
fi
mpi="timeout $limit mpirun --oversubscribe"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

# run NAME ARGS...: one process, then 2 ranks; compares weights and accuracy.
run() {
  name=$1
  shift
  timeout $limit $train --quiet "$@" --save "$tmp/$name-1.st" > "$tmp/$name-1.out" 2>&1 ||
    { cat "$tmp/$name-1.out"; echo "FAIL: $name: 1 process"; fail=1; return; }
  $mpi -np 2 $train --quiet --mpi "$@" --save "$tmp/$name-2.st" > "$tmp/$name-2.out" 2>&1 ||
    { cat "$tmp/$name-2.out"; echo "FAIL: $name: 2 ranks"; fail=1; return; }
  acc1=$(grep 'final test accuracy' "$tmp/$name-1.out")
  acc2=$(grep 'final test accuracy' "$tmp/$name-2.out")
  echo "$name: 1 process: $acc1"
  echo "$name: 2 ranks:   $acc2"
  [ -n "$acc1" ] && [ "$acc1" = "$acc2" ] || { echo "FAIL: $name: test accuracies differ"; fail=1; }
  grep -q 'the 2 ranks hold the same parameters' "$tmp/$name-2.out" ||
    { cat "$tmp/$name-2.out"; echo "FAIL: $name: the ranks' replicas differ"; fail=1; }
  printf '%s: ' "$name"
  $cmp "$tmp/$name-1.st" "$tmp/$name-2.st" 3e-5 0 || { echo "FAIL: $name: weights differ"; fail=1; }
}

run batch128 --max-steps 20
if [ -z "${asan:-}" ]; then
  run batch75 --batch-size 75 --max-steps 8
  run batch1 --batch-size 1 --max-steps 6
fi

# expect_failure NAME PATTERN MPIRUN-ARGS...: the job must exit with
# status 1 (the ranks' own; not a timeout, a crash or a sanitizer's
# abort) within the time limit, with PATTERN in its output.
expect_failure() {
  name=$1
  pattern=$2
  shift 2
  t0=$(date +%s)
  $mpi "$@" > "$tmp/$name.out" 2>&1
  rc=$?
  echo "$name: exit status $rc after $(($(date +%s) - t0)) s"
  sed 's/^/    /' "$tmp/$name.out" | grep 'rumus-train' | head -8
  if [ "$rc" -ne 1 ]; then
    echo "FAIL: $name: expected a prompt failure"
    fail=1
  fi
  grep -q "$pattern" "$tmp/$name.out" || { echo "FAIL: $name: no '$pattern'"; fail=1; }
}

args="--quiet --mpi --max-steps 5"
expect_failure bad-device "stopping: rank 1 failed during setup" \
  -np 1 $train $args : -np 1 $train $args --device no-such-device
expect_failure fault-before "stopped, rank 1 failed" \
  -np 1 $train $args : -np 1 env RUMUS_TRAIN_FAULT_STEP=3 $train $args
expect_failure fault-after "stopped, rank 0 failed" \
  -np 1 env RUMUS_TRAIN_FAULT_STEP=3:after $train $args : -np 1 $train $args

exit $fail
