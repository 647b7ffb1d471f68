// io/torchelastic_error.h: torchelastic's error file. torchrun's agent gives every worker a path in
// TORCHELASTIC_ERROR_FILE; a worker that fails writes there the JSON that PyTorch's @record
// (ErrorHandler.record_exception) writes, and torchrun's failure summary then shows that message
// and names the rank with the smallest timestamp as the root cause. apps/program.cpp's run_program
// writes it for every program that stops on an error.
#pragma once
#include <cstdint>
#include <string>

#include "io/json.h"

namespace engine {

// {"message": {"message": M, "extraInfo": {"py_callstack": M, "timestamp": "<unix seconds>"}}},
// as torch writes it. torch reads "message" and the timestamp (a decimal string) and shows
// "py_callstack" as the traceback: we have no Python stack, the message stands in for it.
Json torchelastic_error(const std::string& message, int64_t unix_seconds);

// True when the message names a rank other than `rank` ("rank 1 is gone", "aborted by rank 2",
// "ranks [1, 3] ... never arrived"; "local rank N" is not a rank): the failure is a consequence of
// that rank's.
bool names_another_rank(const std::string& message, int rank);

// When TORCHELASTIC_ERROR_FILE is set, writes torchelastic_error(message, now) there. A failure
// that names another rank than this one ($RANK) is dated one second later: torchrun compares whole
// seconds, and the rank that failed first must win a tie; and it returns only after 0.5 s, so that
// the rank that failed first has exited when torchrun looks (torchrun leaves ranks still running
// out of its summary). Never throws; a file that cannot be written is reported on stderr.
void write_torchelastic_error_file(const std::string& message);

}  // namespace engine
