// tests/comm/netns_hosts.h: N "hosts" in network namespaces made by a test: each host's eth0
// (10.77.0.<i+1>/24) is a veth pair whose other end v<i> sits on a bridge in a switch namespace.
// Addresses exist only inside the namespaces; there is no route out. cut(i) makes the switch drop
// every frame to and from host i (an nftables bridge rule): a silent cut, no FIN, no RST. Names are
// unique per test run (pid and a counter); the destructor deletes every namespace it made, which
// takes the veths, the bridge and the rules with it, and a new run deletes those of runs whose
// process is gone.
#pragma once
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/run.h"

namespace engine::comm::testing {

class NetnsHosts {
 public:
  explicit NetnsHosts(int hosts) {
    static std::atomic<int> counter{0};
    tag_ = kPrefix + std::to_string(getpid()) + "_" + std::to_string(counter++);
    if (geteuid() != 0) {
      why_ = "needs root to make network namespaces";
      return;
    }
    if (engine::testing::run("command -v ip && command -v nft").code != 0) {
      why_ = "needs iproute2 (ip) and nftables (nft)";
      return;
    }
    remove_stale();
    if (!sh("ip netns add " + sw())) return;
    made_.push_back(sw());
    if (!sh("ip -n " + sw() + " link add br0 type bridge && ip -n " + sw() + " link set br0 up"))
      return;
    for (int i = 0; i < hosts; ++i)
      if (!add_host(i)) return;
    ok_ = true;
  }
  ~NetnsHosts() {
    for (const auto& ns : made_) engine::testing::run("ip netns del " + ns);
  }
  NetnsHosts(const NetnsHosts&) = delete;
  NetnsHosts& operator=(const NetnsHosts&) = delete;

  bool ok() const { return ok_; }
  const std::string& why_not() const { return why_; }
  std::string host(int i) const { return tag_ + "_h" + std::to_string(i); }
  static std::string addr(int i) { return "10.77.0." + std::to_string(i + 1); }

  // Moves the calling (single-threaded, forked) process into host i's namespace.
  bool enter(int i) const {
    int fd = open(("/var/run/netns/" + host(i)).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool entered = setns(fd, CLONE_NEWNET) == 0;
    close(fd);
    return entered;
  }

  // The switch drops every frame to and from host i from now on.
  bool cut(int i) {
    const std::string v = "v" + std::to_string(i);
    const std::string rules =
        "table bridge cut { chain drop_it { type filter hook forward "
        "priority 0; policy accept; iifname \"" +
        v + "\" drop; oifname \"" + v + "\" drop; }; }";
    return sh("echo '" + rules + "' | ip netns exec " + sw() + " nft -f -");
  }

 private:
  static constexpr const char* kPrefix = "engblame";

  // Namespaces that a test process which no longer runs left behind (it crashed or was killed).
  static void remove_stale() {
    auto list = engine::testing::run("ip netns list");
    std::istringstream is(list.output);
    for (std::string name, rest; is >> name && std::getline(is, rest);) {
      if (name.rfind(kPrefix, 0) != 0) continue;
      const pid_t owner = std::atoi(name.c_str() + std::strlen(kPrefix));
      if (owner > 0 && kill(owner, 0) != 0 && errno == ESRCH)
        engine::testing::run("ip netns del " + name);
    }
  }

  std::string sw() const { return tag_ + "_sw"; }

  bool add_host(int i) {
    const std::string h = host(i), v = "v" + std::to_string(i);
    if (!sh("ip netns add " + h)) return false;
    made_.push_back(h);
    return sh("ip link add eth0 netns " + h + " type veth peer name " + v + " netns " + sw()) &&
           sh("ip -n " + sw() + " link set " + v + " master br0 up") &&
           sh("ip -n " + h + " addr add " + addr(i) + "/24 dev eth0") &&
           sh("ip -n " + h + " link set eth0 up && ip -n " + h + " link set lo up");
  }

  // Runs a command; on failure records why and returns false.
  bool sh(const std::string& cmd) {
    auto r = engine::testing::run(cmd);
    if (r.code == 0) return true;
    why_ = "'" + cmd + "' failed (" + std::to_string(r.code) + "): " + r.output;
    return false;
  }

  std::string tag_, why_;
  std::vector<std::string> made_;
  bool ok_ = false;
};

}  // namespace engine::comm::testing
