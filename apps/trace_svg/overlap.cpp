// apps/trace_svg/overlap.cpp: see overlap.h.
#include "apps/trace_svg/overlap.h"

#include <cstdio>
#include <map>
#include <utility>

namespace engine::trace_svg {

std::vector<RankOverlap> allreduce_overlap(const Timeline& t, const Window& w) {
  using Spans = std::vector<std::pair<double, double>>;
  struct Acc {
    Spans comm, backward, wait;
    int count = 0;
  };
  std::map<int64_t, Acc> per_rank;
  for (const Lane& lane : t.lanes) {
    int rows = 0;
    Acc& a = per_rank[lane.pid];
    for (const Event& e : events_in(lane, w, &rows)) {
      const std::pair<double, double> span{e.start_us, e.end_us};
      if (e.category == "comm" && (e.name == "allreduce" || e.name == "reduce+broadcast")) {
        a.comm.push_back(span);
        ++a.count;
      } else if (e.category == "backward" && e.name == "backward") {
        a.backward.push_back(span);
      } else if (e.category == "comm" && e.name == "allreduce wait") {
        a.wait.push_back(span);
      }
    }
  }
  std::vector<RankOverlap> out;
  for (auto& [rank, a] : per_rank) {
    RankOverlap o;
    o.rank = rank;
    o.allreduces = a.count;
    o.allreduce_us = union_length(a.comm);
    o.backward_us = union_length(a.backward);
    Spans both = a.comm;
    both.insert(both.end(), a.backward.begin(), a.backward.end());
    // |A ∩ B| = |A| + |B| - |A ∪ B|
    o.overlapped_us = o.allreduce_us + o.backward_us - union_length(both);
    o.wait_us = union_length(a.wait);
    out.push_back(o);
  }
  return out;
}

std::string describe(const RankOverlap& o) {
  char buf[256];
  const double pct = o.allreduce_us > 0 ? 100.0 * o.overlapped_us / o.allreduce_us : 0.0;
  std::snprintf(buf, sizeof buf,
                "rank %lld: %d allreduce%s busy %.2f ms, %.2f ms of it (%.0f%%) during backward",
                static_cast<long long>(o.rank), o.allreduces, o.allreduces == 1 ? "" : "s",
                o.allreduce_us / 1000, o.overlapped_us / 1000, pct);
  std::string s = buf;
  if (o.wait_us > 0) {
    std::snprintf(buf, sizeof buf, "; main thread waited %.2f ms for it", o.wait_us / 1000);
    s += buf;
  }
  return s;
}

}  // namespace engine::trace_svg
