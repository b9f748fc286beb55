/*
 * inspector_cuda.c — a stand-in for the five CUDA calls NVIDIA's Inspector
 * profiler makes, so that it runs in a host-memory weft job on a machine
 * without a GPU (nvidia_inspector_plugin.sh).
 *
 * The Inspector labels its output with the rank's GPU: it asks the CUDA
 * runtime for the current device (cudaGetDevice) and the driver, which it
 * opens as "libcuda.so", for that device's UUID (cuDeviceGet,
 * cuDeviceGetUuid, cuGetErrorString). Without a driver those fail and it
 * turns itself off. Built as libcuda.so and preloaded ahead of CUDA's
 * runtime, this answers: device 0, whose UUID is "weft-host" and the
 * process id (each rank its own, as each would have its own GPU; the
 * Prometheus file is named after it). weft itself opens libcuda.so.1,
 * never this. C11 and libc only; CUDA's types are spelled out here.
 */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef struct {
  char bytes[16];
} stand_in_uuid;

enum { SUCCESS = 0, INVALID_DEVICE = 101 };  // cudaSuccess / CUDA_SUCCESS, CUDA_ERROR_INVALID_DEVICE

EXPORT int cudaGetDevice(int *device) {
  *device = 0;
  return SUCCESS;
}

EXPORT const char *cudaGetErrorString(int error) { return error == SUCCESS ? "no error" : "stand-in CUDA error"; }

EXPORT int cuGetErrorString(int error, const char **text) {
  *text = cudaGetErrorString(error);
  return SUCCESS;
}

EXPORT int cuDeviceGet(int *device, int ordinal) {
  if (ordinal != 0) return INVALID_DEVICE;
  *device = 0;
  return SUCCESS;
}

EXPORT int cuDeviceGetUuid(stand_in_uuid *uuid, int device) {
  if (device != 0) return INVALID_DEVICE;
  uint32_t pid = (uint32_t)getpid();
  memset(uuid->bytes, 0, sizeof(uuid->bytes));
  memcpy(uuid->bytes, "weft-host", 9);
  memcpy(uuid->bytes + 12, &pid, sizeof(pid));
  return SUCCESS;
}
