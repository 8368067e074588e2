/* The arena is not wired in yet: every request passes to the driver. */
#include "arena_glue.h"

#include "memory_service.h"

int vs_arena_glue_alloc(int card, uint64_t size, uint64_t *addr, CUresult *res) {
  (void)card;
  (void)size;
  (void)addr;
  (void)res;
  return VS_MEM_PASS;
}
int vs_arena_glue_free(int card, uint64_t addr) {
  (void)card;
  (void)addr;
  return -1;
}
int vs_arena_glue_range(uint64_t ptr, uint64_t *base, uint64_t *size) {
  (void)ptr;
  (void)base;
  (void)size;
  return VS_MEM_PASS;
}
uint64_t vs_arena_glue_cached(int card) {
  (void)card;
  return 0;
}
vs_arena *vs_arena_glue_get(int card) {
  (void)card;
  return NULL;
}
void vs_arena_glue_atfork_child(void) {}
int vs_arena_glue_holds(uint64_t addr) {
  (void)addr;
  return 0;
}
