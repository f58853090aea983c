// cuBLAS, loaded with dlopen the first time it is used, instead of linked.
//
// Why: libcublasLt.so.13 has a 94 KB static TLS segment. A library linked at
// start-up adds its TLS to every thread's stack, and civetweb (under
// prometheus-cpp's metrics exposer) creates its threads with fixed ~100 KB
// stacks, so with cuBLAS linked no metrics thread could start. A library
// loaded with dlopen gets dynamic TLS instead, allocated on first use per
// thread. The few entry points the backend uses are defined here with
// cuBLAS's own signatures and forward to the loaded library.
#include <cublas_v2.h>
#include <dlfcn.h>

#include <mutex>
#include <string>

namespace {

// cublasGemmEx is overloaded in C++, so its pointer type is spelled out.
using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                    const void*, const void*, cudaDataType, int, const void*, cudaDataType, int,
                                    const void*, void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

struct Cublas {
  void* lib = nullptr;
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  GemmExFn gemm_ex = nullptr;
  decltype(&cublasGetStatusName) status_name = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
  std::string load_error;  // dlerror() of the last attempt when nothing loaded
};

const Cublas& Library() {
  static Cublas c;
  static std::once_flag once;
  std::call_once(once, [] {
    for (const char* name : {"libcublas.so.13", "libcublas.so"}) {
      c.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (c.lib != nullptr) break;
      const char* why = dlerror();
      c.load_error = why != nullptr ? why : name;
    }
    if (c.lib == nullptr) return;
    c.create = reinterpret_cast<decltype(c.create)>(dlsym(c.lib, "cublasCreate_v2"));
    c.destroy = reinterpret_cast<decltype(c.destroy)>(dlsym(c.lib, "cublasDestroy_v2"));
    c.set_stream = reinterpret_cast<decltype(c.set_stream)>(dlsym(c.lib, "cublasSetStream_v2"));
    c.gemm_ex = reinterpret_cast<decltype(c.gemm_ex)>(dlsym(c.lib, "cublasGemmEx"));
    c.status_name = reinterpret_cast<decltype(c.status_name)>(dlsym(c.lib, "cublasGetStatusName"));
    c.status_string = reinterpret_cast<decltype(c.status_string)>(dlsym(c.lib, "cublasGetStatusString"));
  });
  return c;
}

}  // namespace

extern "C" {

cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t* handle) {
  const Cublas& c = Library();
  return c.create ? c.create(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle) {
  const Cublas& c = Library();
  return c.destroy ? c.destroy(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  const Cublas& c = Library();
  return c.set_stream ? c.set_stream(handle, stream) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const void* alpha, const void* A, cudaDataType Atype,
                                         int lda, const void* B, cudaDataType Btype, int ldb, const void* beta,
                                         void* C, cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                                         cublasGemmAlgo_t algo) {
  const Cublas& c = Library();
  if (!c.gemm_ex) return CUBLAS_STATUS_NOT_INITIALIZED;
  return c.gemm_ex(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
                   computeType, algo);
}

const char* CUBLASWINAPI cublasGetStatusName(cublasStatus_t status) {
  const Cublas& c = Library();
  return c.status_name ? c.status_name(status) : "CUBLAS_NOT_LOADED";
}

const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
  const Cublas& c = Library();
  if (c.status_string) return c.status_string(status);
  // Says why dlopen failed (the library missing, or one it needs).
  static const std::string message = "libcublas.so.13 could not be loaded: " + c.load_error;
  return message.c_str();
}

}  // extern "C"
