/* gemm.cl - placeholder */
