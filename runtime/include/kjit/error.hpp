// The one exception type kjit throws: a code, a message that names the bad value and the rule,
// and (for compile failures) the full NVRTC log.
#pragma once

#include <stdexcept>
#include <string>

namespace kjit {

enum class Errc {
  InvalidArgument,  // a caller's value breaks a documented rule
  NoDriver,         // libcuda.so.1 could not be loaded or initialized
  NoDevice,         // a driver is there but no usable device (or KJIT_DEVICE out of range)
  Cuda,             // a CUDA driver call failed
  Nvrtc,            // NVRTC itself failed (not a compile error in the source)
  Compile,          // the template did not compile; log() holds the NVRTC log
  Cublas,           // a cuBLASLt call failed
  Unsupported,      // valid request the device/toolkit cannot serve (arch, cluster size, ...)
  CaptureCompile,   // a compile would be needed while the stream is being captured into a graph
  NotFound,         // unknown template, op, or entry
  Io,               // a file the caller named could not be read or written
};

const char* errc_name(Errc c);

class Error : public std::runtime_error {
 public:
  Error(Errc code, const std::string& message, std::string log = {})
      : std::runtime_error(message), code_(code), log_(std::move(log)) {}
  // An InvalidArgument about one field of a problem, options or call ("groups", "M", "eps", "x"),
  // so that callers (kjit-precompile's manifest, the C ABI, a host app) can point at it without
  // parsing the message.
  static Error invalid(std::string field, const std::string& message) {
    Error e(Errc::InvalidArgument, message);
    e.field_ = std::move(field);
    return e;
  }
  Errc code() const noexcept { return code_; }
  const std::string& log() const noexcept { return log_; }
  const std::string& field() const noexcept { return field_; }  // empty when not about one field

 private:
  Errc code_;
  std::string log_;
  std::string field_;
};

}  // namespace kjit
