. build-gpu/lib.sh
D="--no-peer --device NVIDIA"
LN="--ops layernorm_fwd,layernorm_bwd,rmsnorm_fwd,rmsnorm_bwd --reps 10 $D"
sec chk-ln 300 env CHECK_INFO=0 CHECK_SPLIT=1 CHECK_ONLY=check_layernorm sh scripts/check-device.sh $B $O/chk-ln NVIDIA
pack 1
for r in 1 2; do for t in f16 bf16; do
  sec ln-new-$t-$r 120 $B/rumus-bench $LN --dtype $t
  sec ln-old-$t-$r 120 env RUMUS_KERNEL_DIR=build-gpu/cl-old $B/rumus-bench $LN --dtype $t
done; done
sec ln-new-f32 120 $B/rumus-bench $LN
sec ln-old-f32 120 env RUMUS_KERNEL_DIR=build-gpu/cl-old $B/rumus-bench $LN
pack 1
