// tests/apps/test_store_attack.cpp: a 2-rank `train` job whose rendezvous store (rank 0) is
// attacked by 50 hostile clients claiming huge lengths finishes with the same weights as an
// undisturbed run, and rank 0's peak resident memory (VmHWM, as wait4 reports it) stays within
// 50 MB of the undisturbed run's.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "comm/transport/socket.h"
#include "tests/apps/train_fixture.h"
#include "tests/common/proc_status.h"

namespace engine::testing {
namespace {

using comm::Deadline;
using comm::Millis;

// A rank of a 2-rank job started with torchrun's variables; output to `log`.
pid_t spawn_rank(int rank, int port, const std::string& args, const std::string& log) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(fd, 1);
  dup2(fd, 2);
  setenv("RANK", std::to_string(rank).c_str(), 1);
  setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  setenv("ENGINE_THREADS", "1", 1);
  execl("/bin/sh", "sh", "-c", ("exec " + kTrain + " " + args).c_str(), nullptr);
  _exit(127);
}

// Kills what is still running when the test ends, however it ends.
struct Reaper {
  std::vector<pid_t> pids;
  ~Reaper() {
    for (pid_t p : pids) {
      kill(p, SIGKILL);
      waitpid(p, nullptr, 0);
    }
  }
};

// Waits up to 60 s for pid; its exit code and peak resident memory in MB.
int wait_rank(Reaper& r, pid_t pid, long* peak_mb) {
  rusage ru{};
  int status = 0;
  const Deadline d = Deadline::after(Millis(60000));
  while (wait4(pid, &status, WNOHANG, &ru) != pid) {
    if (d.expired()) return -1;  // the Reaper kills it
    std::this_thread::sleep_for(Millis(20));
  }
  std::erase(r.pids, pid);
  *peak_mb = ru.ru_maxrss / 1024;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

template <class T>
void append(std::string& b, T v) {
  b.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// Client i: the store's handshake, then a SET claiming a 4 GiB key, a 64 MiB value (1 KiB of
// it sent), or a 1 MiB value (the bound; 256 KiB sent), and it holds its connection.
comm::Socket hostile(int port, int i) {
  comm::Socket s = comm::connect_tcp("127.0.0.1", port, Deadline::after(Millis(30000)), "hostile");
  std::string req;
  append<uint32_t>(req, 0x53474E45);
  append<uint32_t>(req, 1);
  append<uint8_t>(req, 1);
  if (i % 5 < 2) {
    append<uint32_t>(req, 0xFFFFFFF0u);
  } else {
    append<uint32_t>(req, 3);
    req += "key";
    append<uint32_t>(req, i % 5 < 4 ? 64u << 20 : 1u << 20);
    req += std::string(i % 5 < 4 ? 1024 : 256 << 10, 'x');
  }
  comm::send_all(s, req.data(), req.size(), Deadline::after(Millis(5000)), "store");
  return s;
}

class StoreAttack : public TrainTest {};

TEST_F(StoreAttack, FiftyHostileClientsChangeNeitherMemoryNorWeights) {
  Reaper reaper;
  auto job = [&](bool attack, const std::string& save, long* peak_mb) {
    const int p = port();
    const std::string args =
        "--device cpu --model linear --batch-size 32 --steps 8 --timeout 60 "
        "--data-dir " +
        data_ + " --save " + save;
    const pid_t r0 = spawn_rank(0, p, args, save + ".rank0.log");
    reaper.pids.push_back(r0);
    std::vector<comm::Socket> clients;
    if (attack) {
      for (int i = 0; i < 50; ++i) clients.push_back(hostile(p, i));
      // Rank 0 has read every claim once it hangs up on the 40 over the bounds.
      const Deadline d = Deadline::after(Millis(10000));
      for (size_t i = 0; i < clients.size(); ++i) {
        if (i % 5 >= 4) continue;
        char c;
        for (ssize_t n; !d.expired(); std::this_thread::sleep_for(Millis(5)))
          if ((n = recv(clients[i].fd(), &c, 1, MSG_DONTWAIT)) == 0 || (n < 0 && errno != EAGAIN))
            break;
      }
      std::printf("[rank 0 under attack, before rank 1 starts] VmRSS %ld MB, VmHWM %ld MB\n",
                  proc_status_kb("VmRSS", std::to_string(r0)) / 1024,
                  proc_status_kb("VmHWM", std::to_string(r0)) / 1024);
    }
    const pid_t r1 = spawn_rank(1, p, args, save + ".rank1.log");
    reaper.pids.push_back(r1);
    long peak1 = 0;
    EXPECT_EQ(wait_rank(reaper, r0, peak_mb), 0) << read_text(save + ".rank0.log");
    EXPECT_EQ(wait_rank(reaper, r1, &peak1), 0) << read_text(save + ".rank1.log");
    return read_text(save + ".rank0.log");
  };
  long calm_mb = 0, attacked_mb = 0;
  job(false, path("calm.safetensors"), &calm_mb);
  const std::string log = job(true, path("attacked.safetensors"), &attacked_mb);
  std::printf("[rank 0 peak RSS] undisturbed %ld MB, under attack %ld MB\n", calm_mb, attacked_mb);
  EXPECT_LT(attacked_mb, calm_mb + 50);
  expect_same_bits(path("calm.safetensors"), path("attacked.safetensors"));
  EXPECT_NE(log.find("refused a connection from 127.0.0.1"), std::string::npos) << log;
  EXPECT_NE(log.find("a key of 4294967280 bytes (at most 4096)"), std::string::npos) << log;
}

}  // namespace
}  // namespace engine::testing
