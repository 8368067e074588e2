/* The RMM CSV trace reader: good traces give the right dense events; every
 * malformed one is refused with its exact "file:line: reason" message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "trace_csv.h"

#define HDR "Thread,Time,Action,Pointer,Size,Stream\n"

static int read_string(const char *text, size_t len, vs_trace *t, char *err, size_t errlen) {
  FILE *f = fmemopen((void *)text, len, "r");
  assert_non_null(f);
  int rc = vs_trace_read(f, "t.csv", t, err, errlen);
  fclose(f);
  return rc;
}

static void test_good_trace(void **state) {
  (void)state;
  static const char text[] = HDR
      "0,00:00:00.000000,allocate,0x1000,100,0x0\r\n"
      "1,00:00:00.000010,allocate,0x2000,2048,0x7\r\n"
      "\r\n"
      "0,00:00:01.5,allocate failure,0x0,999999999,0x0\r\n"
      "0,00:00:02.000000,free,0x1000,100,0x0\r\n"
      "0,123:59:59.999999,allocate,4096,7,0\r\n"
      "0,00:00:03.000000,free,0x1000,7,0x0"; /* pointer reused; no final newline */
  vs_trace t;
  char err[256] = "";
  assert_int_equal(read_string(text, sizeof text - 1, &t, err, sizeof err), 0);
  assert_int_equal(t.nallocs, 3);
  assert_int_equal(t.nev, 5);
  assert_int_equal(t.nfrees, 2);
  assert_int_equal(t.failures_skipped, 1);
  assert_int_equal(t.live_at_end, 1);
  const vs_trace_event want[] = {{0, 0}, {1, 0}, {0, 1}, {2, 0}, {2, 1}};
  for (size_t i = 0; i < 5; i++) {
    assert_int_equal(t.ev[i].id, want[i].id);
    assert_int_equal(t.ev[i].free, want[i].free);
  }
  assert_int_equal(t.sizes[0], 100);
  assert_int_equal(t.sizes[1], 2048);
  assert_int_equal(t.sizes[2], 7);
  assert_int_equal(t.streams[1], 7);
  vs_trace_free(&t);
}

/* RMM logs a 0-byte allocate (a null pointer, as often as the program
 * asks) and its deallocate: skipped and counted; the pointer stays free
 * for a real allocation. Its null pointers may read "(nil)". */
static void test_zero_bytes(void **state) {
  (void)state;
  static const char text[] = HDR
      "0,00:00:00.000000,allocate,0x0,0,0x0\n"
      "0,00:00:00.000001,allocate,0x0,0,0x0\n"
      "0,00:00:00.000002,allocate,0x10,0,0x0\n"
      "0,00:00:00.000003,allocate,0x10,100,0x0\n"
      "0,00:00:00.000004,free,0x0,0,0x0\n"
      "0,00:00:00.000005,free,0x10,100,0x0\n"
      "0,00:00:00.000006,free,0x10,0,0x0\n"
      /* RMM writes the null pointer with %p: "(nil)" on glibc */
      "0,00:00:00.000007,allocate failure,(nil),4096,0\n"
      "0,00:00:00.000008,allocate,(nil),0,(nil)\n"
      "0,00:00:00.000009,free,(nil),0,0\n";
  vs_trace t;
  char err[256] = "";
  assert_int_equal(read_string(text, sizeof text - 1, &t, err, sizeof err), 0);
  assert_int_equal(t.nallocs, 1);
  assert_int_equal(t.nev, 2);
  assert_int_equal(t.sizes[0], 100);
  assert_int_equal(t.zero_skipped, 7);
  assert_int_equal(t.failures_skipped, 1);
  assert_int_equal(t.live_at_end, 0);
  vs_trace_free(&t);
}

/* RMM logs the time of day: past midnight the clock starts again, and
 * the replay's clock goes on (lines a moment out of order still keep the
 * latest time). */
static void test_midnight(void **state) {
  (void)state;
  static const char text[] = HDR
      "0,23:59:59.000000,allocate,0x10,100,0x0\n"
      "0,23:59:59.500000,allocate,0x20,100,0x0\n"
      "1,23:59:59.400000,free,0x10,100,0x0\n"
      "0,00:00:00.500000,free,0x20,100,0x0\n"
      "0,23:59:59.900000,allocate,0x10,100,0x0\n"
      "0,00:00:02.000000,free,0x10,100,0x0\n";
  vs_trace t;
  char err[256] = "";
  assert_int_equal(read_string(text, sizeof text - 1, &t, err, sizeof err), 0);
  const uint64_t s = 1000000, day = 86400 * s;
  const uint64_t want[] = {day - s, day - s / 2, day - s / 2, day + s / 2, day + s / 2, day + 2 * s};
  assert_int_equal(t.nev, 6);
  for (size_t i = 0; i < 6; i++) assert_int_equal(t.time_us[i], want[i]);
  vs_trace_free(&t);
}

static void test_header_only(void **state) {
  (void)state;
  vs_trace t;
  char err[256];
  assert_int_equal(read_string(HDR, strlen(HDR), &t, err, sizeof err), 0);
  assert_int_equal(t.nev, 0);
  assert_int_equal(t.nallocs, 0);
  vs_trace_free(&t);
}

struct bad_case {
  const char *body; /* after the header, unless no_header */
  int no_header;
  const char *message;
};

#define COLS "expected 6 columns (Thread,Time,Action,Pointer,Size,Stream), found "
static const struct bad_case bad_cases[] = {
    {"", 1, "t.csv:1: empty file: expected the header 'Thread,Time,Action,Pointer,Size,Stream'"},
    {"Thread,Time,Action,Pointer,Size\n", 1,
     "t.csv:1: missing header: the first line must be 'Thread,Time,Action,Pointer,Size,Stream'"},
    {"0,00:00:00.000000,allocate,0x10,100,0x0\n", 1,
     "t.csv:1: missing header: the first line must be 'Thread,Time,Action,Pointer,Size,Stream'"},
    {"0,00:00:00.000000,allocate,0x10,100\n", 0, "t.csv:2: " COLS "5"},
    {"0,00:00:00.000000,allocate,0x10,100,0x0,9\n", 0, "t.csv:2: " COLS "7"},
    {"0,00:00:00.000000,allocate,0x10,100,0x0\n0,00:00:00.0000,allo", 0, "t.csv:3: " COLS "3"},
    {"x,00:00:00.000000,allocate,0x10,100,0x0\n", 0, "t.csv:2: bad Thread 'x': not an unsigned number"},
    {"0,00:00,allocate,0x10,100,0x0\n", 0, "t.csv:2: bad Time '00:00': expected HH:MM:SS.ffffff"},
    {"0,00:61:00.000000,allocate,0x10,100,0x0\n", 0,
     "t.csv:2: bad Time '00:61:00.000000': expected HH:MM:SS.ffffff"},
    {"0,00:00:00.000000,allocate,0xZZ,100,0x0\n", 0, "t.csv:2: bad Pointer '0xZZ': not a number"},
    {"0,00:00:00.000000,allocate,0x1ffffffffffffffff,100,0x0\n", 0,
     "t.csv:2: bad Pointer '0x1ffffffffffffffff': out of range"},
    {"0,00:00:00.000000,allocate,0x10,12a,0x0\n", 0, "t.csv:2: bad Size '12a': not a decimal number of bytes"},
    {"0,00:00:00.000000,allocate,0x10,-5,0x0\n", 0, "t.csv:2: bad Size '-5': not a decimal number of bytes"},
    {"0,00:00:00.000000,allocate,0x10,,0x0\n", 0, "t.csv:2: bad Size '': not a decimal number of bytes"},
    {"0,00:00:00.000000,allocate,0x10,99999999999999999999999,0x0\n", 0,
     "t.csv:2: bad Size '99999999999999999999999': larger than 1125899906842624 bytes (1 PiB)"},
    {"0,00:00:00.000000,allocate,0x10,1125899906842625,0x0\n", 0,
     "t.csv:2: bad Size '1125899906842625': larger than 1125899906842624 bytes (1 PiB)"},
    {"0,00:00:00.000000,allocate,0x10,100,stream\n", 0, "t.csv:2: bad Stream 'stream': not a number"},
    {"0,00:00:00.000000,allocate,0x10,100,\x1b[2J\n", 0, "t.csv:2: bad Stream '?[2J': not a number"},
    {"0,00:00:00.000000,allocate,0x10,12345678901234567890123456789012345678901234567890,0\n", 0,
     "t.csv:2: bad Size '1234567890123456789012345678901234567890...': larger than 1125899906842624 bytes (1 PiB)"},
    {"0,00:00:00.000000,alloc,0x10,100,0x0\n", 0,
     "t.csv:2: unknown Action 'alloc' (expected allocate, allocate failure or free)"},
    {"0,00:00:00.000000,free,0x10,100,0x0\n", 0,
     "t.csv:2: free of 0x10, which is not live (never allocated, or already freed)"},
    {"0,00:00:00.000000,allocate,0x10,100,0x0\n0,00:00:00.000000,free,0x10,100,0x0\n"
     "0,00:00:00.000000,free,0x10,100,0x0\n",
     0, "t.csv:4: free of 0x10, which is not live (never allocated, or already freed)"},
    {"0,00:00:00.000000,allocate,0x10,100,0x0\n0,00:00:00.000000,allocate,0x10,200,0x0\n", 0,
     "t.csv:3: allocate of 0x10, which is still live (allocated at line 2)"},
    {"0,00:00:00.000000,allocate,0x10,100,0x0\n0,00:00:00.000000,free,0x10,512,0x0\n", 0,
     "t.csv:3: free of 0x10 with size 512, but it was allocated with size 100 at line 2"},
    /* A free of 0 bytes skips only where nothing is live at the pointer. */
    {"0,00:00:00.000000,allocate,0x10,100,0x0\n0,00:00:00.000000,free,0x10,0,0x0\n", 0,
     "t.csv:3: free of 0x10 with size 0, but it was allocated with size 100 at line 2"},
};

static void test_bad_traces(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
    char text[512];
    snprintf(text, sizeof text, "%s%s", bad_cases[i].no_header ? "" : HDR, bad_cases[i].body);
    vs_trace t;
    char err[512] = "";
    /* fmemopen may refuse a zero-length buffer; /dev/null is an empty file. */
    size_t len = strlen(text);
    FILE *f = len ? fmemopen(text, len, "r") : fopen("/dev/null", "r");
    assert_non_null(f);
    int rc = vs_trace_read(f, "t.csv", &t, err, sizeof err);
    fclose(f);
    if (rc != -1 || strcmp(err, bad_cases[i].message)) {
      print_error("case %zu:\n  got  (%d) %s\n  want %s\n", i, rc, err, bad_cases[i].message);
      fail();
    }
    assert_null(t.ev); /* nothing partially loaded */
    assert_int_equal(t.nallocs, 0);
  }
}

static void test_nul_byte(void **state) {
  (void)state;
  static const char text[] = HDR "0,00:00:00.000000,allocate,0x10\0,100,0x0\n";
  vs_trace t;
  char err[256] = "";
  assert_int_equal(read_string(text, sizeof text - 1, &t, err, sizeof err), -1);
  assert_string_equal(err, "t.csv:2: binary data (a NUL byte): not a CSV trace");
}

static void test_missing_file(void **state) {
  (void)state;
  vs_trace t;
  char err[256] = "";
  assert_int_equal(vs_trace_load("/nonexistent/x.csv", &t, err, sizeof err), -1);
  assert_string_equal(err, "/nonexistent/x.csv: cannot open: No such file or directory");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_good_trace), cmocka_unit_test(test_header_only), cmocka_unit_test(test_bad_traces),
      cmocka_unit_test(test_nul_byte),   cmocka_unit_test(test_missing_file), cmocka_unit_test(test_zero_bytes),
      cmocka_unit_test(test_midnight),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
