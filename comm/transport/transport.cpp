// comm/transport/transport.cpp: see transport.h.
#include "comm/transport/transport.h"

#include <immintrin.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace engine::comm {

namespace {
constexpr size_t kHeader = sizeof(FrameHeader);
constexpr size_t kScratchBytes = 256 << 10;
constexpr size_t kMaxAbortText = 64 << 10;
const std::byte kZeros[8] = {};
}  // namespace

Transport::Transport(int rank, int world, std::string kind)
    : rank_(rank),
      world_(world),
      kind_(std::move(kind)),
      lanes_(2 * world),
      liveness_(world),
      peer_dead_(world, false) {}

Transport::~Transport() {
  for (auto& l : lanes_)
    if (l.ch) l.ch->close();
  for (auto& s : liveness_) s.close();
}

void Transport::set_channel(int peer, Lane s, std::unique_ptr<Channel> ch) {
  lane(peer, s).ch = std::move(ch);
}

void Transport::set_liveness(int peer, Socket s) {
  liveness_[peer] = std::move(s);
}

bool Transport::broken() const {
  std::lock_guard lk(mu_);
  return !broken_.empty();
}

std::string Transport::broken_reason() const {
  std::lock_guard lk(mu_);
  return broken_;
}

std::string Transport::unusable() const {
  return "rank " + std::to_string(rank_) +
         ": the communicator is unusable after an earlier error: " + broken_;
}

// ---------------------------------------------------------------------------------------------
// Posting

RequestPtr Transport::post(RequestPtr r) {
  std::unique_lock lk(mu_);
  if (!broken_.empty()) throw Error(unusable());
  ENGINE_CHECK(r->peer >= 0 && r->peer < world_ && r->peer != rank_, "rank ", rank_,
               ": bad peer rank ", r->peer, " (world size ", world_, ")");
  PeerLane& l = lane(r->peer, r->lane);
  ENGINE_CHECK(l.ch, "rank ", rank_, ": no channel to rank ", r->peer);
  auto& q = r->is_send ? l.sends : l.recvs;
  q.push_back(r);
  if (!driving_) {
    // Eager: move bytes now so that sends leave before anyone waits.
    try {
      bool moved = r->is_send ? progress_send(l) : progress_recv(l, r->peer);
      if (moved) cv_.notify_all();
    } catch (const ChannelError& e) {
      fail_channel(r->peer, e, *r);
    }
  } else if (bell_) {
    bell_->ring();  // wake the driver so that it looks at the new request
  }
  return r;
}

RequestPtr Transport::isend(int peer, Lane s, const FrameHeader& h, const void* data) {
  auto r = std::make_shared<Request>();
  r->is_send = true;
  r->peer = peer;
  r->lane = s;
  r->hdr = h;
  r->src = static_cast<const std::byte*>(data);
  r->nbytes = h.nbytes;
  return post(std::move(r));
}

RequestPtr Transport::irecv(int peer, Lane s, const FrameHeader& expect, void* dst) {
  auto r = std::make_shared<Request>();
  r->peer = peer;
  r->lane = s;
  r->hdr = expect;
  r->dst = static_cast<std::byte*>(dst);
  r->nbytes = expect.nbytes;
  return post(std::move(r));
}

RequestPtr Transport::irecv_reduce(int peer, Lane s, const FrameHeader& expect, void* dst, DType dt,
                                   ReduceOp op) {
  auto r = std::make_shared<Request>();
  r->peer = peer;
  r->lane = s;
  r->hdr = expect;
  r->dst = static_cast<std::byte*>(dst);
  r->nbytes = expect.nbytes;
  r->reduce = true;
  r->dtype = dt;
  r->op = op;
  ENGINE_CHECK(expect.nbytes % dtype_size(dt) == 0, "irecv_reduce: ", expect.nbytes,
               " bytes is not a whole number of ", dtype_name(dt));
  return post(std::move(r));
}

// ---------------------------------------------------------------------------------------------
// Progress

bool Transport::progress_send(PeerLane& l) {
  bool moved = false;
  while (!l.sends.empty()) {
    Request& r = *l.sends.front();
    const size_t pad = frame_pad(r.nbytes);
    iovec iov[3];
    int n = 0;
    if (r.hdr_done < kHeader)
      iov[n++] = {reinterpret_cast<char*>(&r.hdr) + r.hdr_done, kHeader - r.hdr_done};
    if (r.done < r.nbytes) iov[n++] = {const_cast<std::byte*>(r.src) + r.done, r.nbytes - r.done};
    if (r.pad_done < pad)
      iov[n++] = {const_cast<std::byte*>(kZeros) + r.pad_done, pad - r.pad_done};
    size_t w = n ? l.ch->writev_some(iov, n) : 0;
    if (w) moved = true;
    size_t k = std::min(w, kHeader - r.hdr_done);
    r.hdr_done += k;
    w -= k;
    k = std::min(w, r.nbytes - r.done);
    r.done += k;
    w -= k;
    r.pad_done += w;
    if (r.hdr_done == kHeader && r.done == r.nbytes && r.pad_done == pad) {
      r.complete = true;
      l.sends.pop_front();
      continue;
    }
    break;  // the channel is full
  }
  return moved;
}

void Transport::check_header(const Request& r) {
  const FrameHeader& g = r.got;
  const FrameHeader& e = r.hdr;
  const std::string me = who(rank_), him = who(r.peer);
  if (g.magic != FrameHeader::kMagic || (g.kind != static_cast<uint8_t>(FrameKind::Data) &&
                                         g.kind != static_cast<uint8_t>(FrameKind::Abort)))
    fail(me + " received bytes from " + him + " that are not a frame of this engine: the stream " +
             "is corrupt",
         false, "");
  if (g.kind == static_cast<uint8_t>(FrameKind::Abort)) {
    if (g.nbytes > kMaxAbortText)
      fail(me + " received a malformed abort frame from " + him, false, "");
    return;
  }
  const Fingerprint ef = e.fingerprint(), gf = g.fingerprint();
  if (ef.group != gf.group)
    fail("group mismatch: " + me + " expected " + ef.str() + " but " + him + " sent " + gf.str() +
             ": the two ranks called their communicators' (job's and groups') collectives in " +
             "different orders",
         false, "");
  if (r.lane == Lane::Collective) {
    if (ef.seq != gf.seq)
      fail("collective mismatch: " + me + " is at " + ef.str() + " but " + him + " sent " +
               gf.str() + ": the ranks have called different numbers of collectives",
           false, "");
    if (!ef.same_call(gf))
      fail("collective mismatch: " + me + " called " + ef.str() + " but " + him + " called " +
               gf.str(),
           false, "");
  } else if (ef.seq != gf.seq || !ef.same_call(gf)) {
    fail("point-to-point mismatch: " + me + " expected " + ef.str() + " from " + him + " but " +
             him + " sent " + gf.str(),
         false, "");
  }
  if (g.step != e.step || g.nbytes != e.nbytes)
    fail("internal error in " + ef.str() + ": " + him + " sent message " + std::to_string(g.step) +
             " of " + std::to_string(g.nbytes) + " bytes where " + me + " expected message " +
             std::to_string(e.step) + " of " + std::to_string(e.nbytes) + " bytes",
         false, "");
}

bool Transport::progress_recv(PeerLane& l, int peer) {
  bool moved = false;
  Channel& ch = *l.ch;
  while (!l.recvs.empty()) {
    Request& r = *l.recvs.front();
    if (r.hdr_done < kHeader) {
      size_t k = ch.read_some(reinterpret_cast<char*>(&r.got) + r.hdr_done, kHeader - r.hdr_done);
      if (k == 0) break;
      moved = true;
      r.hdr_done += k;
      if (r.hdr_done < kHeader) break;
      check_header(r);
    }
    if (r.got.kind == static_cast<uint8_t>(FrameKind::Abort)) {
      // Read the reason, then fail with it.
      const size_t n = r.got.nbytes;
      r.abort_reason.resize(n);
      while (r.done < n) {
        size_t k = ch.read_some(r.abort_reason.data() + r.done, n - r.done);
        if (k == 0) return moved;
        r.done += k;
      }
      fail(who(rank_) + ": the collective was aborted by " + who(peer) + ": " + r.abort_reason,
           false, r.abort_reason);
    }
    const size_t es = dtype_size(r.dtype);
    while (r.done < r.nbytes) {
      size_t k = 0;
      if (!r.reduce) {
        k = ch.read_some(r.dst + r.done, r.nbytes - r.done);
      } else if (ch.can_peek()) {
        auto [p, len] = ch.peek();
        k = std::min(len, r.nbytes - r.done) / es * es;
        if (k) {
          reduce_into(r.dst + r.done, p, k / es, r.dtype, r.op);
          ch.consume(k);
        }
      } else {
        if (l.scratch.empty()) l.scratch.resize(kScratchBytes);
        size_t want =
            std::min(l.scratch.size() - l.scratch_fill, r.nbytes - r.done - l.scratch_fill);
        size_t got = ch.read_some(l.scratch.data() + l.scratch_fill, want);
        if (got == 0) break;
        moved = true;
        l.scratch_fill += got;
        k = l.scratch_fill / es * es;
        reduce_into(r.dst + r.done, l.scratch.data(), k / es, r.dtype, r.op);
        std::memmove(l.scratch.data(), l.scratch.data() + k, l.scratch_fill - k);
        l.scratch_fill -= k;
        r.done += k;
        continue;
      }
      if (k == 0) break;
      moved = true;
      r.done += k;
    }
    if (r.done < r.nbytes) break;
    const size_t pad = frame_pad(r.nbytes);
    while (r.pad_done < pad) {
      std::byte sink[8];
      size_t k = ch.read_some(sink, pad - r.pad_done);
      if (k == 0) return moved;
      moved = true;
      r.pad_done += k;
    }
    r.complete = true;
    l.recvs.pop_front();
  }
  return moved;
}

bool Transport::progress_locked() {
  bool moved = false;
  for (int p = 0; p < world_; ++p) {
    if (p == rank_) continue;
    for (int s = 0; s < 2; ++s) {
      PeerLane& l = lanes_[p * 2 + s];
      if (!l.ch || (l.sends.empty() && l.recvs.empty())) continue;
      try {
        if (!l.sends.empty()) moved |= progress_send(l);
        if (!l.recvs.empty()) moved |= progress_recv(l, p);
      } catch (const ChannelError& e) {
        fail_channel(p, e, !l.recvs.empty() ? *l.recvs.front() : *l.sends.front());
      }
    }
  }
  return moved;
}

std::string Transport::salvage_abort(int peer) {
  PeerLane& l = lane(peer, Lane::Collective);
  if (!l.ch) return "";
  try {
    // Skip the rest of the frame being read, then walk whole frames.
    size_t off = 0;
    if (!l.recvs.empty()) {
      const Request& r = *l.recvs.front();
      if (r.hdr_done > 0 && r.hdr_done < kHeader) return "";
      if (r.hdr_done == kHeader) {
        if (r.got.kind != static_cast<uint8_t>(FrameKind::Data)) return "";
        off = r.nbytes - r.done - l.scratch_fill + frame_pad(r.nbytes) - r.pad_done;
      }
    }
    for (int frames = 0; frames < 1024; ++frames) {
      FrameHeader h;
      if (l.ch->peek_at(off, &h, kHeader) < kHeader || h.magic != FrameHeader::kMagic) return "";
      if (h.kind == static_cast<uint8_t>(FrameKind::Abort)) {
        if (h.nbytes > kMaxAbortText) return "";
        std::string why(h.nbytes, '\0');
        if (l.ch->peek_at(off + kHeader, why.data(), why.size()) < why.size()) return "";
        return why;
      }
      off += kHeader + h.nbytes + frame_pad(h.nbytes);
    }
  } catch (...) {
  }
  return "";
}

// ---------------------------------------------------------------------------------------------
// Waiting

void Transport::check_liveness() {
  for (int p = 0; p < world_; ++p) {
    if (!liveness_[p].valid() || peer_dead_[p]) continue;
    char c;
    ssize_t n = recv(liveness_[p].fd(), &c, 1, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      peer_dead_[p] = true;
      for (int s = 0; s < 2; ++s)
        if (lane(p, static_cast<Lane>(s)).ch) lane(p, static_cast<Lane>(s)).ch->mark_peer_dead();
    }
  }
}

void Transport::block(std::unique_lock<std::mutex>& lk, Deadline deadline, uint32_t bell_seen) {
  std::vector<pollfd> fds;
  std::vector<int> fd_lane;  // lane index of each fd, or -1 for a liveness socket
  bool ring_pending = false;
  for (int p = 0; p < world_; ++p) {
    bool pending = false;
    for (int s = 0; s < 2; ++s) {
      PeerLane& l = lanes_[p * 2 + s];
      if (!l.ch || (l.sends.empty() && l.recvs.empty())) continue;
      pending = true;
      int fd = l.ch->poll_fd();
      if (fd < 0) {
        ring_pending = true;
        continue;
      }
      short ev = (l.sends.empty() ? 0 : POLLOUT | POLLRDHUP) | (l.recvs.empty() ? 0 : POLLIN);
      fds.push_back({fd, ev, 0});
      fd_lane.push_back(p * 2 + s);
    }
    if (pending && liveness_[p].valid() && !peer_dead_[p]) {
      fds.push_back({liveness_[p].fd(), POLLIN, 0});
      fd_lane.push_back(-1);
    }
  }
  lk.unlock();
  if (ring_pending && bell_) {
    // Memory rings: sleep on our doorbell; sockets (liveness, mixed transports) are looked at
    // between slices.
    long slice_us = fds.empty() ? 20000 : 1000;
    slice_us = std::min<long>(slice_us, deadline.poll_ms() * 1000L);
    bell_->sleep(bell_seen, std::max<long>(slice_us, 1));
    if (!fds.empty()) poll(fds.data(), fds.size(), 0);
  } else {
    poll(fds.data(), fds.size(), deadline.poll_ms(50));
  }
  lk.lock();
  // A peer that hung up while we still have to send to it will never read: say so instead of
  // waiting for the timeout.
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fd_lane[i] < 0 || !(fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR))) continue;
    PeerLane& l = lanes_[fd_lane[i]];
    if (l.ch && !l.sends.empty()) l.ch->mark_peer_dead();
  }
  check_liveness();
}

void Transport::wait(const RequestPtr& r, Deadline deadline) {
  std::unique_lock lk(mu_);
  auto spin_until = Clock::now() + std::chrono::microseconds(spin_us_);
  while (true) {
    if (r->complete) return;
    if (!broken_.empty()) throw Error(unusable());
    if (driving_) {
      // Another thread drives; it tells us when something completes.
      cv_.wait_for(lk, Millis(5));
      if (!r->complete && broken_.empty() && deadline.expired()) fail_timeout(*r, deadline);
      continue;
    }
    driving_ = true;
    try {
      const uint32_t seen = bell_ ? bell_->seq.load() : 0;
      const bool moved = progress_locked();
      if (moved) {
        cv_.notify_all();
        spin_until = Clock::now() + std::chrono::microseconds(spin_us_);
      } else if (!r->complete) {
        if (deadline.expired()) fail_timeout(*r, deadline);
        if (Clock::now() < spin_until) {
          lk.unlock();
          if (spin_yield_) {
            sched_yield();
          } else {
            _mm_pause();
          }
          lk.lock();
        } else {
          block(lk, deadline, seen);
        }
      }
    } catch (...) {
      driving_ = false;
      cv_.notify_all();
      throw;
    }
    driving_ = false;
  }
}

bool Transport::test(const RequestPtr& r) {
  std::unique_lock lk(mu_);
  if (r->complete) return true;
  if (!broken_.empty()) throw Error(unusable());
  if (!driving_) {
    driving_ = true;
    try {
      if (progress_locked()) cv_.notify_all();
    } catch (...) {
      driving_ = false;
      throw;
    }
    driving_ = false;
  }
  return r->complete;
}

// ---------------------------------------------------------------------------------------------
// Failure

void Transport::fail_channel(int peer, const ChannelError& e, const Request& during) {
  // A peer that aborted hangs up after its Abort frame: report its reason, not the hang-up.
  std::string why = salvage_abort(peer);
  if (!why.empty())
    fail(who(rank_) + ": the collective was aborted by " + who(peer) + ": " + why, false, why);
  const std::string seen = who(peer) + " " + e.what();
  const std::string during_fp = " (during " + during.hdr.fingerprint().str();
  // Who stopped, from every rank's health endpoint: the peer whose channel broke may only have
  // given up on a rank that stopped earlier.
  const std::string verdict = blame_ ? blame_() : "";
  if (verdict.empty()) fail(who(rank_) + ": " + seen + during_fp + ")", false, "");
  fail(who(rank_) + ": " + verdict + during_fp + "; " + who(rank_) + " saw: " + seen + ")", false,
       "");
}

void Transport::fail_timeout(const Request& r, Deadline deadline) {
  const std::string fp = r.hdr.fingerprint().str();
  const std::string after = who(rank_) + ": timed out after " + seconds_str(deadline.timeout());
  // A peer that gave up first left its reason (and verdict) in our channel: report that.
  for (int p = 0; p < world_; ++p) {
    if (p == rank_) continue;
    if (std::string why = salvage_abort(p); !why.empty())
      fail(who(rank_) + ": the collective was aborted by " + who(p) + ": " + why, false, why);
  }
  const std::string verdict = blame_ ? blame_() : "";
  if (!verdict.empty()) fail(after + " in " + fp + ": " + verdict, true, "");
  const std::string what = r.is_send ? " to receive " : " to send ";
  fail(after + " waiting for " + who(r.peer) + what + fp + " (message " +
           std::to_string(r.hdr.step) + ")",
       true, "");
}

void Transport::fail(const std::string& msg, bool timeout, const std::string& root_cause) {
  if (broken_.empty()) broken_ = msg;
  abort_locked(root_cause.empty() ? msg : root_cause);
  if (timeout) throw TimeoutError(msg);
  throw Error(msg);
}

void Transport::abort_locked(const std::string& reason) noexcept {
  if (broken_.empty()) broken_ = reason;
  std::string text = reason.substr(0, kMaxAbortText);
  FrameHeader h;
  h.kind = static_cast<uint8_t>(FrameKind::Abort);
  h.nbytes = text.size();
  const size_t pad = frame_pad(text.size());
  for (int p = 0; p < world_; ++p) {
    PeerLane& l = lanes_[p * 2];
    if (!l.ch) continue;
    // A half-written frame cannot be interrupted: the peer will see the channel close instead.
    if (!l.send_mid_frame() && !peer_dead_[p]) {
      iovec iov[3] = {
          {&h, sizeof h}, {text.data(), text.size()}, {const_cast<std::byte*>(kZeros), pad}};
      try {
        l.ch->writev_some(iov, 3);
      } catch (...) {
      }
    }
  }
  for (auto& l : lanes_)
    if (l.ch) l.ch->close();
  cv_.notify_all();
}

void Transport::abort(const std::string& reason) noexcept {
  std::lock_guard lk(mu_);
  abort_locked(reason);
}

}  // namespace engine::comm
