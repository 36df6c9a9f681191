#include "host_env.hpp"

#include <dlfcn.h>

namespace kjit_host {
namespace {

FakeDriver g_fake;

template <class Fn>
bool find(void* lib, const char* name, Fn* out, std::string* why) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!*out) *why = std::string("the fake driver has no ") + name;
  return *out != nullptr;
}

}  // namespace

bool load_fake_driver(const char* path, std::string* why) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    const char* e = dlerror();
    *why = std::string("dlopen ") + path + ": " + (e ? e : "?");
    return false;
  }
  if (!find(lib, "kjit_fake_launches", &g_fake.launches, why) ||
      !find(lib, "kjit_fake_last_launch", &g_fake.last_launch, why) ||
      !find(lib, "kjit_fake_module_loads", &g_fake.module_loads, why) ||
      !find(lib, "kjit_fake_live_allocations", &g_fake.live_allocations, why) ||
      !find(lib, "kjit_fake_graph_launches", &g_fake.graph_launches, why) ||
      !find(lib, "kjit_fake_live_modules", &g_fake.live_modules, why) ||
      !find(lib, "kjit_fake_fail", &g_fake.fail, why))
    return false;
  if (!kjit::gpu_available(why)) return false;
  std::string name;
  try {
    name = runtime().props().name;
  } catch (const kjit::Error& e) {  // a runtime that cannot start: a reason, not a crash
    *why = std::string("kjit::Runtime on the fake driver: ") + e.what();
    return false;
  }
  if (name.find("kjit fake driver") != std::string::npos) return true;
  *why = "kjit loaded another driver, whose device is " + name;
  return false;
}

const FakeDriver& fake() {
  return g_fake;
}

kjit::Runtime& runtime() {
  static kjit::Runtime rt;
  return rt;
}

}  // namespace kjit_host
