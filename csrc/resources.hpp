// Shared resources of the modelled machine: bandwidth resources (NoC links, DRAM channels) and
// counting semaphores. These hold the static description plus the per-run state; the engine
// resets the run state at the start of every run, so a Simulator can be run many times.
#pragma once

#include <cstdint>
#include <deque>
#include <string>

namespace tsim {

enum class ResourceKind : std::uint8_t { Link, Dram };

// A bandwidth resource: one direction of a NoC link, or one DRAM channel. A packet of `size`
// bytes occupies it for size / bytes_per_cycle cycles; packets are served first come, first
// served in event order.
struct Resource {
    std::string name;
    ResourceKind kind;
    double bytes_per_cycle;
    // run state
    double free_at = 0.0;        // the cycle at which the last reservation ends
    std::int64_t bytes = 0;      // bytes moved in this run
    double busy = 0.0;           // cycles reserved in this run
    std::int32_t owner_agent = -1;   // static mode: who holds the last reservation
    std::int64_t owner_instr = -1;

    const char* kind_name() const { return kind == ResourceKind::Link ? "link" : "dram"; }
    void reset() {
        free_at = 0.0;
        bytes = 0;
        busy = 0.0;
        owner_agent = -1;
        owner_instr = -1;
    }
};

// An agent blocked in ACQUIRE, waiting for `n` units.
struct Waiter {
    std::int32_t agent;
    std::int64_t n;
};

// A counting semaphore (an aie.lock / ObjectFifo slot counter). Waiters are served strictly in
// FIFO order: a new ACQUIRE never bypasses an earlier blocked one.
struct Semaphore {
    std::string name;
    std::int64_t initial;
    std::int64_t maximum;
    // run state
    std::int64_t count = 0;
    std::deque<Waiter> waiters;

    void reset() {
        count = initial;
        waiters.clear();
    }
};

}  // namespace tsim
