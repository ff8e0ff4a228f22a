/* machine.h — what kevo knows of the machine it runs on: the ceilings that
 * rooflines are computed with (the lent 2 x H200 machine, measured and
 * documented in the project's GPU notes), and its NVLS policy. */
#ifndef KEVO_MACHINE_H
#define KEVO_MACHINE_H

/* NVLink between two H200s: 18 lanes x 26.56 GB/s, per direction, and each
 * GPU can send and receive at this rate at once. */
#define KV_LINK_BYTES_PER_S 478e9
/* Dense bf16 tensor-core work on one H200. */
#define KV_BF16_FLOPS_PER_S 790e12
/* Local HBM3e read + write bandwidth of one H200 (device-to-device copy: 1976
 * GB/s each way, 3952 GB/s counting both). */
#define KV_HBM_BYTES_PER_S 3952e9
/* The floor: physical ceilings no honest kernel can beat, for the verdict
 * `implausible` (docs/evaluator.md, "The floor"). A time below the cost
 * model at these ceilings, less KV_FLOOR_MARGIN, was gamed or the cost
 * model is wrong. The x2 machine is sometimes 2 x H100 (same link, lower
 * HBM and compute peaks): the H200's peaks are the lenient side.
 *   link: the measured practical ceiling per direction with both directions
 *     loaded, 376-386 GB/s (bench/link_overlap; the GPU notes); a copy
 *     engine alone reaches 397 GB/s, below 386 / (1 - margin) = 429 GB/s;
 *   HBM: the H200's spec, 4.8 TB/s;
 *   bf16: the H200's dense spec, 989 TFLOP/s. */
#define KV_FLOOR_LINK_BYTES_PER_S 386e9
#define KV_FLOOR_HBM_BYTES_PER_S 4.8e12
#define KV_FLOOR_BF16_FLOPS_PER_S 989e12
/* for noise: the floor is this fraction below the cost model at the ceilings */
#define KV_FLOOR_MARGIN 0.10

/* L2 of one H200 (input sets are rotated to exceed 3x this). */
#define KV_L2_BYTES (60u << 20)

/* The machine's NVLS policy: 0 when NCCL_NVLS_ENABLE=0 is set (the lent
 * machines), 1 otherwise. The evaluator's guard and the worker's trap both
 * ask it. */
int kv_machine_allows_nvls(void);

#endif
