. build-gpu/lib.sh
AVG="--ops avgpool2d_fwd,avgpool2d_bwd --shape 128x512x28/k3s1p1,64x64x112/k3s1p1,64x256x56/k3s2p1,64x256x112"
sec avg_torch 120 python3 bench/compare_torch.py $B/rumus-bench --reps 10 --warmup 2 --out $O/avg -- $AVG --no-peer --device NVIDIA
sec avg_quads 60 env RUMUS_AVGPOOL_BAND=0 $B/rumus-bench --reps 10 --warmup 2 $AVG --no-peer --device NVIDIA
sec avg_ls128 60 env RUMUS_POOL_LS=128 $B/rumus-bench --reps 10 --warmup 2 $AVG --no-peer --device NVIDIA
pack 5
sec chk 150 env CHECK_INFO=0 CHECK_SPLIT=1 CHECK_ONLY=check_pool sh scripts/check-device.sh $B $O/chk NVIDIA
pack 5
