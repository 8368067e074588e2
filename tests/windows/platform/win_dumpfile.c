/* Dump files on Windows (src/explain/dump_file.c over the platform layer):
 * a dump read from the sample, written into a fresh dump_dir (made with its
 * parents, the file created exclusively, flushed), read back equal; a
 * second write in the same millisecond gets its own name; a dump_dir that
 * is a file is refused.
 *   win_dumpfile.exe SAMPLE.json */
#include <windows.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump_file.h"
#include "dump_json.h"
#include "dump_model.h"

static int g_failed;
static void check(int ok, const char *what, const char *detail) {
  printf("%s: %s%s%s\n", ok ? "ok" : "FAILED", what, detail && *detail ? ": " : "", detail ? detail : "");
  if (!ok) g_failed = 1;
}

/* The dump as JSON text (via a temporary file of the platform's own writer). */
static char *as_json(const vs_dump *d, const char *dir) {
  char path[MAX_PATH + 32], err[512];
  static char text[2][1 << 18];
  static int which;
  char *out = text[which++ & 1];
  if (vs_dump_write_file(d, dir, -1, path, sizeof path, err, sizeof err)) return NULL;
  FILE *f = fopen(path, "rb");
  size_t n = f ? fread(out, 1, (1 << 18) - 1, f) : 0;
  if (f) fclose(f);
  out[n] = 0;
  return out;
}

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  char sample[MAX_PATH];
  snprintf(sample, sizeof sample, "%s%s", argv[1][0] == '/' ? "Z:" : "", argv[1]);
  for (char *s = sample; *s; s++)
    if (*s == '/') *s = '\\';
  char tmp[MAX_PATH], dir[MAX_PATH + 64], err[512], path[MAX_PATH + 64], path2[MAX_PATH + 64];
  GetTempPathA(sizeof tmp, tmp);
  snprintf(dir, sizeof dir, "%svramshim-dumptest-%lu\\deeper\\dumps", tmp, (unsigned long)GetCurrentProcessId());
  vs_dump d, back;
  int r = vs_dump_read_file(sample, &d, err, sizeof err);
  check(r == 0, "the sample dump reads", err);
  if (r) return 1;
  r = vs_dump_write_file(&d, dir, 0, path, sizeof path, err, sizeof err);
  check(r == 0, "written into a new dump_dir (parents made)", r ? err : path);
  r = vs_dump_write_file(&d, dir, 0, path2, sizeof path2, err, sizeof err);
  check(r == 0 && strcmp(path, path2), "a second dump of the same moment gets its own name", r ? err : path2);
  r = vs_dump_read_file(path, &back, err, sizeof err);
  check(r == 0, "the written file reads back", err);
  const char *a = as_json(&d, dir), *b = r == 0 ? as_json(&back, dir) : NULL;
  check(a && b && !strcmp(a, b), "read back, it is the same dump", NULL);
  char file_as_dir[MAX_PATH + 16];
  snprintf(file_as_dir, sizeof file_as_dir, "%s", path);
  r = vs_dump_write_file(&d, file_as_dir, 0, path2, sizeof path2, err, sizeof err);
  check(r != 0, "a dump_dir that is a file is refused", err);
  vs_dump_free(&d);
  if (b) vs_dump_free(&back);
  char cmd[MAX_PATH + 64];
  snprintf(cmd, sizeof cmd, "rmdir /s /q \"%svramshim-dumptest-%lu\" >nul 2>nul", tmp, (unsigned long)GetCurrentProcessId());
  system(cmd);
  printf("%s\n", g_failed ? "FAILED" : "passed");
  return g_failed;
}
