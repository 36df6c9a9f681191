// The fake driver's entry points, one per function kjit asks cuGetProcAddress for, typed as kjit
// calls them (fake_cuda.cpp builds the table from kjit's own list, so a new entry that the fake
// lacks does not compile). cuda.h's macros rename some (cuMemAlloc -> cuMemAlloc_v2) here as in
// its declarations: inside this namespace that changes nothing.
#pragma once

#include <cuda.h>

#include <cstddef>

namespace kjit_fake {

// Device, context, errors (fake_context.cpp).
CUresult cuInit(unsigned flags);
CUresult cuDriverGetVersion(int* v);
CUresult cuGetErrorName(CUresult r, const char** s);
CUresult cuGetErrorString(CUresult r, const char** s);
CUresult cuDeviceGetCount(int* n);
CUresult cuDeviceGet(CUdevice* d, int ordinal);
CUresult cuDeviceGetName(char* name, int len, CUdevice d);
CUresult cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d);
CUresult cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d);
CUresult cuDevicePrimaryCtxRelease(CUdevice d);
CUresult cuCtxGetCurrent(CUcontext* c);
CUresult cuCtxSetCurrent(CUcontext c);
CUresult cuCtxPushCurrent(CUcontext c);
CUresult cuCtxPopCurrent(CUcontext* c);
CUresult cuCtxSynchronize();
CUresult cuCtxGetExecAffinity(CUexecAffinityParam* p, CUexecAffinityType t);

// Modules, functions, launches (fake_launch.cpp).
CUresult cuModuleLoadData(CUmodule* m, const void* image);
CUresult cuModuleUnload(CUmodule m);
CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name);
CUresult cuFuncSetAttribute(CUfunction fn, CUfunction_attribute a, int v);
CUresult cuFuncGetAttribute(int* v, CUfunction_attribute a, CUfunction fn);
CUresult cuFuncGetParamInfo(CUfunction fn, size_t i, size_t* offset, size_t* size);
CUresult cuFuncGetParamCount(CUfunction fn, size_t* n);
CUresult cuFuncGetName(const char** name, CUfunction fn);
CUresult cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** params, void** extra);
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned smem, CUstream s, void** params,
                        void** extra);
CUresult cuOccupancyMaxActiveClusters(int* n, CUfunction fn, const CUlaunchConfig* c);
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* n, CUfunction fn, int threads,
                                                     size_t smem);

// Memory (fake_memory.cpp).
CUresult cuMemAlloc(CUdeviceptr* p, size_t bytes);
CUresult cuMemFree(CUdeviceptr p);
CUresult cuMemcpyHtoD(CUdeviceptr d, const void* h, size_t n);
CUresult cuMemcpyDtoH(void* h, CUdeviceptr d, size_t n);
CUresult cuMemcpyDtoD(CUdeviceptr d, CUdeviceptr s, size_t n);
CUresult cuMemsetD8(CUdeviceptr d, unsigned char v, size_t n);
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s);
CUresult cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, CUstream s);
CUresult cuMemcpyHtoDAsync(CUdeviceptr d, const void* h, size_t n, CUstream s);
CUresult cuMemcpyDtoHAsync(void* h, CUdeviceptr d, size_t n, CUstream s);
CUresult cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st);

// Streams, captures, graphs, events (fake_streams.cpp).
CUresult cuStreamCreate(CUstream* s, unsigned flags);
CUresult cuStreamDestroy(CUstream s);
CUresult cuStreamSynchronize(CUstream s);
CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus* out);
CUresult cuStreamGetCtx(CUstream s, CUcontext* c);
CUresult cuStreamBeginCapture(CUstream s, CUstreamCaptureMode mode);
CUresult cuStreamEndCapture(CUstream s, CUgraph* g);
CUresult cuGraphInstantiateWithFlags(CUgraphExec* e, CUgraph g, unsigned long long flags);
CUresult cuGraphLaunch(CUgraphExec e, CUstream s);
CUresult cuGraphDestroy(CUgraph g);
CUresult cuGraphExecDestroy(CUgraphExec e);
CUresult cuGraphGetNodes(CUgraph g, CUgraphNode* nodes, size_t* n);
CUresult cuGraphNodeGetType(CUgraphNode n, CUgraphNodeType* t);
CUresult cuGraphKernelNodeGetParams(CUgraphNode n, CUDA_KERNEL_NODE_PARAMS_v2* p);
CUresult cuEventCreate(CUevent* e, unsigned flags);
CUresult cuEventRecord(CUevent e, CUstream s);
CUresult cuEventSynchronize(CUevent e);
CUresult cuEventElapsedTime(float* ms, CUevent a, CUevent b);
CUresult cuEventDestroy(CUevent e);

}  // namespace kjit_fake
