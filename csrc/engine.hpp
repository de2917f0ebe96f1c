// The discrete-event simulator of a spatial dataflow accelerator: sequential agents (DMA engines,
// compute cores) synchronising through counting semaphores and moving data as packets over
// shared bandwidth resources (NoC links, DRAM channels).
//
// Two modes:
//   dataflow (run)         agents run as soon as they can; resources are arbitrated first come,
//                          first served per packet; a stuck system raises DeadlockError.
//   static (run, static)   every instruction has a given start cycle; the engine checks the
//                          schedule (ordering, data presence, no double-booked resource) and
//                          raises ScheduleError on the first violation in time order.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "event_queue.hpp"
#include "program.hpp"
#include "resources.hpp"

namespace tsim {

struct RunOptions {
    std::int64_t packet_bytes = 2048;
    bool static_schedule = false;
    bool trace = false;
    std::int64_t max_events = 1000000000;
    std::int64_t max_trace = 10000000;  // trace records kept with trace (about 32 B each)
    // Called every few hundred thousand events (the bindings check for Ctrl-C here); may throw.
    std::function<void()> poll;
};

enum class TraceKind : std::uint8_t { Compute = 0, Transfer = 1, Stall = 2 };
const char* trace_kind_name(TraceKind k);

struct TraceRecord {
    std::int32_t agent;
    TraceKind kind;
    double start;
    double end;
    std::int64_t amount;  // bytes for transfers, MACs for computes; for stalls, which ACQUIRE
                          // (its index among the agent's executed instructions, loops unrolled)
};

struct AgentReport {
    std::string name;
    double busy = 0.0;
    double stall = 0.0;
    double finish = 0.0;
};

struct ResourceReport {
    std::string name;
    std::int64_t bytes = 0;
    double busy = 0.0;
};

struct Report {
    double cycles = 0.0;
    std::uint64_t events = 0;
    std::int64_t macs = 0;
    std::vector<AgentReport> agents;
    std::vector<ResourceReport> links;
    std::vector<ResourceReport> drams;
    std::vector<TraceRecord> trace;
};

class Simulator {
public:
    int add_link(const std::string& name, double bytes_per_cycle);
    int add_dram(const std::string& name, double bytes_per_cycle);
    int add_semaphore(const std::string& name, std::int64_t initial, std::int64_t maximum);
    int add_agent(const std::string& name);
    void set_program(int agent, const std::vector<InstrSpec>& program);

    Report run(const RunOptions& options);

    int num_links() const { return static_cast<int>(link_index_.size()); }
    int num_drams() const { return static_cast<int>(dram_index_.size()); }
    int num_semaphores() const { return static_cast<int>(sems_.size()); }
    int num_agents() const { return static_cast<int>(agents_.size()); }

private:
    struct LoopFrame {
        std::size_t begin;        // first body instruction
        std::size_t end;          // one past the last body instruction
        std::int64_t remaining;   // iterations left, including the current one
    };

    struct Agent {
        std::string name;
        Program program;
        // run state
        std::size_t pc = 0;
        std::uint64_t executed = 0;  // instructions run so far, loops unrolled (LOOPs not counted)
        std::vector<LoopFrame> loops;
        bool done = false;
        bool blocked = false;
        double blocked_since = 0.0;
        double busy = 0.0;
        double stall = 0.0;
        double finish = 0.0;
        // the transfer in progress
        std::size_t xfer_pc = 0;
        double xfer_start = 0.0;
        double ready = 0.0;        // when the next packet may be injected
        std::int64_t bytes_left = 0;
        std::int64_t packet_index = 0;
        // static mode: when the previous instruction ends
        double prev_end = 0.0;
        std::int64_t prev_instr = -1;
        // static mode: the progress count when this agent's ACQUIRE was last deferred
        std::uint64_t deferred_at = ~std::uint64_t{0};

        void reset();
    };

    int add_resource(const std::string& name, double bytes_per_cycle, ResourceKind kind);
    void check_agent(int agent) const;
    Instr compile(const InstrSpec& spec, std::size_t index, std::size_t size, Program& out) const;
    void check_loops(const Agent& a) const;

    void reset_run_state(const RunOptions& options);
    Report make_report() const;

    // dataflow mode
    void run_dataflow();
    void step(std::int32_t a, double now, std::uint32_t priority);
    void packet(std::int32_t a, double now);
    void advance(Agent& a);
    void settle(Agent& a);
    void wake(Semaphore& sem, double now);
    std::uint32_t priority_of_next(const Agent& a) const;
    [[noreturn]] void raise_deadlock() const;

    // static mode
    void run_static();
    void static_instr(std::int32_t a, double now);
    std::uint64_t static_progress_ = 0;  // static mode: instructions and packets completed
    void static_packet(std::int32_t a, double now);
    void push_next_static(std::int32_t a);

    void tick(double now);
    void count_instruction(double now);
    void add_macs(std::int64_t macs);
    static void add_bytes(Resource& r, std::int64_t bytes);
    void check_not_running() const;
    void record(std::int32_t agent, TraceKind kind, double start, double end, std::int64_t amount);
    std::string agent_label(std::int32_t a) const;

    std::vector<Resource> resources_;
    std::vector<std::int32_t> link_index_;  // link id -> resources_ index
    std::vector<std::int32_t> dram_index_;  // dram id -> resources_ index
    std::vector<Semaphore> sems_;
    std::vector<Agent> agents_;

    // run state
    bool running_ = false;
    EventQueue queue_;
    RunOptions opts_;
    double packet_bytes_ = 2048.0;
    std::uint64_t events_ = 0;
    std::uint64_t instructions_ = 0;
    std::uint64_t max_instructions_ = 0;
    std::int64_t macs_ = 0;
    std::vector<TraceRecord> trace_;
};

}  // namespace tsim
