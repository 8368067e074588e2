/* Logging for the shim and its tools.
 *
 * Every line starts with "vramshim: ". The level and destination come from
 * $VRAMSHIM_LOG, a comma-separated list: a level (error, warn, info, debug)
 * and/or "file:/path" (appended to; opened without following symlinks).
 * Default: warn, to stderr. Safe to call from any thread, and before or
 * without vs_log_init() (it initialises lazily). */
#ifndef VS_LOG_H
#define VS_LOG_H
#include <stddef.h>
#include <stdint.h>

#include "plat_types.h" /* VS_PRINTF */

typedef enum { VS_LOG_ERROR = 0, VS_LOG_WARN = 1, VS_LOG_INFO = 2, VS_LOG_DEBUG = 3 } vs_log_level;

void vs_log_init(void);                 /* (re)reads $VRAMSHIM_LOG */
int vs_log_enabled(vs_log_level level);
void vs_log(vs_log_level level, const char *fmt, ...) VS_PRINTF(2, 3);

#define VS_ERROR(...) vs_log(VS_LOG_ERROR, __VA_ARGS__)
#define VS_WARN(...) vs_log(VS_LOG_WARN, __VA_ARGS__)
#define VS_INFO(...) vs_log(VS_LOG_INFO, __VA_ARGS__)
#define VS_DEBUG(...) do { if (vs_log_enabled(VS_LOG_DEBUG)) vs_log(VS_LOG_DEBUG, __VA_ARGS__); } while (0)

/* "1.50 GiB", "512 B", "3.00 MiB": binary units, into buf (>= 32 bytes). */
const char *vs_fmt_bytes(uint64_t bytes, char *buf, size_t len);
#endif
