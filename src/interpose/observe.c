/* Observation is not wired in yet. */
#include "observe.h"

void vs_observe_init(void) {}
void vs_observe_alloc(int card, uint64_t ptr, uint64_t size) {
  (void)card;
  (void)ptr;
  (void)size;
}
void vs_observe_free(int card, uint64_t ptr, uint64_t size) {
  (void)card;
  (void)ptr;
  (void)size;
}
void vs_observe_refused(int card, uint64_t size, CUresult why) {
  (void)card;
  (void)size;
  (void)why;
}
void vs_observe_atfork_child(void) {}
