// Building the machine (resources, semaphores, agents, programs), validation, run bookkeeping,
// and the dataflow (self-timed) mode. The static-schedule mode is in static_schedule.cpp.
#include "engine.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "errors.hpp"

namespace tsim {

const char* op_name(int op) {
    switch (op) {
        case ACQUIRE: return "ACQUIRE";
        case RELEASE: return "RELEASE";
        case COMPUTE: return "COMPUTE";
        case TRANSFER: return "TRANSFER";
        case LOOP: return "LOOP";
        default: return "?";
    }
}

const char* trace_kind_name(TraceKind k) {
    switch (k) {
        case TraceKind::Compute: return "compute";
        case TraceKind::Transfer: return "transfer";
        case TraceKind::Stall: return "stall";
    }
    return "?";
}

namespace {

constexpr std::int64_t kMaxId = std::numeric_limits<std::int32_t>::max();

std::string quoted(const std::string& s) { return "'" + s + "'"; }

}  // namespace

// ----------------------------------------------------------------------------------------------
// Building the machine

int Simulator::add_resource(const std::string& name, double bytes_per_cycle, ResourceKind kind) {
    check_not_running();
    const char* what = kind == ResourceKind::Link ? "link" : "dram";
    if (!std::isfinite(bytes_per_cycle) || bytes_per_cycle <= 0.0) {
        std::ostringstream os;
        os << what << " " << quoted(name) << ": bytes_per_cycle must be a finite number > 0, got "
           << bytes_per_cycle;
        throw std::invalid_argument(os.str());
    }
    if (resources_.size() >= static_cast<std::size_t>(kMaxId))
        throw std::invalid_argument("too many resources");
    Resource r;
    r.name = name;
    r.kind = kind;
    r.bytes_per_cycle = bytes_per_cycle;
    resources_.push_back(std::move(r));
    auto& index = kind == ResourceKind::Link ? link_index_ : dram_index_;
    index.push_back(static_cast<std::int32_t>(resources_.size() - 1));
    return static_cast<int>(index.size() - 1);
}

int Simulator::add_link(const std::string& name, double bytes_per_cycle) {
    return add_resource(name, bytes_per_cycle, ResourceKind::Link);
}

int Simulator::add_dram(const std::string& name, double bytes_per_cycle) {
    return add_resource(name, bytes_per_cycle, ResourceKind::Dram);
}

int Simulator::add_semaphore(const std::string& name, std::int64_t initial, std::int64_t maximum) {
    check_not_running();
    if (maximum < 0 || initial < 0 || initial > maximum) {
        std::ostringstream os;
        os << "semaphore " << quoted(name) << ": need 0 <= initial <= maximum, got initial="
           << initial << " maximum=" << maximum;
        throw std::invalid_argument(os.str());
    }
    if (sems_.size() >= static_cast<std::size_t>(kMaxId))
        throw std::invalid_argument("too many semaphores");
    Semaphore s;
    s.name = name;
    s.initial = initial;
    s.maximum = maximum;
    s.count = initial;
    sems_.push_back(std::move(s));
    return static_cast<int>(sems_.size() - 1);
}

int Simulator::add_agent(const std::string& name) {
    check_not_running();
    if (agents_.size() >= static_cast<std::size_t>(kMaxId))
        throw std::invalid_argument("too many agents");
    Agent a;
    a.name = name;
    agents_.push_back(std::move(a));
    return static_cast<int>(agents_.size() - 1);
}

void Simulator::check_agent(int agent) const {
    if (agent < 0 || static_cast<std::size_t>(agent) >= agents_.size()) {
        std::ostringstream os;
        os << "agent id " << agent << " out of range (" << agents_.size() << " agents)";
        throw std::invalid_argument(os.str());
    }
}

Instr Simulator::compile(const InstrSpec& spec, std::size_t index, std::size_t size,
                         Program& out) const {
    std::ostringstream where;
    where << "instruction " << index << " (" << op_name(spec.op) << "): ";
    auto fail = [&](const std::string& msg) -> void {
        throw std::invalid_argument(where.str() + msg);
    };
    auto check_time = [&](double v, const char* field) {
        if (!std::isfinite(v) || v < 0.0) {
            std::ostringstream os;
            os << field << " must be a finite number >= 0, got " << v;
            fail(os.str());
        }
    };

    Instr in;
    in.op = spec.op;
    in.has_start = spec.has_start;
    in.start = spec.start;
    if (spec.has_start) check_time(spec.start, "start cycle");

    switch (spec.op) {
        case ACQUIRE:
        case RELEASE: {
            if (spec.sem < 0 || static_cast<std::size_t>(spec.sem) >= sems_.size()) {
                std::ostringstream os;
                os << "semaphore id " << spec.sem << " out of range (" << sems_.size()
                   << " semaphores)";
                fail(os.str());
            }
            if (spec.n < 1) fail("n must be >= 1, got " + std::to_string(spec.n));
            const Semaphore& s = sems_[static_cast<std::size_t>(spec.sem)];
            if (spec.op == ACQUIRE && spec.n > s.maximum) {
                std::ostringstream os;
                os << "n=" << spec.n << " exceeds the maximum " << s.maximum << " of semaphore "
                   << quoted(s.name) << " (could never be satisfied)";
                fail(os.str());
            }
            in.sem = static_cast<std::int32_t>(spec.sem);
            in.n = spec.n;
            break;
        }
        case COMPUTE:
            check_time(spec.cycles, "cycles");
            if (spec.macs < 0) fail("macs must be >= 0, got " + std::to_string(spec.macs));
            in.cycles = spec.cycles;
            in.macs = spec.macs;
            break;
        case TRANSFER: {
            if (spec.bytes < 0) fail("bytes must be >= 0, got " + std::to_string(spec.bytes));
            check_time(spec.overhead, "overhead");
            check_time(spec.latency, "latency");
            in.bytes = spec.bytes;
            in.overhead = spec.overhead;
            in.latency = spec.latency;
            in.res_begin = static_cast<std::uint32_t>(out.res_pool.size());
            double min_bw = std::numeric_limits<double>::infinity();
            auto add = [&](const std::vector<std::int64_t>& ids,
                           const std::vector<std::int32_t>& table, const char* what) {
                for (std::int64_t id : ids) {
                    if (id < 0 || static_cast<std::size_t>(id) >= table.size()) {
                        std::ostringstream os;
                        os << what << " id " << id << " out of range (" << table.size() << " "
                           << what << "s)";
                        fail(os.str());
                    }
                    std::int32_t r = table[static_cast<std::size_t>(id)];
                    out.res_pool.push_back(r);
                    min_bw = std::min(min_bw, resources_[r].bytes_per_cycle);
                }
            };
            add(spec.links, link_index_, "link");
            add(spec.drams, dram_index_, "dram");
            // Each resource once, found by sorting (a route may list many links: no n^2 scan).
            std::vector<std::int32_t> used(out.res_pool.begin() + in.res_begin,
                                           out.res_pool.end());
            std::sort(used.begin(), used.end());
            auto twice = std::adjacent_find(used.begin(), used.end());
            if (twice != used.end()) {
                const Resource& r = resources_[static_cast<std::size_t>(*twice)];
                const auto& table = r.kind == ResourceKind::Link ? link_index_ : dram_index_;
                std::ostringstream os;
                os << r.kind_name() << " id " << (std::find(table.begin(), table.end(), *twice) -
                                                  table.begin())
                   << " (" << quoted(r.name) << ") listed twice";
                fail(os.str());
            }
            if (out.res_pool.size() > std::numeric_limits<std::uint32_t>::max())
                fail("too many links and DRAM channels in one program's transfers");
            in.res_count = static_cast<std::uint32_t>(out.res_pool.size() - in.res_begin);
            in.min_bw = in.res_count ? min_bw : 0.0;
            break;
        }
        case LOOP:
            if (spec.count < 0) fail("count must be >= 0, got " + std::to_string(spec.count));
            if (spec.body_len < 0)
                fail("body_len must be >= 0, got " + std::to_string(spec.body_len));
            if (static_cast<std::uint64_t>(spec.body_len) > size - index - 1) {
                std::ostringstream os;
                os << "body of " << spec.body_len << " instructions runs past the end of the "
                   << "program (" << size << " instructions)";
                fail(os.str());
            }
            in.count = spec.count;
            in.body_len = spec.body_len;
            break;
        default:
            fail("unknown opcode " + std::to_string(spec.op) +
                 " (expected ACQUIRE=0, RELEASE=1, COMPUTE=2, TRANSFER=3, LOOP=4)");
    }
    return in;
}

void Simulator::check_loops(const Agent& a) const {
    // Every nested body must end inside its enclosing body.
    std::vector<std::pair<std::size_t, std::size_t>> open;  // (loop index, body end)
    const auto& ins = a.program.instrs;
    for (std::size_t i = 0; i < ins.size(); ++i) {
        while (!open.empty() && open.back().second <= i) open.pop_back();
        if (ins[i].op != LOOP) continue;
        std::size_t end = i + 1 + static_cast<std::size_t>(ins[i].body_len);
        if (!open.empty() && end > open.back().second) {
            std::ostringstream os;
            os << "agent " << quoted(a.name) << " instruction " << i << " (LOOP): body ends at "
               << end << ", past the end (" << open.back().second
               << ") of the enclosing LOOP at instruction " << open.back().first;
            throw std::invalid_argument(os.str());
        }
        open.emplace_back(i, end);
    }
}

void Simulator::set_program(int agent, const std::vector<InstrSpec>& program) {
    check_not_running();
    check_agent(agent);
    Agent& a = agents_[static_cast<std::size_t>(agent)];
    Program p;
    p.instrs.reserve(program.size());
    for (std::size_t i = 0; i < program.size(); ++i) {
        try {
            p.instrs.push_back(compile(program[i], i, program.size(), p));
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument("agent " + quoted(a.name) + " " + e.what());
        }
    }
    Program old = std::move(a.program);
    a.program = std::move(p);
    try {
        check_loops(a);
    } catch (...) {
        a.program = std::move(old);
        throw;
    }
}

// ----------------------------------------------------------------------------------------------
// Run bookkeeping

void Simulator::Agent::reset() {
    pc = 0;
    executed = 0;
    loops.clear();
    done = false;
    blocked = false;
    blocked_since = 0.0;
    busy = 0.0;
    stall = 0.0;
    finish = 0.0;
    xfer_pc = 0;
    xfer_start = 0.0;
    ready = 0.0;
    bytes_left = 0;
    packet_index = 0;
    prev_end = 0.0;
    prev_instr = -1;
    deferred_at = ~std::uint64_t{0};
}

void Simulator::reset_run_state(const RunOptions& options) {
    if (options.packet_bytes < 1)
        throw std::invalid_argument("packet_bytes must be >= 1, got " +
                                    std::to_string(options.packet_bytes));
    if (options.max_events < 0)
        throw std::invalid_argument("max_events must be >= 0, got " +
                                    std::to_string(options.max_events));
    if (options.max_trace < 0)
        throw std::invalid_argument("max_trace must be >= 0, got " +
                                    std::to_string(options.max_trace));
    opts_ = options;
    packet_bytes_ = static_cast<double>(options.packet_bytes);
    for (auto& r : resources_) r.reset();
    for (auto& s : sems_) s.reset();
    for (auto& a : agents_) a.reset();
    static_progress_ = 0;
    queue_.clear();
    queue_.reserve(agents_.size() * 2 + 16);
    events_ = 0;
    instructions_ = 0;
    // Zero-time instructions (e.g. a long LOOP of RELEASEs) create no events; bound them too so
    // that no input can hang the interpreter.
    const std::uint64_t me = static_cast<std::uint64_t>(options.max_events);
    max_instructions_ = me > (std::numeric_limits<std::uint64_t>::max() >> 5)
                            ? std::numeric_limits<std::uint64_t>::max()
                            : 16 * me + 1000000;
    macs_ = 0;
    trace_.clear();
}

void Simulator::tick(double now) {
    ++events_;
    if (events_ > static_cast<std::uint64_t>(opts_.max_events)) {
        std::ostringstream os;
        os << "max_events=" << opts_.max_events << " exceeded at cycle " << now;
        throw std::runtime_error(os.str());
    }
    if ((events_ & 0x3ffff) == 0 && opts_.poll) opts_.poll();
}

// Instructions take no event of their own (a LOOP of RELEASEs runs in zero time): bound them,
// and check for Ctrl-C among them too.
void Simulator::count_instruction(double now) {
    if (++instructions_ > max_instructions_) {
        std::ostringstream os;
        os << "more than " << max_instructions_ << " instructions executed (max_events="
           << opts_.max_events << ") at cycle " << now;
        throw std::runtime_error(os.str());
    }
    if ((instructions_ & 0xfffff) == 0 && opts_.poll) opts_.poll();
}

void Simulator::add_macs(std::int64_t macs) {
    if (__builtin_add_overflow(macs_, macs, &macs_))
        throw std::runtime_error("the MAC count overflows a 64-bit integer");
}

void Simulator::add_bytes(Resource& r, std::int64_t bytes) {
    if (__builtin_add_overflow(r.bytes, bytes, &r.bytes))
        throw std::runtime_error(std::string("the byte count of ") + r.kind_name() + " " +
                                 quoted(r.name) + " overflows a 64-bit integer");
}

void Simulator::record(std::int32_t agent, TraceKind kind, double start, double end,
                       std::int64_t amount) {
    if (!opts_.trace) return;
    // The trace is kept in memory (and copied to Python): bound it, as max_events bounds time.
    if (trace_.size() >= static_cast<std::uint64_t>(opts_.max_trace)) {
        std::ostringstream os;
        os << "the trace exceeds max_trace=" << opts_.max_trace << " records at cycle " << start
           << ": run without a trace";
        throw std::runtime_error(os.str());
    }
    trace_.push_back(TraceRecord{agent, kind, start, end, amount});
}

std::string Simulator::agent_label(std::int32_t a) const {
    return quoted(agents_[static_cast<std::size_t>(a)].name);
}

Report Simulator::make_report() const {
    // Durations and latencies near the largest double add up to inf: no meaningful timing.
    auto check_finite = [](double t, const std::string& what) {
        if (!std::isfinite(t))
            throw std::runtime_error("simulated time overflows a double (" + what +
                                     " is not finite): a duration or latency is too large");
    };
    for (const auto& a : agents_) {
        check_finite(a.finish, "the finish of agent " + quoted(a.name));
        check_finite(a.busy, "the busy time of agent " + quoted(a.name));
        check_finite(a.stall, "the stall time of agent " + quoted(a.name));
    }
    for (const auto& res : resources_)
        check_finite(res.busy, std::string("the busy time of ") + res.kind_name() + " " +
                                   quoted(res.name));
    Report r;
    r.events = events_;
    r.macs = macs_;
    r.agents.reserve(agents_.size());
    for (const auto& a : agents_) {
        r.agents.push_back(AgentReport{a.name, a.busy, a.stall, a.finish});
        r.cycles = std::max(r.cycles, a.finish);
    }
    for (std::int32_t idx : link_index_) {
        const Resource& res = resources_[static_cast<std::size_t>(idx)];
        r.links.push_back(ResourceReport{res.name, res.bytes, res.busy});
    }
    for (std::int32_t idx : dram_index_) {
        const Resource& res = resources_[static_cast<std::size_t>(idx)];
        r.drams.push_back(ResourceReport{res.name, res.bytes, res.busy});
    }
    r.trace = trace_;
    return r;
}

void Simulator::check_not_running() const {
    if (running_)
        throw std::runtime_error("the simulator is running (called from inside run())");
}

Report Simulator::run(const RunOptions& options) {
    check_not_running();
    reset_run_state(options);
    struct Running {
        bool& flag;
        explicit Running(bool& f) : flag(f) { flag = true; }
        ~Running() { flag = false; }
    } running(running_);
    if (options.static_schedule)
        run_static();
    else
        run_dataflow();
    return make_report();
}

// ----------------------------------------------------------------------------------------------
// Dataflow mode

std::uint32_t Simulator::priority_of_next(const Agent& a) const {
    const auto& ins = a.program.instrs;
    return a.pc < ins.size() && ins[a.pc].op == ACQUIRE ? 1u : 0u;
}

// Leave the loop bodies that end at pc: jump back for another iteration, or pop the frame.
void Simulator::settle(Agent& a) {
    while (!a.loops.empty() && a.pc == a.loops.back().end) {
        LoopFrame& f = a.loops.back();
        if (--f.remaining > 0) {
            a.pc = f.begin;
            return;
        }
        a.loops.pop_back();
    }
}

void Simulator::advance(Agent& a) {
    ++a.executed;
    ++a.pc;
    settle(a);
}

void Simulator::run_dataflow() {
    // Start cycles (static programs) are ignored here, so a static program also runs self-timed.
    for (std::size_t i = 0; i < agents_.size(); ++i)
        queue_.push(0.0, priority_of_next(agents_[i]), static_cast<std::int32_t>(i),
                    EventType::Step);
    while (!queue_.empty()) {
        Event e = queue_.pop();
        tick(e.time);
        if (e.type == EventType::Step)
            step(e.agent, e.time, e.priority());
        else
            packet(e.agent, e.time);
    }
    for (const auto& a : agents_)
        if (!a.done) raise_deadlock();
}

void Simulator::wake(Semaphore& sem, double now) {
    while (!sem.waiters.empty() && sem.waiters.front().n <= sem.count) {
        Waiter w = sem.waiters.front();
        sem.waiters.pop_front();
        sem.count -= w.n;
        Agent& b = agents_[static_cast<std::size_t>(w.agent)];
        b.blocked = false;
        b.stall += now - b.blocked_since;
        if (now > b.blocked_since)  // amount: which ACQUIRE, counted in executed instructions
            record(w.agent, TraceKind::Stall, b.blocked_since, now,
                   static_cast<std::int64_t>(b.executed));
        advance(b);
        queue_.push(now, priority_of_next(b), w.agent, EventType::Step);
    }
}

// Execute the agent's instructions at cycle `now` until one takes time or blocks.
void Simulator::step(std::int32_t ai, double now, std::uint32_t priority) {
    Agent& a = agents_[static_cast<std::size_t>(ai)];
    const auto& ins = a.program.instrs;
    for (;;) {
        count_instruction(now);
        if (a.pc >= ins.size()) {
            a.done = true;
            a.finish = now;
            return;
        }
        const Instr& in = ins[a.pc];
        switch (in.op) {
            case LOOP:
                if (in.count == 0 || in.body_len == 0) {
                    a.pc += 1 + static_cast<std::size_t>(in.body_len);
                    settle(a);
                } else {
                    a.loops.push_back(LoopFrame{a.pc + 1,
                                                a.pc + 1 + static_cast<std::size_t>(in.body_len),
                                                in.count});
                    ++a.pc;
                }
                continue;
            case RELEASE: {
                Semaphore& s = sems_[static_cast<std::size_t>(in.sem)];
                if (in.n > s.maximum - s.count) {
                    std::ostringstream os;
                    os << "semaphore " << quoted(s.name) << " overflow: agent " << quoted(a.name)
                       << " instruction " << a.pc << " releases " << in.n << " at cycle " << now
                       << " with count " << s.count << " (maximum " << s.maximum << ")";
                    throw std::runtime_error(os.str());
                }
                s.count += in.n;
                wake(s, now);
                advance(a);
                continue;
            }
            case ACQUIRE: {
                // Releases precede acquires at equal time: let pending priority-0 events at
                // this cycle run first.
                if (priority == 0 && !queue_.empty() && queue_.top().time == now &&
                    queue_.top().priority() == 0) {
                    queue_.push(now, 1, ai, EventType::Step);
                    return;
                }
                Semaphore& s = sems_[static_cast<std::size_t>(in.sem)];
                if (s.waiters.empty() && s.count >= in.n) {
                    s.count -= in.n;
                    advance(a);
                    continue;
                }
                s.waiters.push_back(Waiter{ai, in.n});
                a.blocked = true;
                a.blocked_since = now;
                return;
            }
            case COMPUTE: {
                a.busy += in.cycles;
                add_macs(in.macs);
                record(ai, TraceKind::Compute, now, now + in.cycles, in.macs);
                advance(a);
                if (in.cycles == 0.0) continue;
                queue_.push(now + in.cycles, priority_of_next(a), ai, EventType::Step);
                return;
            }
            case TRANSFER: {
                a.xfer_start = now;
                a.xfer_pc = a.pc;
                if (in.bytes == 0 || in.res_count == 0) {
                    double end = now + in.overhead + in.latency;
                    a.busy += end - now;
                    record(ai, TraceKind::Transfer, now, end, in.bytes);
                    advance(a);
                    queue_.push(end, priority_of_next(a), ai, EventType::Step);
                    return;
                }
                a.bytes_left = in.bytes;
                a.packet_index = 0;
                a.ready = now + in.overhead;
                queue_.push(a.ready, 0, ai, EventType::Packet);
                return;
            }
            default:
                throw std::logic_error("corrupt program");  // unreachable: validated
        }
    }
}

// Inject the next packet of the agent's transfer: it needs all of the transfer's resources at
// once, starts when they are all free, and the following packet is ready one bottleneck
// packet-time later.
void Simulator::packet(std::int32_t ai, double now) {
    Agent& a = agents_[static_cast<std::size_t>(ai)];
    const Instr& in = a.program.instrs[a.xfer_pc];
    const std::int32_t* res = a.program.res_pool.data() + in.res_begin;
    const std::int64_t size = std::min<std::int64_t>(a.bytes_left, opts_.packet_bytes);
    const double fsize = static_cast<double>(size);

    double s = now;
    for (std::uint32_t k = 0; k < in.res_count; ++k)
        s = std::max(s, resources_[static_cast<std::size_t>(res[k])].free_at);
    for (std::uint32_t k = 0; k < in.res_count; ++k) {
        Resource& r = resources_[static_cast<std::size_t>(res[k])];
        const double hold = fsize / r.bytes_per_cycle;
        r.free_at = s + hold;
        add_bytes(r, size);
        r.busy += hold;
    }
    a.ready = s + fsize / in.min_bw;
    a.bytes_left -= size;
    ++a.packet_index;
    if (a.bytes_left > 0) {
        queue_.push(a.ready, 0, ai, EventType::Packet);
        return;
    }
    const double end = a.ready + in.latency;
    a.busy += end - a.xfer_start;
    record(ai, TraceKind::Transfer, a.xfer_start, end, in.bytes);
    advance(a);
    queue_.push(end, priority_of_next(a), ai, EventType::Step);
}

void Simulator::raise_deadlock() const {
    std::ostringstream os;
    std::size_t waiting = 0, listed = 0;
    for (const auto& a : agents_)
        if (!a.done) ++waiting;
    os << "deadlock: no event left but " << waiting << " agent" << (waiting == 1 ? "" : "s")
       << " not finished:";
    constexpr std::size_t kCap = 20;
    for (std::size_t i = 0; i < agents_.size() && listed < kCap; ++i) {
        const Agent& a = agents_[i];
        if (a.done) continue;
        ++listed;
        os << "\n  agent " << quoted(a.name) << " pc=" << a.pc;
        const auto& ins = a.program.instrs;
        if (a.blocked && a.pc < ins.size() && ins[a.pc].op == ACQUIRE) {
            const Semaphore& s = sems_[static_cast<std::size_t>(ins[a.pc].sem)];
            os << " waits on semaphore " << quoted(s.name) << " for n=" << ins[a.pc].n
               << " (count=" << s.count << ", since cycle " << a.blocked_since << ")";
            // The wait-for edges: which agents could still release it.
            os << "; released by:";
            std::size_t shown = 0, releasers = 0;
            for (std::size_t j = 0; j < agents_.size(); ++j) {
                const Agent& b = agents_[j];
                bool releases = false;
                for (const Instr& in : b.program.instrs)
                    if (in.op == RELEASE && in.sem == ins[a.pc].sem) releases = true;
                if (!releases) continue;
                if (++releasers > 4) continue;
                ++shown;
                os << " " << quoted(b.name) << (b.done ? " (finished)" : " (waiting)");
            }
            if (releasers == 0) os << " no agent";
            if (releasers > shown) os << " and " << (releasers - shown) << " more";
        } else {
            os << " is not blocked (internal inconsistency)";
        }
    }
    if (waiting > listed) os << "\n  ... and " << (waiting - listed) << " more";
    throw DeadlockError(os.str());
}

}  // namespace tsim
