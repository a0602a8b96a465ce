. build-gpu/lib.sh
D="--no-peer --device NVIDIA"
XE="--ops xent_fwd_bwd --shape 128x10,4096x1024,65536x1024,16384x8192,16384x65 --reps 10"
sec xchk 120 $B/rumus-bench $XE --device NVIDIA
sec xchk16 120 $B/rumus-bench $XE --dtype f16 --device NVIDIA
for r in 1 2; do for one in 1 0; do for t in f32 f16 bf16; do
  sec x-one$one-$t-$r 90 env RUMUS_XENT_ONE=$one $B/rumus-bench $XE --dtype $t $D
done; done; done
pack 4
for t in check_xent check_batchnorm; do
  sec chk-$t 200 env CHECK_INFO=0 CHECK_SPLIT=1 CHECK_ONLY=$t sh scripts/check-device.sh $B $O/chk-$t NVIDIA
done
pack 4
for one in 1 0; do
  sec gpt-one$one 120 env RUMUS_XENT_ONE=$one $B/rumus-train --device NVIDIA --model gpt --preset h200 --steps 200 --data $B/data/fortunes
done
pack 4
