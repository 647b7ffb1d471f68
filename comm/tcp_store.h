// comm/tcp_store.h: the Store served over TCP by rank 0 (tcp://host:port and env://'s MASTER_ADDR
// and MASTER_PORT). Rank 0 runs a TcpStoreServer (one thread per client) and, like every rank,
// talks to it through a TcpStore client. A connection that does not open with the store's handshake
// (garbage bytes, a stranger, another program) is refused and logged on stderr; the job goes on.
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/socket.h"
#include "comm/store.h"

namespace engine::comm {

class TcpStoreServer {
 public:
  // Binds host:port ("" = all interfaces); a port in use is a clear engine::Error.
  TcpStoreServer(const std::string& bind_host, int port);
  ~TcpStoreServer();
  int port() const { return port_; }

 private:
  void accept_loop();
  void serve(Socket s);
  std::string handle(uint8_t op, const std::function<bool(void*, size_t)>& read, bool* ok);
  // get (one key, its value) or wait (the keys still missing), after waiting up to `ms`.
  std::string wait_reply(bool get, const std::vector<std::string>& keys, int64_t ms);
  int64_t add(const std::string& key, int64_t by);
  std::vector<std::string> missing_of(const std::vector<std::string>& keys) const;  // mu_ held

  Socket listener_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::mutex threads_mu_;
  std::vector<std::thread> clients_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> kv_;
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
