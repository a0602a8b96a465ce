. build-gpu/lib.sh
OPTS="-cl-std=CL1.2 -DRUMUS_STORAGE=F32 -DWG=256 -DRUMUS_ALIGN4=1 -DBN_GPU=1 -DBN_VW=4 -DBN_NV=1 -DBN_FOLD_LS=64 -DBN_HOLD=16 -DBN_CHUNKS=4"
chmod +x build-gpu/ptxdump
sec ptx_t 60 build-gpu/ptxdump build-gpu/asmt t.cl "-cl-std=CL1.2"
cp $O/ptx_t.txt $O/t.ptx
sec ptx_old 60 build-gpu/ptxdump build-gpu/cl-old batchnorm.cl "$OPTS"
sec ptx_new 60 build-gpu/ptxdump build-gpu/cl-new batchnorm.cl "$OPTS"
grep -n "membar\|fence\|\.entry\|atom" $O/ptx_t.txt | head -60 > $O/t-summary.txt
for k in old new; do grep -c "membar.gl" $O/ptx_$k.txt; grep -c "membar.cta" $O/ptx_$k.txt; done > $O/membar-counts.txt
pack 1
BN="--ops batchnorm2d_fwd,batchnorm2d_bwd --shape 64x256x56,64x64x112,32x128x56,128x32x28,16x256x14 --reps 5 --warmup 1 --device NVIDIA"
for lag in 0 1 2; do for k in old new; do
sec bn-$k-lag$lag 120 env RUMUS_KERNEL_DIR=build-gpu/cl-$k RUMUS_BATCHNORM_ONE=1 RUMUS_BATCHNORM_LAG=$lag $B/rumus-bench $BN
done; done
pack 1
LG="--ops xent_fwd_bwd,sum_squares,bias_grad,batchnorm2d_fwd,batchnorm2d_bwd,channel_bias_grad --reps 10 --no-peer --device NVIDIA"
for k in old new old new; do sec lg-$k-$(date +%s) 150 env RUMUS_KERNEL_DIR=build-gpu/cl-$k $B/rumus-bench $LG; done
pack 1
sec x16 120 $B/rumus-bench --dtype f16 --ops xent_fwd_bwd,softmax_fwd,log_softmax_fwd --shape 65536x1024,8192x32000 --kernels --reps 10 --no-peer --device NVIDIA
pack 1
for t in check_batchnorm check_xent check_optim; do
sec chk-$t 200 env RUMUS_KERNEL_DIR=build-gpu/cl-new CHECK_INFO=0 CHECK_SPLIT=1 CHECK_ONLY=$t sh scripts/check-device.sh $B $O/chk-$t NVIDIA
done
pack 1
