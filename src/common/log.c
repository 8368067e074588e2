#include "file.h"
#include "log.h"
#include "text_escape.h"
#include "procenv.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Level and fd are plain ints read racily by design: a stale read only
 * changes whether one line is printed. */
static int g_level = VS_LOG_WARN;
static int g_fd = 2;
static int g_ready;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* A line to stderr before logging is set up (dprintf, which Windows' C
 * library lacks). */
static void early(const char *fmt, ...) {
  char line[640];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n <= 0) return;
  ssize_t w = write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
  (void)w;
}

static void parse_env(void) {
  const char *env = vs_plat_getenv("VRAMSHIM_LOG");
  if (!env || !*env) return;
  char spec[512];
  snprintf(spec, sizeof spec, "%s", env);
  char *save = NULL;
  for (char *tok = strtok_r(spec, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (!strcmp(tok, "error")) g_level = VS_LOG_ERROR;
    else if (!strcmp(tok, "warn") || !strcmp(tok, "warning")) g_level = VS_LOG_WARN;
    else if (!strcmp(tok, "info")) g_level = VS_LOG_INFO;
    else if (!strcmp(tok, "debug")) g_level = VS_LOG_DEBUG;
    else if (!strncmp(tok, "file:", 5)) {
      int fd = vs_plat_open_regular(tok + 5, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW, 0640);
      if (fd >= 0) g_fd = fd;
      else early("vramshim: cannot open log file %s (%s), logging to stderr\n", tok + 5, vs_plat_open_strerror(errno));
    } else {
      early("vramshim: unknown VRAMSHIM_LOG item '%s' ignored\n", tok);
    }
  }
}

static void init_once(void) {
  parse_env();
  g_ready = 1;
}

void vs_log_init(void) {
  pthread_once(&g_once, init_once);
}

int vs_log_enabled(vs_log_level level) {
  if (!g_ready) vs_log_init();
  return (int)level <= g_level;
}

void vs_log(vs_log_level level, const char *fmt, ...) {
  if (!vs_log_enabled(level)) return;
  /* One write() per line so lines from threads and processes don't interleave. */
  char msg[1024], line[1024];
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (m < 0) return;
  size_t mlen = (size_t)m < sizeof msg ? (size_t)m : sizeof msg - 1;
  if (mlen && msg[mlen - 1] == '\n') mlen--;
  /* One line, whatever the message carries: names and paths from outside
   * (a tenant name with a newline, say) cannot forge lines (text_escape.h). */
  int n = snprintf(line, sizeof line, "vramshim: ");
  size_t len = (size_t)n + vs_text_escape_n(msg, mlen, line + n, sizeof line - (size_t)n - 1);
  line[len++] = '\n';
  ssize_t w = write(g_fd, line, len);
  (void)w;
}

const char *vs_fmt_bytes(uint64_t bytes, char *buf, size_t len) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) {
    snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    return buf;
  }
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    u++;
  }
  snprintf(buf, len, "%.2f %s", v, units[u]);
  return buf;
}
