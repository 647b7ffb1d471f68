// tests/comm/blame_job.h: a job of W forked ranks for the tests of who-stopped reports
// (test_blame.cpp). Every rank runs all_reduce in a loop until it fails and reports on its own
// pipe: "R" once it has finished a few collectives, then "E<message>" when a collective throws. The
// test then stops, kills, hangs or cuts off one rank and reads what the others said. The destructor
// continues and kills every child still running and reaps them all, whatever happened.
#pragma once
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "comm/rendezvous/rendezvous.h"

namespace engine::comm::testing {

struct BlameRank {
  pid_t pid = -1;
  int out = -1;  // read end of the child's report pipe
  int ctl = -1;  // write end of the child's control pipe ('h': stop calling collectives)
  std::string text;
  bool eof = false;
};

struct JobOptions {
  int world = 3;
  TransportKind transport = TransportKind::Tcp;
  Millis timeout{2500};
  std::string store_host = "127.0.0.1";
  int port = 0;
  // Runs first in each child (enter a network namespace, set ENGINE_COMM_HOST_ID).
  std::function<void(int)> setup;
};

class BlameJob {
 public:
  explicit BlameJob(const JobOptions& o) : o_(o), ranks_(o.world) {
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < o.world; ++r) start(r);
  }
  ~BlameJob() {
    for (auto& k : ranks_) {
      if (k.pid > 0) {
        kill(k.pid, SIGCONT);
        kill(k.pid, SIGKILL);
        waitpid(k.pid, nullptr, 0);
      }
      if (k.out >= 0) close(k.out);
      if (k.ctl >= 0) close(k.ctl);
    }
  }
  BlameJob(const BlameJob&) = delete;
  BlameJob& operator=(const BlameJob&) = delete;

  pid_t pid(int r) const { return ranks_[r].pid; }
  // Rank r stops calling collectives (it blocks on its control pipe, alive).
  void hang(int r) {
    if (write(ranks_[r].ctl, "h", 1) != 1) ADD_FAILURE() << "cannot tell rank " << r << " to hang";
  }
  // True once every rank has reported "R".
  bool wait_ready(Millis limit) {
    return pump(limit, [&] {
      for (auto& k : ranks_)
        if (k.text.empty()) return false;
      return true;
    });
  }
  // Waits until every rank but `except` has reported its error and exited.
  bool wait_errors(int except, Millis limit) {
    return pump(limit, [&] {
      for (int r = 0; r < o_.world; ++r)
        if (r != except && !ranks_[r].eof) return false;
      return true;
    });
  }
  // What rank r said when it failed ("" if it did not).
  std::string error(int r) const {
    const std::string& t = ranks_[r].text;
    auto e = t.find('E');
    return e == std::string::npos ? "" : t.substr(e + 1);
  }

 private:
  void start(int r) {
    int out[2], ctl[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(ctl, O_CLOEXEC) != 0) {
      ADD_FAILURE() << "pipe failed";
      return;
    }
    pid_t pid = fork();
    if (pid == 0) {
      close(out[0]);
      close(ctl[1]);
      _exit(child(r, out[1], ctl[0]));
    }
    close(out[1]);
    close(ctl[0]);
    ranks_[r] = {pid, out[0], ctl[1], "", false};
  }

  int child(int r, int out, int ctl) {
    try {
      if (o_.setup) o_.setup(r);
      InitOptions io;
      io.init_method = "tcp://" + o_.store_host + ":" + std::to_string(o_.port);
      io.rank = r;
      io.world_size = o_.world;
      io.connect.timeout = o_.timeout;
      io.connect.transport = o_.transport;
      auto c = init_communicator(io);
      fcntl(ctl, F_SETFL, O_NONBLOCK);
      std::vector<float> b(4096, 1.0f);
      for (int i = 0;; ++i) {
        if (i == 3 && write(out, "R", 1) != 1) return 3;
        char cmd = 0;
        if (read(ctl, &cmd, 1) == 1 && cmd == 'h')
          while (true) pause();  // alive, in no collective, until killed
        c->all_reduce(b.data(), b.size(), DType::F32);
      }
    } catch (const std::exception& e) {
      const std::string msg = std::string("E") + e.what();
      fprintf(stderr, "[rank %d] %s\n", r, e.what());
      fflush(stderr);
      if (write(out, msg.data(), msg.size()) < 0) return 2;
      return 1;
    }
  }

  // Reads the pipes until done() or the limit.
  bool pump(Millis limit, const std::function<bool()>& done) {
    const Deadline dl = Deadline::after(limit);
    while (!done()) {
      if (dl.expired()) return false;
      std::vector<pollfd> fds;
      std::vector<int> who;
      for (int r = 0; r < o_.world; ++r)
        if (!ranks_[r].eof) {
          fds.push_back({ranks_[r].out, POLLIN, 0});
          who.push_back(r);
        }
      poll(fds.data(), fds.size(), dl.poll_ms(100));
      for (size_t i = 0; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        char buf[4096];
        ssize_t n = read(fds[i].fd, buf, sizeof buf);
        if (n > 0)
          ranks_[who[i]].text.append(buf, n);
        else
          ranks_[who[i]].eof = true;
      }
    }
    return true;
  }

  JobOptions o_;
  std::vector<BlameRank> ranks_;
};

}  // namespace engine::comm::testing
