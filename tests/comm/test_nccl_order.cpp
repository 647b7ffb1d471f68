// tests/comm/test_nccl_order.cpp: issue 14, finding 6: NCCL's send and recv of CUDA tensors run
// in call order with the Communicator's queued collectives (an all_reduce_async in flight), so
// every rank issues its NCCL calls in the same order; before, they ran on the caller's thread
// beside the queued all_reduce, and NCCL answers two orders with a hang (here: the timeout).
// Two ranks as threads, each on its own GPU; skips below 2 GPUs.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "comm/backends/nccl/nccl_group.h"
#include "comm/rendezvous/mem_store.h"
#include "comm/rendezvous/rendezvous.h"
#include "core/device.h"
#include "tests/comm/comm_test_util.h"

namespace engine::comm {
namespace {

TEST(NcclOrder, SendAndRecvRunAfterTheQueuedAllReduce) {
  const int n = cuda_device_count();
  if (n < 2)
    GTEST_SKIP() << "NCCL needs a GPU per rank: 2 wanted, " << n << " here "
                 << cuda_unavailable_reason();
  CommOptions o;
  o.timeout = Millis(30000);
  auto comms = make_mem_communicators(2, o);
  auto store = std::make_shared<MemStore>();
  testing::expect_no_errors(testing::run_threads(2, [&](int r) {
    NcclOptions no;
    no.timeout = o.timeout;
    comms[r]->attach_nccl(std::make_unique<NcclGroup>(store, r, 2, r, no));
    const int64_t big = int64_t{1} << 24;  // long enough to still run when send is called
    for (int iter = 0; iter < 20; ++iter) {
      Tensor a = Tensor::full({big}, 1.f + r, Device::cuda(r));
      Work w = comms[r]->all_reduce_async(a);
      Tensor m = r == 0 ? Tensor::full({1000}, 7.f + iter, Device::cuda(0))
                        : Tensor::zeros({1000}, DType::F32, Device::cuda(1));
      if (r == 0)
        comms[r]->send(m, 1);
      else
        comms[r]->recv(m, 0);
      w.wait();
      const std::vector<float> got = a.flat_slice(big - 4, 4).to(Device::cpu()).to_vector();
      ASSERT_EQ(got, std::vector<float>(4, 3.f)) << "iteration " << iter;
      if (r == 1) {
        ASSERT_EQ(m.to(Device::cpu()).to_vector(), std::vector<float>(1000, 7.f + iter));
      }
    }
  }));
}

}  // namespace
}  // namespace engine::comm
