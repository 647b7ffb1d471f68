// kernels/cpu/loss.h: the loss kernels' other name: log_softmax, nll_loss, cross_entropy and
// argmax live in kernels/cpu/softmax.h (one file per op family); this header includes it.
#pragma once
#include "kernels/cpu/softmax.h"
