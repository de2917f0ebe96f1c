// The instruction set of an agent's sequential program.
//
//   (ACQUIRE, sem, n)                                   block until count >= n, then count -= n
//   (RELEASE, sem, n)                                   count += n (must stay <= maximum)
//   (COMPUTE, cycles, macs)                             busy for `cycles`
//   (TRANSFER, bytes, overhead, latency, links, drams)  DMA: setup, then packets over the resources
//   (LOOP, count, body_len)                             repeat the next body_len instructions
//
// In static mode every instruction carries one more field: its start cycle.
//
// InstrSpec is what a front end (the Python bindings) hands in, unvalidated; Simulator compiles it
// into Instr after checking every field.
#pragma once

#include <cstdint>
#include <vector>

namespace tsim {

enum Op : int { ACQUIRE = 0, RELEASE = 1, COMPUTE = 2, TRANSFER = 3, LOOP = 4 };

const char* op_name(int op);

struct InstrSpec {
    int op = -1;
    // ACQUIRE / RELEASE
    std::int64_t sem = 0;
    std::int64_t n = 0;
    // COMPUTE
    double cycles = 0.0;
    std::int64_t macs = 0;
    // TRANSFER
    std::int64_t bytes = 0;
    double overhead = 0.0;
    double latency = 0.0;
    std::vector<std::int64_t> links;
    std::vector<std::int64_t> drams;
    // LOOP
    std::int64_t count = 0;
    std::int64_t body_len = 0;
    // static mode
    bool has_start = false;
    double start = 0.0;
};

// A validated instruction. Resource ids are indices into Simulator's resource table; a
// transfer's resources are the range [res_begin, res_begin + res_count) of its agent's pool.
struct Instr {
    int op = -1;
    std::int32_t sem = -1;
    std::int64_t n = 0;            // ACQUIRE/RELEASE units
    double cycles = 0.0;           // COMPUTE
    std::int64_t macs = 0;         // COMPUTE
    std::int64_t bytes = 0;        // TRANSFER
    double overhead = 0.0;         // TRANSFER
    double latency = 0.0;          // TRANSFER
    std::uint32_t res_begin = 0;   // TRANSFER
    std::uint32_t res_count = 0;   // TRANSFER
    double min_bw = 0.0;           // TRANSFER: bottleneck bandwidth of its resources
    std::int64_t count = 0;        // LOOP iterations
    std::int64_t body_len = 0;     // LOOP body length
    bool has_start = false;        // static mode
    double start = 0.0;
};

struct Program {
    std::vector<Instr> instrs;
    std::vector<std::int32_t> res_pool;  // resource indices used by TRANSFERs
};

}  // namespace tsim
