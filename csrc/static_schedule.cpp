// Static mode: for statically scheduled parts (Groq/LPX style), where the compiler fixes every
// instruction's start cycle. The engine replays the schedule in start-time order and verifies it
// instead of arbitrating:
//   1. an instruction may not start before the same agent's previous instruction ends;
//   2. an ACQUIRE must be satisfiable at its start cycle ("data not present" otherwise); a
//      release made in the same cycle counts, whatever the order of the cycle's other events, so
//      a failing ACQUIRE is retried after them and fails only if nothing else progressed;
//   3. a TRANSFER's packets go back to back from start + overhead, and a packet may not start
//      while one of its resources is still booked by an earlier packet ("double-booked").
// The first violation in time order raises ScheduleError.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "engine.hpp"
#include "errors.hpp"

namespace tsim {

namespace {

// Start cycles usually come from another run's trace and compare bit-exactly; the tolerance
// only absorbs rounding in hand-computed schedules.
double slack(double t) { return 1e-9 * std::max(1.0, std::fabs(t)); }

}  // namespace

void Simulator::push_next_static(std::int32_t ai) {
    Agent& a = agents_[static_cast<std::size_t>(ai)];
    const auto& ins = a.program.instrs;
    if (a.pc >= ins.size()) {
        a.done = true;
        return;
    }
    const Instr& in = ins[a.pc];
    queue_.push(in.start, in.op == ACQUIRE ? 1u : 0u, ai, EventType::Step);
}

void Simulator::run_static() {
    for (const auto& a : agents_) {
        const auto& ins = a.program.instrs;
        for (std::size_t i = 0; i < ins.size(); ++i) {
            std::ostringstream os;
            os << "static mode: agent '" << a.name << "' instruction " << i << " ("
               << op_name(ins[i].op) << ") ";
            if (ins[i].op == LOOP) throw std::invalid_argument(os.str() + "is a LOOP (not allowed)");
            if (!ins[i].has_start)
                throw std::invalid_argument(os.str() + "has no start cycle (one extra element)");
        }
    }
    for (std::size_t i = 0; i < agents_.size(); ++i) push_next_static(static_cast<std::int32_t>(i));
    while (!queue_.empty()) {
        Event e = queue_.pop();
        tick(e.time);
        if (e.type == EventType::Step)
            static_instr(e.agent, e.time);
        else
            static_packet(e.agent, e.time);
    }
}

void Simulator::static_instr(std::int32_t ai, double now) {
    Agent& a = agents_[static_cast<std::size_t>(ai)];
    const Instr& in = a.program.instrs[a.pc];
    ++instructions_;
    auto where = [&]() {
        std::ostringstream os;
        os << "agent '" << a.name << "' instruction " << a.pc << " (" << op_name(in.op)
           << ") at cycle " << now;
        return os.str();
    };
    if (now + slack(now) < a.prev_end) {
        std::ostringstream os;
        os << where() << " starts before its previous instruction " << a.prev_instr
           << " ends at cycle " << a.prev_end;
        throw ScheduleError(os.str());
    }

    double end = now;
    switch (in.op) {
        case ACQUIRE: {
            Semaphore& s = sems_[static_cast<std::size_t>(in.sem)];
            if (s.count < in.n && a.deferred_at != static_progress_) {
                a.deferred_at = static_progress_;  // retry after this cycle's other events
                --instructions_;
                queue_.push(now, 2u, ai, EventType::Step);
                return;
            }
            if (s.count < in.n) {
                std::ostringstream os;
                os << "data not present: " << where() << ": semaphore '" << s.name
                   << "' has count " << s.count << ", needs " << in.n;
                throw ScheduleError(os.str());
            }
            s.count -= in.n;
            if (now > a.prev_end) {
                a.stall += now - a.prev_end;
                record(ai, TraceKind::Stall, a.prev_end, now, static_cast<std::int64_t>(a.pc));
            }
            break;
        }
        case RELEASE: {
            Semaphore& s = sems_[static_cast<std::size_t>(in.sem)];
            if (in.n > s.maximum - s.count) {
                std::ostringstream os;
                os << "semaphore '" << s.name << "' overflow: " << where() << " releases "
                   << in.n << " with count " << s.count << " (maximum " << s.maximum << ")";
                throw ScheduleError(os.str());
            }
            s.count += in.n;
            break;
        }
        case COMPUTE:
            end = now + in.cycles;
            a.busy += in.cycles;
            add_macs(in.macs);
            record(ai, TraceKind::Compute, now, end, in.macs);
            break;
        case TRANSFER: {
            a.xfer_pc = a.pc;
            a.xfer_start = now;
            if (in.bytes == 0 || in.res_count == 0) {
                end = now + in.overhead + in.latency;
            } else {
                // Every packet is an event: more than max_events allows can never finish (and
                // summing their times below would take as long).
                const std::uint64_t packets = static_cast<std::uint64_t>(
                    (in.bytes - 1) / opts_.packet_bytes + 1);
                if (packets > static_cast<std::uint64_t>(opts_.max_events) - std::min(
                                  events_, static_cast<std::uint64_t>(opts_.max_events))) {
                    std::ostringstream os;
                    os << "max_events=" << opts_.max_events << " exceeded at cycle " << now
                       << ": " << where() << " moves " << in.bytes << " bytes as " << packets
                       << " packets of " << opts_.packet_bytes;
                    throw std::runtime_error(os.str());
                }
                // The same arithmetic as an uncontended dataflow transfer, so that start cycles
                // copied from a dataflow trace compare exactly.
                double ready = now + in.overhead;
                std::uint64_t packet = 0;
                for (std::int64_t left = in.bytes; left > 0; left -= opts_.packet_bytes) {
                    ready = ready + static_cast<double>(std::min(left, opts_.packet_bytes)) /
                                        in.min_bw;
                    if ((++packet & 0x3ffff) == 0 && opts_.poll) opts_.poll();
                }
                end = ready + in.latency;
                a.bytes_left = in.bytes;
                a.packet_index = 0;
                queue_.push(now + in.overhead, 0, ai, EventType::Packet);
            }
            a.busy += end - now;
            record(ai, TraceKind::Transfer, now, end, in.bytes);
            break;
        }
        default:
            throw std::logic_error("corrupt static program");  // unreachable: validated
    }
    a.prev_end = end;
    a.prev_instr = static_cast<std::int64_t>(a.pc);
    a.finish = std::max(a.finish, end);
    a.deferred_at = ~std::uint64_t{0};
    ++static_progress_;
    ++a.pc;
    push_next_static(ai);
}

void Simulator::static_packet(std::int32_t ai, double now) {
    Agent& a = agents_[static_cast<std::size_t>(ai)];
    const Instr& in = a.program.instrs[a.xfer_pc];
    const std::int32_t* res = a.program.res_pool.data() + in.res_begin;
    const std::int64_t size = std::min<std::int64_t>(a.bytes_left, opts_.packet_bytes);
    const double fsize = static_cast<double>(size);

    for (std::uint32_t k = 0; k < in.res_count; ++k) {
        const Resource& r = resources_[static_cast<std::size_t>(res[k])];
        if (r.free_at > now + slack(now)) {
            std::ostringstream os;
            os << r.kind_name() << " '" << r.name << "' double-booked: agent '" << a.name
               << "' instruction " << a.xfer_pc << " packet " << a.packet_index << " at cycle "
               << now << " overlaps agent '"
               << agents_[static_cast<std::size_t>(r.owner_agent)].name << "' instruction "
               << r.owner_instr << ", which holds it until cycle " << r.free_at;
            throw ScheduleError(os.str());
        }
    }
    for (std::uint32_t k = 0; k < in.res_count; ++k) {
        Resource& r = resources_[static_cast<std::size_t>(res[k])];
        const double hold = fsize / r.bytes_per_cycle;
        r.free_at = now + hold;
        add_bytes(r, size);
        r.busy += hold;
        r.owner_agent = ai;
        r.owner_instr = static_cast<std::int64_t>(a.xfer_pc);
    }
    a.bytes_left -= size;
    ++a.packet_index;
    ++static_progress_;
    if (a.bytes_left > 0) queue_.push(now + fsize / in.min_bw, 0, ai, EventType::Packet);
}

}  // namespace tsim
