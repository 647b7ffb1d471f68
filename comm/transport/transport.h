// comm/transport/transport.h: point-to-point messaging between the ranks of one communicator, over
// any mix of channels (TCP sockets, shared-memory rings, in-process rings). Two independent lanes
// per peer: collectives, and point-to-point send/recv, so that user messages never interleave with
// a collective's. Messages on one (peer, lane) arrive in the order they were posted.
//
// isend/irecv only post a request; any thread that waits drives every pending request forward
// (one driver at a time, others wait to be told). A receive may reduce the arriving bytes into its
// buffer (dst op= payload) instead of copying them, straight out of a shared-memory ring or through
// a small per-channel scratch buffer for sockets: that is how the ring overlaps receive and add.
//
// Every received header is checked against the expected one; a difference is an engine::Error that
// names both ranks and both calls. Any error breaks the transport for good: abort() sends a best-
// effort Abort frame with the reason to every peer and closes every channel, so that peers fail
// promptly with that reason instead of waiting for their timeout.
//
// The posting, waiting and aborting calls are virtual for GroupTransport
// (comm/groups/group_transport.h): a split() group's ranks over this transport's channels.
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/base/deadline.h"
#include "comm/base/frame.h"
#include "comm/base/progress.h"
#include "comm/base/reduce.h"
#include "comm/transport/channel.h"
#include "comm/transport/shm_ring.h"
#include "comm/transport/socket.h"

namespace engine::comm {

// Which of a peer's two lanes (channels) a message takes.
enum class Lane : int { Collective = 0, P2P = 1 };

struct Request {
  bool is_send = false;
  int peer = -1;
  Lane lane = Lane::Collective;
  FrameHeader hdr;  // send: written; recv: expected
  FrameHeader got;  // recv: received
  const std::byte* src = nullptr;
  std::byte* dst = nullptr;
  size_t nbytes = 0;
  bool reduce = false;
  DType dtype = DType::F32;
  ReduceOp op = ReduceOp::Sum;
  // progress
  size_t hdr_done = 0, done = 0, pad_done = 0;
  bool complete = false;
  std::string abort_reason;  // an Abort frame's text while it is being read
};
using RequestPtr = std::shared_ptr<Request>;

class Transport {
 public:
  // kind: "tcp", "shm", "mem", "shm+tcp" (for messages and tests).
  Transport(int rank, int world, std::string kind);
  virtual ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // Set-up (before use).
  void set_channel(int peer, Lane s, std::unique_ptr<Channel> ch);
  // For peers reached through memory rings: a socket whose end-of-stream means the peer died.
  void set_liveness(int peer, Socket s);
  // This rank's doorbell (rings in memory), and how long a waiter spins before it sleeps; with
  // yield, it spins by sched_yield() (more ranks than cores: let the rank we wait for run).
  void set_doorbell(Doorbell* bell) { bell_ = bell; }
  void set_spin(int us, bool yield) {
    spin_us_ = us;
    spin_yield_ = yield;
  }
  // Who stopped making progress (comm/health/blame.h): asked once, with the lock held, when a wait
  // times out or a peer is lost; returns "rank 2 is frozen (...)" or "" when no rank can be blamed.
  void set_blame(std::function<std::string()> blame) { blame_ = std::move(blame); }
  // This rank's collective counters (the Communicator keeps them; a health endpoint reports them).
  Progress& progress() { return *progress_; }
  void set_progress(std::shared_ptr<Progress> p) { progress_ = std::move(p); }
  // Keeps an object (a mapping, a fabric) alive as long as the transport.
  void keep_alive(std::shared_ptr<void> p) { keep_.push_back(std::move(p)); }

  int rank() const { return rank_; }
  int world() const { return world_; }
  const std::string& kind() const { return kind_; }

  // Posts a frame: header h (h.nbytes payload bytes from data). data must stay valid until done.
  virtual RequestPtr isend(int peer, Lane s, const FrameHeader& h, const void* data);
  // Posts a receive of a frame that must match `expect` into dst (expect.nbytes bytes); with
  // reduce, dst[i] = dst[i] op payload[i] instead of a copy.
  virtual RequestPtr irecv(int peer, Lane s, const FrameHeader& expect, void* dst);
  virtual RequestPtr irecv_reduce(int peer, Lane s, const FrameHeader& expect, void* dst, DType dt,
                                  ReduceOp op);
  // Drives progress until r completes; throws engine::Error (peer gone, mismatch, abort) or
  // engine::TimeoutError naming who stopped (set_blame), else the peer waited for.
  virtual void wait(const RequestPtr& r, Deadline deadline);
  virtual bool test(const RequestPtr& r);

  // Breaks the transport: best-effort Abort frames with the reason, then every channel closed.
  virtual void abort(const std::string& reason) noexcept;
  virtual bool broken() const;
  // The first error that broke it ("" while it works): names who was lost, when a rank was.
  std::string broken_reason() const;

 private:
  struct PeerLane {  // one (peer, lane)
    std::unique_ptr<Channel> ch;
    std::deque<RequestPtr> sends, recvs;
    std::vector<std::byte> scratch;  // socket reduce: bytes read, not yet reduced
    size_t scratch_fill = 0;
    bool send_mid_frame() const { return !sends.empty() && sends.front()->hdr_done > 0; }
  };
  PeerLane& lane(int peer, Lane s) { return lanes_[peer * 2 + static_cast<int>(s)]; }
  RequestPtr post(RequestPtr r);
  bool progress_locked();  // true when anything moved; throws on a broken lane
  bool progress_send(PeerLane& l);
  bool progress_recv(PeerLane& l, int peer);
  void check_header(const Request& r);
  void block(std::unique_lock<std::mutex>& lk, Deadline deadline, uint32_t bell_seen);
  void check_liveness();
  // The reason in an Abort frame that `peer` left unread on its collective lane, or "".
  std::string salvage_abort(int peer);
  // Breaks the transport with msg and throws it (TimeoutError when timeout). root_cause is what the
  // Abort frames tell the peers (msg when empty).
  [[noreturn]] void fail(const std::string& msg, bool timeout, const std::string& root_cause);
  [[noreturn]] void fail_channel(int peer, const ChannelError& e, const Request& during);
  [[noreturn]] void fail_timeout(const Request& r, Deadline deadline);
  void abort_locked(const std::string& reason) noexcept;
  std::string unusable() const;
  std::string who(int peer) const { return "rank " + std::to_string(peer); }

  int rank_, world_;
  std::string kind_;
  std::vector<PeerLane> lanes_;
  std::vector<Socket> liveness_;
  std::vector<bool> peer_dead_;
  Doorbell* bell_ = nullptr;
  int spin_us_ = 20;
  bool spin_yield_ = false;
  std::vector<std::shared_ptr<void>> keep_;
  std::function<std::string()> blame_;
  std::shared_ptr<Progress> progress_ = std::make_shared<Progress>();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool driving_ = false;
  std::string broken_;  // the first error; non-empty = broken
};

}  // namespace engine::comm
