// comm/rendezvous/tcp_store.h: the Store served over TCP by rank 0 (tcp://host:port and env://'s
// MASTER_ADDR and MASTER_PORT). Rank 0 runs a TcpStoreServer (one thread per client) and, like
// every rank, talks to it through a TcpStore client. A connection that does not open with the
// store's handshake (garbage bytes, a stranger, another program) is refused and logged on stderr;
// the job goes on.
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/base/store.h"
#include "comm/transport/socket.h"

namespace engine::comm {

// Bounds that keep strangers from exhausting rank 0 (a rank's keys are tens of bytes, its values
// a few hundred: rendezvous entries, shared-memory names, NCCL's id):
//   - a connection must complete the handshake within 10 s, and each request within 10 s of its
//     first byte (StoreLimits); between requests a client may stay idle (a rank keeps its
//     connection);
//   - a key is at most 4 KiB, a value 1 MiB, a request 8 MiB, and a length is read in pieces as
//     the bytes arrive (a claimed length allocates nothing); everything stored at most 64 MiB;
//   - at most 1024 connections at once (a thread each); finished ones are reaped.
// A connection over a bound is refused and logged (the first 20 refusals; then one line says
// that later ones are not).
struct StoreLimits {
  Millis handshake{10000};  // from accepting a connection to its handshake
  Millis request{10000};    // from a request's first byte to its last
  size_t max_connections = 1024;
};

class TcpStoreServer {
 public:
  // Binds host:port ("", "0.0.0.0" or "::" = all interfaces); a port in use is a clear error.
  TcpStoreServer(const std::string& bind_host, int port, StoreLimits limits = {});
  ~TcpStoreServer();
  int port() const { return port_; }
  int connections() const;  // open now (tests)

 private:
  struct Client {
    std::thread thread;
    std::atomic<bool> done{false};
  };
  void accept_loop();
  void reap();  // joins the threads of finished clients; threads_mu_ held
  void serve(Socket s);
  void refuse(const std::string& who, const std::string& why);
  // One request; "" with *why set when it is refused.
  std::string handle(uint8_t op, const std::function<bool(void*, size_t)>& read, std::string* why);
  // get (one key, its value) or wait (the keys still missing), after waiting up to `ms`.
  std::string wait_reply(bool get, const std::vector<std::string>& keys, int64_t ms);
  // Both false when the store is full.
  bool add(const std::string& key, int64_t by, int64_t* sum);
  bool set(const std::string& key, const std::string& value);
  std::vector<std::string> missing_of(const std::vector<std::string>& keys) const;  // mu_ held

  const StoreLimits limits_;
  Socket listener_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> refusals_{0};
  std::thread acceptor_;
  mutable std::mutex threads_mu_;
  std::list<Client> clients_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> kv_;
  size_t stored_ = 0;  // bytes of kv_'s keys and values; mu_ held
};

class TcpStore : public Store {
 public:
  // Connects to host:port, retrying until `timeout`. With serve = true it first starts the server
  // on bind_host:port (rank 0).
  TcpStore(const std::string& host, int port, bool serve, Millis timeout,
           const std::string& bind_host = "");
  ~TcpStore() override;
  using Store::wait;
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  std::string describe() const override;

  // This end's address as the store sees it: the interface that reaches rank 0.
  std::string local_host() const { return sock_.local_host(); }
  int port() const { return port_; }
  const std::string& host() const { return host_; }  // rank 0's address, as given

 private:
  std::string request(const std::string& req, Millis wait_part);
  std::string host_;
  int port_;
  std::unique_ptr<TcpStoreServer> server_;
  std::mutex mu_;
  Socket sock_;
  std::string buf_;  // reply bytes
};

}  // namespace engine::comm
