. build-gpu/lib.sh
CHECK_INFO=0 CHECK_SPLIT=1 CHECK_ONLY="check_pool check_gemm check_attention" sec chk 500 sh scripts/check-device.sh $B $O/chk NVIDIA
pack 2
