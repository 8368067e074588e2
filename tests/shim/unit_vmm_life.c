/* Unit tests of the program's VMM handle lives (src/interpose/memory/
 * vmm_life.c): references and mappings, linked with the static interposer
 * library (no driver involved). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "vmm_life.h"

#define G ((uint64_t)2 << 20)

static size_t unmap(uint64_t va, uint64_t size, uint64_t *first) {
  uint64_t *ended = NULL;
  size_t n = vs_vmm_life_unmapped(va, size, &ended);
  if (n && first) *first = ended[0];
  free(ended);
  return n;
}

/* Released while mapped: the memory ends with its last mapping. */
static void release_then_unmap(void **state) {
  (void)state;
  uint64_t h = 0x1001, got = 0;
  vs_vmm_life_created(h);
  vs_vmm_life_mapped(h, 0x100000000ull, G);
  vs_vmm_life_mapped(h, 0x200000000ull, G);          /* a second mapping of the same memory */
  assert_int_equal(vs_vmm_life_release(h), 0);        /* stays: mapped */
  assert_int_equal(unmap(0x100000000ull, G, NULL), 0);
  assert_int_equal(unmap(0x200000000ull, G, &got), 1);
  assert_int_equal(got, h);
  assert_int_equal(vs_vmm_life_release(h), 1);        /* forgotten: a release now is the driver's business */
}

/* Retained: each reference is given back; unmapped first, the last release ends it. */
static void retain_release_unmap_release(void **state) {
  (void)state;
  uint64_t h = 0x2002;
  vs_vmm_life_created(h);
  vs_vmm_life_mapped(h, 0x300000000ull, 4 * G);
  vs_vmm_life_retained(h);
  assert_int_equal(vs_vmm_life_release(h), 0);
  assert_int_equal(unmap(0x300000000ull, 4 * G, NULL), 0);   /* the creator's reference */
  assert_int_equal(vs_vmm_life_release(h), 1);
  /* a refused release puts its reference back */
  vs_vmm_life_created(h);
  vs_vmm_life_mapped(h, 0x300000000ull, G);
  assert_int_equal(vs_vmm_life_release(h), 0);
  vs_vmm_life_retained(h);   /* the driver refused the release */
  assert_int_equal(unmap(0x300000000ull, G, NULL), 0);       /* referenced again */
  assert_int_equal(vs_vmm_life_release(h), 1);
}

/* One unmap over mappings laid end to end, and one over a range that does
 * not start at a mapping. */
static void unmap_ranges(void **state) {
  (void)state;
  uint64_t base = 0x400000000ull;
  for (uint64_t i = 0; i < 4; i++) {
    vs_vmm_life_created(0x3000 + i);
    vs_vmm_life_mapped(0x3000 + i, base + i * G, G);
    assert_int_equal(vs_vmm_life_release(0x3000 + i), 0);
  }
  assert_int_equal(unmap(base, 2 * G, NULL), 2);
  assert_int_equal(unmap(base + G / 2, 8 * G, NULL), 2);   /* found by the walk */
  assert_int_equal(unmap(base, 8 * G, NULL), 0);
}

/* A handle value the driver hands out again while the old one's mappings
 * were never seen going: no count runs below zero. */
static void reused_value(void **state) {
  (void)state;
  uint64_t h = 0x4004;
  vs_vmm_life_created(h);
  vs_vmm_life_mapped(h, 0x500000000ull, G);
  vs_vmm_life_created(h);                                  /* the old memory ended unseen */
  assert_int_equal(unmap(0x500000000ull, G, NULL), 0);    /* the old mapping is gone with it */
  assert_int_equal(vs_vmm_life_release(h), 1);            /* the new one: referenced once, unmapped */
  assert_int_equal(vs_vmm_life_release(0x9999), 1);       /* unknown: the old rule */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(release_then_unmap),
      cmocka_unit_test(retain_release_unmap_release),
      cmocka_unit_test(unmap_ranges),
      cmocka_unit_test(reused_value),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
