/* The C floor of benchmark part 1: cuLaunchKernel in a tight loop, what a launch costs the host with nothing
 * between the caller and the driver.
 *
 * benchmarks/launch_floor.py builds this with the system's C compiler when part 1 runs and loads it with ctypes.
 * No CUDA headers are needed: the few driver types are declared here, and cuLaunchKernel is found in
 * libcuda.so.1 (already loaded by cupy and cuda.core in that process) with dlopen. The caller hands over a
 * CUfunction of the current context and the kernel parameters, prepared once, as the driver takes them: an
 * array of pointers, one to each parameter's bytes.
 */
#include <dlfcn.h>
#include <stddef.h>

typedef int CUresult; /* CUDA_SUCCESS is 0 */
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef CUresult (*launch_kernel_fn)(CUfunction f, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                                     unsigned block_x, unsigned block_y, unsigned block_z, unsigned shared_bytes,
                                     CUstream stream, void **params, void **extra);

static launch_kernel_fn launch_kernel;

/* Find cuLaunchKernel: 0 on success, -1 without the driver library, -2 without the symbol. */
int floor_init(void)
{
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (driver == NULL)
        return -1;
    launch_kernel = (launch_kernel_fn)dlsym(driver, "cuLaunchKernel");
    return launch_kernel == NULL ? -2 : 0;
}

/* n launches of f, one block of one thread, on the default stream: 0, or the first CUresult that is not. */
int floor_launch(CUfunction f, void **params, long n)
{
    for (long i = 0; i < n; i++) {
        CUresult status = launch_kernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL);
        if (status != 0)
            return status;
    }
    return 0;
}
