// comm/rendezvous/torch_store.h: a client of PyTorch's c10d TCPStore, as one more Store. torchrun's
// static rendezvous (its default) has the agent serve a TCPStore on MASTER_ADDR:MASTER_PORT and
// starts the workers with TORCHELASTIC_USE_AGENT_STORE=True: every rank, 0 included, is then a
// client, with its keys under torch's PrefixStore("/worker/attempt_<TORCHELASTIC_RESTART_COUNT>").
//
// Two wire protocols exist, picked per server on the first connection:
//   Legacy     torch 1.x to 2.0 (Debian's 1.13): queries SET 0, COMPARE_SET 1, GET 2, ADD 3,
//              CHECK 4, WAIT 5, GETNUMKEYS 6; a wait cannot be cancelled.
//   Validated  torch >= 2.1 (pull request 107607): every connection first sends VALIDATE (0) with
//              the magic 0x3C85F7CE; the other queries are shifted by one (SET 1 .. GETNUMKEYS 7),
//              CANCEL_WAIT is 12 (PING 13 since 2.5, unused here).
// A value is a u64 length and bytes, integers are little-endian. The probe sends GETNUMKEYS (6)
// bytes only, harmless to every server: a legacy server answers each with its key count; a
// validated server closes the connection, at once (TCPStoreBackend) or when more bytes arrive
// (the libuv backend, which keeps silent after a first query that is not VALIDATE and then parses
// the bytes again as a WAIT with an impossible key count). Closed without an answer = Validated.
// Every read has a deadline, lengths from the server are bounded, and a failure is one error
// naming the store's address and the operation.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/base/store.h"
#include "comm/transport/socket.h"

namespace engine::comm {

enum class TorchProtocol { Unknown, Legacy, Validated };
const char* torch_protocol_name(TorchProtocol p);

class TorchStore : public Store {
 public:
  // Connects to host:port (retrying refused connections until `timeout`) and, when `protocol` is
  // Unknown, finds out which one the server speaks. Keys go on the wire as torch's
  // PrefixStore(prefix, TCPStore) sends them: "/" + prefix + "/" + key ("/" + key with no prefix).
  TorchStore(const std::string& host, int port, const std::string& prefix, Millis timeout,
             TorchProtocol protocol = TorchProtocol::Unknown);
  ~TorchStore() override;
  using Store::wait;
  void set(const std::string& key, const std::string& value) override;
  // As torch's get: waits up to timeout() for the key, then reads it.
  std::string get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  std::string describe() const override;

  TorchProtocol protocol() const;
  // This end's address as the store sees it: the interface that reaches MASTER_ADDR.
  std::string local_host() const;
  std::string wire_key(const std::string& key) const;

 private:
  template <class F>
  auto call(const std::string& what, Millis wait_part, F&& body);
  void connect(const Deadline& dl);
  TorchProtocol probe(const Deadline& dl);
  void send_validate(const Deadline& dl);
  uint8_t query(uint8_t legacy_number) const;
  void send(const std::string& bytes, const Deadline& dl);
  void recv(void* dst, size_t n, const Deadline& dl);
  uint8_t recv_u8(const Deadline& dl);
  bool wait_reply(const Deadline& dl);  // true once the server sent something
  void cancel_wait(const Deadline& dl, bool* keys_arrived);

  std::string host_;
  int port_;
  std::string prefix_;
  mutable std::mutex mu_;
  TorchProtocol protocol_;
  Socket sock_;
  std::string local_host_;
};

// torchrun's static rendezvous: when TORCHELASTIC_USE_AGENT_STORE is "True", the agent's store at
// host:port with the attempt prefix of TORCHELASTIC_RESTART_COUNT; otherwise nullptr.
std::shared_ptr<Store> torch_agent_store_from_env(const std::string& host, int port,
                                                  Millis timeout);

}  // namespace engine::comm
