// comm/rendezvous/slurm_env.cpp: see slurm_env.h.
#include "comm/rendezvous/slurm_env.h"

#include <netdb.h>
#include <sys/socket.h>

#include <cstdlib>

#include "core/error.h"

namespace engine::comm::slurm {

namespace {

constexpr size_t kMaxHosts = 1 << 20;  // a bound on what a typo like a[1-999999999] expands to

// Throws "<what>='<list>': <why> (...)".
struct ListError {
  const std::string& list;
  const std::string& what;
  template <typename... Args>
  [[noreturn]] void operator()(const Args&... why) const {
    ENGINE_FAIL(what, "='", list, "': ", why...,
                " (expected Slurm's host list syntax, e.g. node[01-04,07],login1)");
  }
};

bool all_digits(const std::string& s) {
  if (s.empty() || s.size() > 18) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// The patterns of a list: split at commas and spaces outside brackets; brackets balanced.
std::vector<std::string> split_patterns(const std::string& list, const ListError& fail) {
  std::vector<std::string> out;
  std::string cur;
  bool open = false;
  for (char c : list) {
    if (c == '[' && open) fail("nested '['");
    if (c == ']' && !open) fail("']' without '['");
    if (c == '[' || c == ']') open = c == '[';
    if (!open && (c == ',' || c == ' ' || c == '\t' || c == '\n')) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (open) fail("'[' without ']'");
  if (!cur.empty()) out.push_back(cur);
  return out;
}

// The numbers of a bracket's contents "01-04,07" as text, zero-padded to each lower bound's width.
std::vector<std::string> expand_bracket(const std::string& body, const ListError& fail) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= body.size()) {
    size_t comma = body.find(',', start);
    if (comma == std::string::npos) comma = body.size();
    const std::string item = body.substr(start, comma - start);
    const size_t dash = item.find('-');
    const std::string lo = item.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : item.substr(dash + 1);
    if (!all_digits(lo) || !all_digits(hi)) fail("bad range '", item, "' in [", body, "]");
    const uint64_t a = std::stoull(lo), b = std::stoull(hi);
    if (a > b) fail("range '", item, "' runs backwards");
    if (b - a >= kMaxHosts || out.size() + (b - a) >= kMaxHosts) fail("more than 2^20 hosts");
    for (uint64_t v = a; v <= b; ++v) {
      std::string s = std::to_string(v);
      if (s.size() < lo.size()) s.insert(0, lo.size() - s.size(), '0');
      out.push_back(s);
    }
    start = comma + 1;
  }
  return out;
}

// One pattern: literal text and bracket groups, their product (the first bracket varies slowest).
void expand_pattern(const std::string& p, const ListError& fail, std::vector<std::string>& out) {
  std::vector<std::string> hosts{""};
  size_t i = 0;
  while (i < p.size()) {
    const size_t open = p.find('[', i);
    const std::string text = p.substr(i, open == std::string::npos ? std::string::npos : open - i);
    for (std::string& h : hosts) h += text;
    if (open == std::string::npos) break;
    const size_t close = p.find(']', open);  // balanced: split_patterns checked
    const std::vector<std::string> nums =
        expand_bracket(p.substr(open + 1, close - open - 1), fail);
    if (hosts.size() * nums.size() + out.size() > kMaxHosts) fail("more than 2^20 hosts");
    std::vector<std::string> next;
    next.reserve(hosts.size() * nums.size());
    for (const std::string& h : hosts)
      for (const std::string& n : nums) next.push_back(h + n);
    hosts = std::move(next);
    i = close + 1;
  }
  out.insert(out.end(), hosts.begin(), hosts.end());
}

uint64_t parse_id(const char* name, const char* value) {
  ENGINE_CHECK(all_digits(value), name, "='", value, "' is not a number");
  return std::stoull(value);
}

int parse_port(const char* value) {
  ENGINE_CHECK(all_digits(value) && std::stoull(value) > 0 && std::stoull(value) < 65536,
               "MASTER_PORT='", value, "' is not a port (1..65535)");
  return static_cast<int>(std::stoull(value));
}

// "2(x3)" -> count 2, repeated 3 times; "1" -> once.
std::pair<int, int> parse_tasks_item(const std::string& item, const char* var, const char* value) {
  const size_t paren = item.find("(x");
  const std::string n = item.substr(0, paren);
  std::string times = "1";
  if (paren != std::string::npos)
    times = item.back() == ')' ? item.substr(paren + 2, item.size() - paren - 3) : "";
  ENGINE_CHECK(all_digits(n) && all_digits(times), var, "='", value,
               "': expected counts like 2(x3),1");
  return {std::stoi(n), std::stoi(times)};
}

}  // namespace

const char* getenv_nonempty(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

std::vector<std::string> expand_hostlist(const std::string& list, const std::string& what) {
  const ListError fail{list, what};
  std::vector<std::string> hosts;
  for (const std::string& p : split_patterns(list, fail)) expand_pattern(p, fail, hosts);
  if (hosts.empty()) fail("no host");
  return hosts;
}

std::string first_host(const std::string& list, const std::string& what) {
  return expand_hostlist(list, what).front();
}

int derive_port(uint64_t job_id, uint64_t step_id) {
  return static_cast<int>(12000 + (8 * (job_id % 20000) + step_id % 20000) % 20000);
}

bool in_step(const Getenv& env) {
  return env("SLURM_PROCID") && (env("SLURM_STEP_ID") || env("SLURM_STEPID"));
}

StoreAddress store_address(const Getenv& env) {
  StoreAddress a;
  if (const char* addr = env("MASTER_ADDR")) {
    a.host = addr;
    a.host_from = "MASTER_ADDR";
  } else {
    const char* var = env("SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST";
    const char* list = env(var);
    ENGINE_CHECK(list,
                 "env:// (Slurm): neither MASTER_ADDR nor SLURM_STEP_NODELIST nor "
                 "SLURM_JOB_NODELIST is set: set MASTER_ADDR to rank 0's host");
    a.host = first_host(list, var);
    a.host_from = var;
  }
  if (const char* port = env("MASTER_PORT")) {
    a.port = parse_port(port);
  } else {
    const char* job = env("SLURM_JOB_ID") ? env("SLURM_JOB_ID") : env("SLURM_JOBID");
    ENGINE_CHECK(job,
                 "env:// (Slurm): neither MASTER_PORT nor SLURM_JOB_ID is set: set "
                 "MASTER_PORT to rank 0's store port");
    const char* step_var = env("SLURM_STEP_ID") ? "SLURM_STEP_ID" : "SLURM_STEPID";
    const char* step = env(step_var);
    a.port = derive_port(parse_id("SLURM_JOB_ID", job), step ? parse_id(step_var, step) : 0);
  }
  return a;
}

StoreAddress resolved_store_address(const Getenv& env) {
  StoreAddress a = store_address(env);
  if (a.host_from == "MASTER_ADDR") return a;  // resolved where it is used, as without Slurm
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = EAI_FAIL;
  // IPv4 first: rank 0's store listens on 0.0.0.0.
  for (int family : {AF_INET, AF_UNSPEC}) {
    hints.ai_family = family;
    if ((rc = getaddrinfo(a.host.c_str(), nullptr, &hints, &res)) == 0) break;
  }
  ENGINE_CHECK(rc == 0, "env:// (Slurm): cannot resolve '", a.host, "', the first host of ",
               a.host_from, "='", env(a.host_from.c_str()), "': ", gai_strerror(rc),
               "; set MASTER_ADDR to rank 0's address");
  char num[NI_MAXHOST] = {};
  rc = getnameinfo(res->ai_addr, res->ai_addrlen, num, sizeof num, nullptr, 0, NI_NUMERICHOST);
  freeaddrinfo(res);
  ENGINE_CHECK(rc == 0, "env:// (Slurm): no numeric address for '", a.host,
               "': ", gai_strerror(rc));
  a.host = num;
  return a;
}

int local_task_count(const Getenv& env) {
  const char* var =
      env("SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE" : "SLURM_TASKS_PER_NODE";
  const char* value = env(var);
  if (!value) return 0;
  const char* node_var = "SLURM_NODEID";
  int64_t node = env(node_var) ? static_cast<int64_t>(parse_id(node_var, env(node_var))) : 0;
  const std::string s = value;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    auto [count, times] = parse_tasks_item(s.substr(start, comma - start), var, value);
    if (node < times) return count;
    node -= times;
    start = comma + 1;
  }
  ENGINE_FAIL(var, "='", value, "' has no entry for ", node_var, "=", env(node_var));
}

}  // namespace engine::comm::slurm
