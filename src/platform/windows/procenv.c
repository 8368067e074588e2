#include "procenv.h"

#include <stdlib.h>
#include <string.h>

#include "wutil.h" /* windows.h, which shellapi.h needs first */

#include <shellapi.h>

/* UTF-16 to a malloc'd UTF-8 string, or NULL. */
static char *utf8_dup(const wchar_t *w) {
  int n = WideCharToMultiByte(CP_UTF8, 0, w, -1, NULL, 0, NULL, NULL);
  if (n <= 0) return NULL;
  char *s = malloc((size_t)n);
  if (s && !WideCharToMultiByte(CP_UTF8, 0, w, -1, s, n, NULL, NULL)) {
    free(s);
    return NULL;
  }
  return s;
}

void vs_plat_utf8_args(int *argc, char ***argv) {
  int n = 0;
  wchar_t **w = CommandLineToArgvW(GetCommandLineW(), &n);
  if (!w) return;
  char **out = calloc((size_t)n + 1, sizeof *out);
  for (int i = 0; out && i < n; i++) {
    if (!(out[i] = utf8_dup(w[i]))) {
      for (int j = 0; j < i; j++) free(out[j]);
      free(out);
      out = NULL;
    }
  }
  LocalFree(w);
  if (!out) return;
  *argc = n;
  *argv = out;
}

/* The values read so far, one entry per name. An entry's value is replaced
 * (never freed) when the variable changed, so every pointer handed out
 * stays valid: the contract above. Variables are read a handful of times
 * at start, so a list is enough. */
typedef struct env_entry {
  struct env_entry *next;
  char *value;
  char name[];
} env_entry;

static SRWLOCK g_env_lock = SRWLOCK_INIT;
static env_entry *g_env;

const char *vs_plat_getenv(const char *name) {
  wchar_t wname[256];
  if (vs_win_wide(name, wname, 256)) return NULL;
  DWORD need = GetEnvironmentVariableW(wname, NULL, 0);
  if (need == 0) return NULL; /* unset (an empty value needs 1) */
  wchar_t *w = malloc(need * sizeof *w);
  if (!w) return NULL;
  DWORD got = GetEnvironmentVariableW(wname, w, need);
  char *v = got < need ? utf8_dup(w) : NULL;
  free(w);
  if (!v) return NULL;
  AcquireSRWLockExclusive(&g_env_lock);
  env_entry *e = g_env;
  while (e && strcmp(e->name, name)) e = e->next;
  if (!e && (e = malloc(sizeof *e + strlen(name) + 1))) {
    strcpy(e->name, name);
    e->value = NULL;
    e->next = g_env;
    g_env = e;
  }
  const char *out = v;
  if (!e) {
    out = v; /* no entry: this string is the caller's for good (a leak of one) */
  } else if (e->value && !strcmp(e->value, v)) {
    free(v);
    out = e->value;
  } else {
    e->value = v; /* the old value stays allocated for its holders */
  }
  ReleaseSRWLockExclusive(&g_env_lock);
  return out;
}
