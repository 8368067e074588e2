/* Quotas: not enforced yet (every charge admitted, the driver's view). */
#include "quota.h"

#include "memory_service.h"

CUresult vs_quota_charge(int card, uint64_t n) {
  (void)card;
  (void)n;
  return CUDA_SUCCESS;
}
int vs_quota_wait(int card, uint64_t n, uint64_t *deadline_ns) {
  (void)card;
  (void)n;
  (void)deadline_ns;
  return 0;
}
void vs_quota_force(int card, uint64_t n) {
  (void)card;
  (void)n;
}
void vs_quota_uncharge(int card, uint64_t n) {
  (void)card;
  (void)n;
}
int vs_quota_view(int card, uint64_t *free_bytes, uint64_t *total_bytes) {
  (void)card;
  (void)free_bytes;
  (void)total_bytes;
  return VS_MEM_PASS;
}
void vs_quota_note_live(int card, uint64_t live_bytes) {
  (void)card;
  (void)live_bytes;
}
void vs_quota_atfork_child(void) {}
