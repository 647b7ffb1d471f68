// parallel/straggler.cpp: see straggler.h.
#include "parallel/straggler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "comm/health/flight_recorder.h"
#include "core/error.h"

namespace engine::parallel {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

StragglerScore empty_score(size_t world, int64_t steps) {
  StragglerScore s;
  s.steps = steps;
  s.last_count.assign(world, 0);
  s.late_sum_ms.assign(world, 0);
  s.wait_ms.assign(world, 0);
  s.compute_ms.assign(world, 0);
  return s;
}

}  // namespace

void StragglerScore::add(const StragglerScore& o) {
  if (last_count.empty()) *this = empty_score(o.last_count.size(), 0);
  ENGINE_CHECK(o.last_count.size() == last_count.size(), "straggler scores of ", last_count.size(),
               " and ", o.last_count.size(), " ranks");
  collectives += o.collectives;
  steps += o.steps;
  for (size_t r = 0; r < last_count.size(); ++r) {
    last_count[r] += o.last_count[r];
    late_sum_ms[r] += o.late_sum_ms[r];
    wait_ms[r] += o.wait_ms[r];
    compute_ms[r] += o.compute_ms[r];
  }
  finish();
}

void StragglerScore::finish() {
  rank = -1;
  share = late_ms = 0;
  stands_out = false;
  if (collectives == 0 || last_count.size() < 2) return;
  rank =
      static_cast<int>(std::max_element(last_count.begin(), last_count.end()) - last_count.begin());
  share = static_cast<double>(last_count[rank]) / static_cast<double>(collectives);
  late_ms = last_count[rank] ? late_sum_ms[rank] / static_cast<double>(last_count[rank]) : 0;
  double others_wait = 0, step_ms = 0;
  for (size_t r = 0; r < last_count.size(); ++r) {
    step_ms += (wait_ms[r] + compute_ms[r]) / static_cast<double>(last_count.size());
    if (static_cast<int>(r) != rank) others_wait += wait_ms[r];
  }
  others_wait /= static_cast<double>(last_count.size() - 1);
  // Above chance too: a step's collectives tend to have one last rank, so the steps are the
  // draws; three standard deviations above a fair share of 1/W.
  const double fair = 1.0 / static_cast<double>(last_count.size());
  const double chance =
      fair + 3 * std::sqrt(fair * (1 - fair) / static_cast<double>(std::max<int64_t>(1, steps)));
  stands_out = share >= std::max(kShare, chance) && others_wait >= kWaitShare * step_ms;
}

StragglerScore score_stragglers(const std::vector<std::vector<double>>& inside_s,
                                const std::vector<double>& busy_s, int64_t steps) {
  const size_t world = inside_s.size();
  StragglerScore s = empty_score(world, steps);
  const size_t n = world ? inside_s[0].size() : 0;
  std::vector<double> col(world);
  for (size_t i = 0; i < n; ++i) {
    bool whole = true;
    for (size_t r = 0; r < world; ++r) whole = whole && (col[r] = inside_s[r].at(i)) >= 0;
    if (!whole) continue;
    const size_t last = std::min_element(col.begin(), col.end()) - col.begin();
    std::vector<double> others;
    for (size_t r = 0; r < world; ++r) {
      s.wait_ms[r] += (col[r] - col[last]) * 1e3;
      if (r != last) others.push_back(col[r]);
    }
    ++s.collectives;
    ++s.last_count[last];
    s.late_sum_ms[last] += (median(others) - col[last]) * 1e3;
  }
  for (size_t r = 0; r < world; ++r) s.compute_ms[r] = busy_s.at(r) * 1e3;
  s.finish();
  return s;
}

std::string straggler_line(const StragglerScore& s) {
  double others = 0;
  for (size_t r = 0; r < s.compute_ms.size(); ++r)
    if (static_cast<int>(r) != s.rank) others += s.compute_ms_per_step(static_cast<int>(r));
  others /= static_cast<double>(std::max<size_t>(1, s.compute_ms.size() - 1));
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "rank %d is the straggler: last into %.0f%% of collectives, %.1f ms late on "
                "average (its step computes %.0f ms, the others %.0f ms)",
                s.rank, 100 * s.share, s.late_ms, s.compute_ms_per_step(s.rank), others);
  return buf;
}

void StragglerWatch::begin_epoch(comm::Communicator& c) {
  start(c);
  steps_ = 0;
  epoch_ = {};
}

std::string StragglerWatch::step(comm::Communicator& c, bool epoch_end) {
  if (c.size() < 2) return "";
  if (!epoch_end) ++steps_;
  if (steps_ == 0 || (!epoch_end && steps_ < kSteps)) return "";
  const std::optional<StragglerScore> s = interval(c, steps_);
  steps_ = 0;
  if (!s) return "";
  epoch_.add(*s);
  if (s->stands_out && s->rank != named_) {
    named_ = s->rank;
    return straggler_line(*s);
  }
  if (s->stands_out || named_ < 0) return "";
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "rank %d is no longer the straggler (last into %.0f%% of the last %lld steps' "
                "collectives)",
                named_,
                100.0 * static_cast<double>(s->last_count[named_]) /
                    static_cast<double>(std::max<int64_t>(1, s->collectives)),
                static_cast<long long>(s->steps));
  named_ = -1;
  return buf;
}

void StragglerWatch::start(comm::Communicator& c) {
  first_seq_ = c.collectives_started() + 1;
  start_s_ = comm::FlightRecorder::get().now_s();
}

std::optional<StragglerScore> StragglerWatch::interval(comm::Communicator& c, int64_t steps) {
  if (c.size() < 2) return std::nullopt;
  const comm::FlightRecorder& fr = comm::FlightRecorder::get();
  const uint64_t last_seq = c.collectives_started();  // the same on every rank
  // This rank's row: the interval's wall time less its time inside every collective of it,
  // then the time inside each of its last kSlots collectives (-1: not recorded).
  std::vector<double> mine(1 + kSlots, -1.0);
  double inside = 0;
  for (const comm::FlightEntry& e : fr.snapshot()) {
    if (e.comm != c.flight_id() || e.call.seq < first_seq_ || e.call.seq > last_seq ||
        e.state != comm::FlightEntry::State::Completed)
      continue;
    inside += e.completed_s - e.started_s;
    if (e.call.seq + kSlots > last_seq)
      mine[1 + (e.call.seq + kSlots - 1 - last_seq)] = e.completed_s - e.started_s;
  }
  mine[0] = fr.now_s() - start_s_ - inside;
  std::vector<double> all(mine.size() * c.size());
  c.all_gather(mine.data(), all.data(), mine.size(), DType::F64);
  start(c);
  std::vector<std::vector<double>> inside_s(c.size());
  std::vector<double> busy(c.size());
  for (int r = 0; r < c.size(); ++r) {
    const double* row = all.data() + static_cast<size_t>(r) * mine.size();
    busy[r] = row[0];
    inside_s[r].assign(row + 1, row + mine.size());
  }
  return score_stragglers(inside_s, busy, steps);
}

}  // namespace engine::parallel
