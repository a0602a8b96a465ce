. build-gpu/lib.sh
D="--no-peer --device NVIDIA"
sec probe-new 60 $B/rumus-bench --ops gelu_fwd,gelu_bwd,add --dtype bf16 --reps 10 $D
sec probe-ln 60 env RUMUS_KERNEL_DIR=build-gpu/cl-ln $B/rumus-bench --ops gelu_fwd,gelu_bwd,add --dtype bf16 --reps 10 $D
pack 3
sec chk 470 env CHECK_INFO=0 CHECK_SPLIT=1 CHECK_ONLY="check_elementwise check_layernorm" sh scripts/check-device.sh $B $O/chk NVIDIA
pack 3
