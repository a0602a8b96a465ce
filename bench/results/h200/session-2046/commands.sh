. build-gpu/lib.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $O/smi.txt 2>&1
D="--no-peer --device NVIDIA --reps 10"
L="--ops layernorm_bwd,rmsnorm_bwd --shape 65536x1024,16384x4096,8192x16384"
for round in 1 2; do
  for v in default 4u; do
    if [ $v = default ]; then
      sec ln-$v-bf16-$round 90 $B/rumus-bench $L $D --dtype bf16
    else
      sec ln-$v-bf16-$round 90 env RUMUS_LN_BLK=$v $B/rumus-bench $L $D --dtype bf16
    fi
  done
done
sec ln-f16 90 $B/rumus-bench $L $D --dtype f16
sec ln-f32 90 $B/rumus-bench $L $D --dtype f32
pack 1
sec chk-layernorm 300 env CK_FORK=no RUMUS_DEVICE=NVIDIA $B/tests/check_layernorm
pack 1
sec chk-pool 300 env CK_FORK=no RUMUS_DEVICE=NVIDIA $B/tests/check_pool
sec pool 120 $B/rumus-bench --ops maxpool2d_fwd,maxpool2d_bwd --device NVIDIA --no-peer --reps 10
pack 1
