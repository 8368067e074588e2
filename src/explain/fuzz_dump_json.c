/* libFuzzer target: the dump reader must refuse any input cleanly. When it
 * accepts one, the writer's output must read back (round trip). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vs_dump d;
  char err[512];
  if (vs_dump_from_json((const char *)data, size, &d, err, sizeof err)) {
    if (!err[0]) abort();   /* every refusal says why */
    return 0;
  }
  size_t len;
  char *text = vs_dump_to_json(&d, &len);
  if (text) {
    vs_dump d2;
    if (vs_dump_from_json(text, len, &d2, err, sizeof err)) {
      fprintf(stderr, "round trip refused: %s\n", err);
      abort();
    }
    vs_dump_free(&d2);
    free(text);
  }
  vs_dump_free(&d);
  return 0;
}
