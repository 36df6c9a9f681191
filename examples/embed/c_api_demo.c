/* c_api_demo: kjit's C ABI (kjit/c_api.h, libkjit_c.so through kjit::kjit_c) from plain C, as a
 * ctypes or other FFI caller uses it. It prepares the GroupNorm+SiLU seed problem (compile and
 * load ahead; the process-wide runtime is created on first use) and prints the chosen config.
 * Without a GPU it says so and exits 0. docs/API.md quotes the region between the markers. */
#include <kjit/c_api.h>
#include <stdio.h>

int main(void) {
  printf("c_api_demo: kjit %s\n", kjit_version());
  /* [c_api] */
  char config[256];
  int rc = kjit_group_norm_prepare("f32", "nchw", /*n=*/8, /*c=*/256, /*s=*/24 * 24,
                                   /*groups=*/32, KJIT_ACTIVATION_SILU, /*affine=*/1,
                                   /*autotune=*/0, /*config=*/NULL, config, (int64_t)sizeof config);
  if (rc != KJIT_OK) {
    printf("c_api_demo: kjit_group_norm_prepare returned %d: %s\n", rc, kjit_last_error());
  } else {
    printf("c_api_demo: GroupNorm 8x256x24x24 G=32 f32 prepared: %s\n", config);
  }
  /* [/c_api] */
  if (rc == KJIT_ERR_NO_DRIVER || rc == KJIT_ERR_NO_DEVICE) { /* no GPU here */
    printf("c_api_demo: no GPU: nothing to run\n");
    return 0;
  }
  return rc == 0 ? 0 : 1;
}
