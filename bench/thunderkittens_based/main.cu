// Timing harness for ThunderKittens' own Based kernel (kernels/based/linear_attn.cu,
// appended to its kernel part by build.sh): B16 H16, L 1k / 4k / 8k, F 16, DV 64,
// 50 launches a round, 7 rounds, CUDA events; writes the L 1024 inputs and
// output (q = k, bf16) for check.py to compare with FLA's parallel_based.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
int main(int argc, char **argv) {
    int B = 16, H = 16;
    for (int N : {1024, 4096, 8192}) {
        size_t nqk = (size_t)B*H*N*16, nvo = (size_t)B*H*N*64;
        std::vector<bf16> hq(nqk), hv(nvo);
        srand(1);
        for (auto &x : hq) x = __float2bfloat16((rand() / (float)RAND_MAX - 0.5f) / 4);
        for (auto &x : hv) x = __float2bfloat16((rand() / (float)RAND_MAX - 0.5f) / 8);
        bf16 *q, *k, *v, *o, *a2, *a1, *a0;
        cudaMalloc(&q, nqk*2); cudaMalloc(&k, nqk*2); cudaMalloc(&v, nvo*2); cudaMalloc(&o, nvo*2);
        cudaMalloc(&a2, (size_t)B*H*256*64*2); cudaMalloc(&a1, (size_t)B*H*16*64*2); cudaMalloc(&a0, (size_t)B*H*64*2);
        cudaMemcpy(q, hq.data(), nqk*2, cudaMemcpyHostToDevice);
        cudaMemcpy(k, hq.data(), nqk*2, cudaMemcpyHostToDevice);
        cudaMemcpy(v, hv.data(), nvo*2, cudaMemcpyHostToDevice);
        based_globals g = based_init(q, k, v, o, a2, a1, a0, B, H, N);
        unsigned long mem = 98000;
        cudaFuncSetAttribute(based_linear_attention, cudaFuncAttributeMaxDynamicSharedMemorySize, mem);
        dim3 grid(H, B);
        cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
        for (int i = 0; i < 20; i++) based_linear_attention<<<grid, NUM_THREADS, mem>>>(g);
        cudaDeviceSynchronize();
        std::vector<float> ts;
        for (int r = 0; r < 7; r++) {
            cudaEventRecord(e0);
            for (int i = 0; i < 50; i++) based_linear_attention<<<grid, NUM_THREADS, mem>>>(g);
            cudaEventRecord(e1); cudaEventSynchronize(e1);
            float ms; cudaEventElapsedTime(&ms, e0, e1); ts.push_back(ms / 50);
        }
        cudaError_t err = cudaGetLastError();
        std::sort(ts.begin(), ts.end());
        // o checksum to show it ran
        std::vector<bf16> ho(nvo); cudaMemcpy(ho.data(), o, nvo*2, cudaMemcpyDeviceToHost);
        if (N == 1024) {
            FILE *f = fopen(argc > 1 ? argv[1] : "tk_based_l1024.bin", "wb");
            fwrite(hq.data(), 2, nqk, f); fwrite(hv.data(), 2, nvo, f); fwrite(ho.data(), 2, nvo, f); fclose(f);
        }
        double s = 0; for (size_t i = 0; i < nvo; i += 997) s += fabs(__bfloat162float(ho[i]));
        printf("TK based B%d H%d L%d: median %.4f ms (min %.4f max %.4f) err=%s checksum %.4f\n",
               B, H, N, ts[3], ts[0], ts[6], cudaGetErrorString(err), s);
        cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(o); cudaFree(a2); cudaFree(a1); cudaFree(a0);
    }
    return 0;
}
