// comm/groups/split.cpp: Communicator::split (groups over the parent's transport,
// comm/groups/group_transport.h) and the ranks' hosts.
#include <algorithm>
#include <cstdint>
#include <utility>

#include "comm/communicator.h"
#include "comm/groups/group_transport.h"
#include "core/error.h"

namespace engine::comm {

namespace {

// A group id (1 .. 65535) from the parent's id, the parent's split count and the color: the same
// on every member; groups that share a pair of ranks come from different splits (or parents), so
// their ids differ but for a 1-in-65535 chance (and ordered calls stay correct even then).
uint16_t group_id(uint16_t parent, int split_no, int color) {
  uint64_t x = (uint64_t{parent} << 40) ^ (uint64_t(split_no) << 20) ^ uint64_t(color);
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<uint16_t>(1 + x % 65535);
}

}  // namespace

std::unique_ptr<Communicator> Communicator::split(int color, int key) {
  const int W = size();
  const int32_t mine[2] = {color < 0 ? -1 : color, key};
  std::vector<int32_t> all(2 * W);
  all_gather(mine, all.data(), 2, DType::I32);
  const int split_no = ++splits_;
  if (color < 0) return nullptr;
  std::vector<std::pair<int32_t, int>> order;  // (key, rank) of this color's ranks
  for (int r = 0; r < W; ++r)
    if (all[2 * r] == color) order.emplace_back(all[2 * r + 1], r);
  std::sort(order.begin(), order.end());
  std::vector<int> members;
  int me = -1;
  for (const auto& [k, r] : order) {
    if (r == rank()) me = static_cast<int>(members.size());
    members.push_back(r);
  }
  const uint16_t gid = group_id(group_, split_no, color);
  auto child = std::make_unique<Communicator>(
      std::make_shared<GroupTransport>(transport_, members, me, gid), opts_, store_);
  child->group_ = gid;
  if (!hosts_.empty()) {
    std::vector<int> hosts;
    for (int r : members) hosts.push_back(hosts_[r]);
    child->set_hosts(std::move(hosts));
  } else {
    child->set_local(me, static_cast<int>(members.size()));
  }
  return child;
}

void Communicator::set_hosts(std::vector<int> host_of_rank) {
  ENGINE_CHECK(static_cast<int>(host_of_rank.size()) == size(), "set_hosts on rank ", rank(), ": ",
               host_of_rank.size(), " hosts given for ", size(), " ranks");
  // Renumber by first rank: host 0 is rank 0's.
  std::vector<int> seen, renum(host_of_rank.size());
  for (size_t r = 0; r < host_of_rank.size(); ++r) {
    auto it = std::find(seen.begin(), seen.end(), host_of_rank[r]);
    renum[r] = static_cast<int>(it - seen.begin());
    if (it == seen.end()) seen.push_back(host_of_rank[r]);
  }
  int lr = 0, ls = 0;
  for (int r = 0; r < size(); ++r) {
    if (renum[r] != renum[rank()]) continue;
    if (r < rank()) ++lr;
    ++ls;
  }
  hosts_ = std::move(renum);
  set_local(lr, ls);
}

int Communicator::num_hosts() const {
  return hosts_.empty() ? 1 : *std::max_element(hosts_.begin(), hosts_.end()) + 1;
}

}  // namespace engine::comm
