/* Sizes and durations as written in the config file.
 *
 * A size is a number (decimals allowed) with B, KiB, MiB, GiB, TiB (binary),
 * KB, MB, GB, TB (decimal), no unit (bytes), or a percentage of the card's
 * capacity. A percentage stays unresolved until a capacity is known, so one
 * config serves cards of different sizes. Durations take ms, s or min. */
#ifndef VS_TENANT_UNITS_H
#define VS_TENANT_UNITS_H
#include <stdint.h>

/* Percentages are kept in parts per million: 12.5% = 125000. */
#define VS_PPM_100 1000000u

typedef struct vs_size {
  uint64_t bytes;   /* when !is_pct */
  uint32_t ppm;     /* when is_pct: share of the capacity, 0..VS_PPM_100 */
  int is_pct;
} vs_size;

/* The largest size and duration a config may write. A size above 1 EiB or
 * a duration above 365 days is a typo, and refusing them keeps every sum
 * of sizes, and every deadline (a clock reading plus a duration, in
 * nanoseconds), within 64 bits. */
#define VS_SIZE_MAX (1ull << 60)
#define VS_DURATION_MAX_MS (365ull * 24 * 3600 * 1000)

/* 0 on success; -1 on a malformed text, -2 on a well-formed one above
 * VS_SIZE_MAX or VS_DURATION_MAX_MS (or past 64 bits); nothing written
 * on an error. */
int vs_parse_size(const char *text, vs_size *out);
int vs_parse_duration_ms(const char *text, uint64_t *ms);
/* A percentage only ("90%"), into ppm of 100%. */
int vs_parse_percent(const char *text, uint32_t *ppm);

/* The size in bytes on a card of that capacity (percentages round down). */
uint64_t vs_size_resolve(vs_size s, uint64_t capacity);
/* "16.00 GiB" or "25%" into buf (>= 32 bytes). */
const char *vs_size_str(vs_size s, char *buf, unsigned len);
#define VS_NO_LIMIT UINT64_MAX   /* a limit that is none */

/* "none" for VS_NO_LIMIT (UINT64_MAX), else "16.00 GiB" (vs_fmt_bytes),
 * into buf (>= 32 bytes); returns buf. */
const char *vs_bytes_or_none(uint64_t bytes, char *buf, unsigned len);

/* Exact products of 64-bit sizes (gcc and clang, 64-bit targets). */
__extension__ typedef unsigned __int128 vs_u128;

/* a + b, saturating at UINT64_MAX: limits use UINT64_MAX as "none". */
static inline uint64_t vs_sat_add(uint64_t a, uint64_t b) {
  return a + b < a ? UINT64_MAX : a + b;
}
/* a - b, 0 where b is larger: a total less a part that may be stale. */
static inline uint64_t vs_sat_sub(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }
#endif
