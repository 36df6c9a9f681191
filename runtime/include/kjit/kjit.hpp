// Everything a host application needs from kjit.
#pragma once

#include "kjit/activation.hpp"
#include "kjit/compiler.hpp"
#include "kjit/cuda.hpp"
#include "kjit/dtype.hpp"
#include "kjit/error.hpp"
#include "kjit/kernel.hpp"
#include "kjit/record.hpp"
#include "kjit/runtime.hpp"
#include "kjit/spec.hpp"
#include "kjit/templates.hpp"
#include "kjit/version.hpp"
