# sweep-lib.sh - what bench/*-sweep-h200.sh share (sourced, POSIX sh): one
# rumus-bench run per tiling of a tuning override, and PyTorch's times of
# the default run's cases.

# sweep_tilings BENCH DEVICE OUT VAR "UNSET" OPS SHAPES REPS TILING...
# Runs BENCH (rumus-bench) on the GPU variant once per TILING into
# OUT/sweep-TILING.json and .txt: "default" with every variable of UNSET
# removed from the environment (the library's choice), "tiled" with
# VAR=default, any other with VAR=TILING.
sweep_tilings() {
  _b=$1 _d=$2 _o=$3 _var=$4 _unset=$5 _ops=$6 _shapes=$7 _reps=$8
  shift 8
  for _t in "$@"; do
    echo "tiling $_t ..." >&2
    if [ "$_t" = default ]; then
      _env=env
      for _u in $_unset; do _env="$_env -u $_u"; done
    else
      _v=$_t
      [ "$_t" = tiled ] && _v=default
      _env="env $_var=$_v"
    fi
    $_env "$_b" --device "$_d" --variant gpu --ops "$_ops" --shape "$_shapes" \
      --reps "$_reps" --no-peer --no-check --json "$_o/sweep-$_t.json" \
      > "$_o/sweep-$_t.txt" 2>&1 ||
      echo "tiling $_t: rumus-bench failed (see $_o/sweep-$_t.txt)" >&2
  done
}

# sweep_torch HERE BENCH OUT REPS WHAT: where PyTorch has CUDA,
# HERE/compare_torch.py times the cases of OUT/sweep-default.json into
# OUT/torch (WHAT names the peer in the progress line).
sweep_torch() {
  if python3 -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' \
    2>/dev/null; then
    echo "$5 ..." >&2
    python3 "$1/compare_torch.py" "$2" --reps "$4" \
      --from-json "$3/sweep-default.json" --out "$3/torch" \
      > "$3/torch.txt" 2>&1 || echo "compare_torch.py failed" >&2
  fi
}
