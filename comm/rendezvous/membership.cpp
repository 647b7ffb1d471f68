// comm/rendezvous/membership.cpp: see membership.h.
#include "comm/rendezvous/membership.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <thread>

namespace engine::comm {

namespace {

std::string gen_prefix(int64_t g) {
  return "elastic/" + std::to_string(g) + "/";
}

int64_t parse_i64(const std::string& s, const std::string& what) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  ENGINE_CHECK(!s.empty() && used == s.size(), "membership: ", what, " '", s,
               "' in the store is not an integer");
  return v;
}

std::vector<int> parse_ids(const std::string& s, const std::string& what) {
  std::vector<int> ids;
  std::stringstream is(s);
  for (std::string item; std::getline(is, item, ',');)
    if (!item.empty()) ids.push_back(static_cast<int>(parse_i64(item, what)));
  return ids;
}

struct Joined {
  int64_t progress = 0;
  std::vector<int> lost;
};

Joined decode_joined(const std::string& v, int id) {
  const auto nl = v.find('\n');
  const std::string what = "registration of member " + std::to_string(id);
  ENGINE_CHECK(nl != std::string::npos, "membership: malformed ", what, " in the store");
  return {parse_i64(v.substr(0, nl), what), parse_ids(v.substr(nl + 1), what)};
}

std::string encode_members(const std::vector<int>& ids, const std::vector<int64_t>& progress) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]) + ":" + std::to_string(progress[i]);
  }
  return s;
}

Membership decode_members(const std::string& s, int64_t g) {
  Membership m;
  m.generation = g;
  std::stringstream is(s);
  const std::string what = "generation " + std::to_string(g) + "'s members";
  for (std::string item; std::getline(is, item, ',');) {
    const auto colon = item.find(':');
    ENGINE_CHECK(colon != std::string::npos, "membership: malformed ", what, " '", s, "'");
    m.ids.push_back(static_cast<int>(parse_i64(item.substr(0, colon), what)));
    m.progress.push_back(parse_i64(item.substr(colon + 1), what));
  }
  ENGINE_CHECK(!m.ids.empty(), "membership: ", what, " is empty");
  return m;
}

// The closer's wait: until every old member registered or was seen lost by one that did, or the
// deadline. Returns the registered members in id order.
Membership close_generation(Store& store, const Membership& old, const Deadline& dl) {
  const std::string pre = gen_prefix(old.generation + 1);
  std::map<int, Joined> joined;
  while (true) {
    std::set<int> lost;
    for (int id : old.ids) {
      const std::string key = pre + "joined/" + std::to_string(id);
      if (!joined.count(id) && store.check({key})) joined[id] = decode_joined(store.get(key), id);
    }
    for (const auto& [id, j] : joined) lost.insert(j.lost.begin(), j.lost.end());
    const bool settled = std::all_of(old.ids.begin(), old.ids.end(), [&](int id) {
      return joined.count(id) > 0 || lost.count(id) > 0;
    });
    if (settled || dl.expired()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  Membership m;
  m.generation = old.generation + 1;
  for (const auto& [id, j] : joined) {
    m.ids.push_back(id);
    m.progress.push_back(j.progress);
  }
  return m;
}

}  // namespace

int64_t Membership::furthest() const {
  return progress.empty() ? 0 : *std::max_element(progress.begin(), progress.end());
}

int Membership::source() const {
  const int64_t s = furthest();
  for (size_t i = 0; i < progress.size(); ++i)
    if (progress[i] == s) return static_cast<int>(i);
  return 0;
}

std::vector<int> Membership::lost_since(const Membership& before) const {
  std::vector<int> out;
  for (int id : before.ids)
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) out.push_back(id);
  return out;
}

Membership initial_membership(int rank, int world) {
  Membership m;
  for (int r = 0; r < world; ++r) m.ids.push_back(r);
  m.progress.assign(static_cast<size_t>(world), 0);
  m.rank = rank;
  return m;
}

void mark_running(Store& store) {
  store.set("elastic/running", "1");
}

bool job_running(Store& store) {
  return store.check({"elastic/running"});
}

void mark_done(Store& store) {
  store.set("elastic/done", "1");
}

std::vector<int> joiners(Store& store, const Membership& now, int world0) {
  std::vector<int> out;
  for (int id = 0; id < world0; ++id) {
    if (std::find(now.ids.begin(), now.ids.end(), id) != now.ids.end()) continue;
    const std::string i = std::to_string(id);
    if (store.add("elastic/joining/" + i, 0) > store.add("elastic/admitted/" + i, 0))
      out.push_back(id);
  }
  return out;
}

std::optional<Membership> admit(Store& store, const Membership& now,
                                const std::vector<int>& joiners, int64_t progress) {
  const int64_t g = now.generation + 1;
  const std::string pre = gen_prefix(g);
  if (store.add(pre + "closer", 1) != 1) return std::nullopt;
  std::map<int, int64_t> all;
  for (int id : now.ids) all[id] = progress;
  for (int id : joiners) all[id] = -1;
  Membership m;
  m.generation = g;
  for (const auto& [id, p] : all) {
    m.ids.push_back(id);
    m.progress.push_back(p);
  }
  store.set(pre + "members", encode_members(m.ids, m.progress));
  for (int id : joiners) {  // the latest ask of each id (an earlier asker may be gone)
    const std::string i = std::to_string(id);
    const int64_t asks = store.add("elastic/joining/" + i, 0);
    store.add("elastic/admitted/" + i, asks - store.add("elastic/admitted/" + i, 0));
    store.set("elastic/admit/" + i + "/" + std::to_string(asks), std::to_string(g));
  }
  m.rank = static_cast<int>(std::find(m.ids.begin(), m.ids.end(), now.id()) - m.ids.begin());
  return m;
}

Membership admitted(Store& store, const Membership& now, Millis timeout) {
  const int64_t g = now.generation + 1;
  store.wait({gen_prefix(g) + "members"}, timeout);
  Membership m = decode_members(store.get(gen_prefix(g) + "members"), g);
  m.rank = static_cast<int>(std::find(m.ids.begin(), m.ids.end(), now.id()) - m.ids.begin());
  ENGINE_CHECK(m.rank < m.world(), "rank ", now.id(), " is not in generation ", g,
               " that rank 0 published");
  return m;
}

std::optional<Membership> await_admission(Store& store, int id, Millis timeout) {
  const std::string i = std::to_string(id);
  const std::string key =
      "elastic/admit/" + i + "/" + std::to_string(store.add("elastic/joining/" + i, 1));
  const Deadline dl = Deadline::after(timeout);
  while (!store.check({key})) {
    if (store.check({"elastic/done"})) return std::nullopt;
    if (dl.expired())
      throw TimeoutError(detail::concat("rank ", id, " asked to join the running job through ",
                                        store.describe(), " and was not admitted within ",
                                        seconds_str(timeout)));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const int64_t g = parse_i64(store.get(key), "the generation rank " + i + " joins");
  Membership m = decode_members(store.get(gen_prefix(g) + "members"), g);
  m.rank = static_cast<int>(std::find(m.ids.begin(), m.ids.end(), id) - m.ids.begin());
  ENGINE_CHECK(m.rank < m.world(), "rank ", id, " was admitted to generation ", g,
               " but is not among its members");
  return m;
}

std::optional<std::vector<int>> generation_members(Store& store, int64_t g) {
  const std::string key = gen_prefix(g) + "members";
  if (!store.check({key})) return std::nullopt;
  return decode_members(store.get(key), g).ids;
}

std::string id_list(const std::vector<int>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(ids[i]);
  }
  return s;
}

Membership regroup(Store& store, const Membership& old, int64_t progress,
                   const std::vector<int>& seen_lost, Millis timeout) {
  // Registrations wait at most `window` for the members not seen lost (the others were told by
  // the broken generation's Abort frames at once); the decision, at most `timeout` beyond that.
  const Millis window = std::min(timeout, Millis(5000));
  const Deadline dl = Deadline::after(window + timeout);
  const int64_t g = old.generation + 1;
  const std::string pre = gen_prefix(g);
  const int me = old.id();
  std::string lost;
  for (int id : seen_lost) {
    if (!lost.empty()) lost += ',';
    lost += std::to_string(id);
  }
  store.set(pre + "joined/" + std::to_string(me), std::to_string(progress) + "\n" + lost);
  if (store.add(pre + "closer", 1) == 1) {
    const Membership closed = close_generation(store, old, Deadline::after(window));
    store.set(pre + "members", encode_members(closed.ids, closed.progress));
  }
  try {
    store.wait({pre + "members"}, std::max(dl.remaining(), Millis(1)));
  } catch (const TimeoutError&) {
    throw TimeoutError(
        detail::concat("rank ", me, ": generation ", g, " was not closed within ",
                       seconds_str(window + timeout), " (its closer, the first member to ",
                       "register, never published the members) through ", store.describe()));
  }
  Membership m = decode_members(store.get(pre + "members"), g);
  const auto it = std::find(m.ids.begin(), m.ids.end(), me);
  if (it == m.ids.end())
    throw FencedError(detail::concat("rank ", me, " was fenced: generation ", g,
                                     " went on without it (members ", id_list(m.ids),
                                     "); it leaves without touching their state"));
  m.rank = static_cast<int>(it - m.ids.begin());
  return m;
}

}  // namespace engine::comm
