#pragma once

#include <cuda.h>

#include <nlohmann/json.hpp>

#include "kjit/runtime.hpp"

namespace kjit_bench {

nlohmann::json run_jit(kjit::Runtime& rt, CUstream stream);

}  // namespace kjit_bench
