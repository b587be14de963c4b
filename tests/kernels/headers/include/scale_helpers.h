// Helpers for scaled_copy.cu, found only through -I.
#pragma once
#ifndef UNROLL
#define UNROLL 1
#endif
__device__ __forceinline__ float scaled(float v, float s) { return v * s; }
