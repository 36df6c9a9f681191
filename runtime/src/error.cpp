#include "kjit/error.hpp"

namespace kjit {

const char* errc_name(Errc c) {
  switch (c) {
    case Errc::InvalidArgument:
      return "invalid_argument";
    case Errc::NoDriver:
      return "no_driver";
    case Errc::NoDevice:
      return "no_device";
    case Errc::Cuda:
      return "cuda";
    case Errc::Nvrtc:
      return "nvrtc";
    case Errc::Compile:
      return "compile";
    case Errc::Cublas:
      return "cublas";
    case Errc::Unsupported:
      return "unsupported";
    case Errc::CaptureCompile:
      return "capture_compile";
    case Errc::NotFound:
      return "not_found";
    case Errc::Io:
      return "io";
  }
  return "unknown";
}

}  // namespace kjit
